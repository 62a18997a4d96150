package capacity

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the ledger's (docs/capacity.md). Every label is from a fixed set: a reason.
type metrics struct {
	max      prometheus.Gauge
	queued   prometheus.Gauge
	refusals *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) metrics {
	return metrics{
		max: Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "carryover_capacity_max_live_kernels", Help: "Live kernels this node holds at most (0: no limit).",
		})),
		queued: Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "carryover_capacity_queued", Help: "Claims of a kernel waiting for a free slot.",
		})),
		refusals: Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carryover_capacity_refusals_total", Help: "Claims refused with 429 capacity, by reason (busy: the queue time ran out; queue_full).",
		}, []string{"reason"})),
	}
}

// Register registers c on r and returns it; when r (nil: nowhere) already has a collector of that
// name, it returns that one, so two services of one process (tests) on the default registry share
// their series, as package-level metrics did.
func Register[C prometheus.Collector](r prometheus.Registerer, c C) C {
	if r == nil {
		return c
	}
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
		panic(err)
	}
	return c
}
