package session

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/carryover/carryover/server/capacity"
)

// metrics are the service's Prometheus metrics, served at /metrics, registered on the registry of
// Options.Metrics (the node's ledger has its own: capacity's). Every label is from a fixed set.
type metrics struct {
	runs               *prometheus.CounterVec // by final status
	runSeconds         prometheus.Histogram
	checkpointBytes    prometheus.Counter
	checkpointSeconds  prometheus.Histogram
	kernelsLive        prometheus.Gauge
	droppedFrames      prometheus.Counter
	kernelDeaths       prometheus.Counter
	recordFailures     prometheus.Counter
	limitHits          *prometheus.CounterVec // sandbox limit hits by limit
	hibernations       *prometheus.CounterVec // by reason
	sessionsHibernated prometheus.Gauge
	kernelMemory       prometheus.Gauge
	poolIdle           prometheus.Gauge
	poolTarget         prometheus.Gauge
	tenants            *tenantCollector // per tenant, bounded (metrics_tenant.go)
}

func counter(r prometheus.Registerer, name, help string) prometheus.Counter {
	return capacity.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

func gauge(r prometheus.Registerer, name, help string) prometheus.Gauge {
	return capacity.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

func counterVec(r prometheus.Registerer, name, help, label string) *prometheus.CounterVec {
	return capacity.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label}))
}

// newMetrics makes the service's metrics on r (nil: registered nowhere).
func newMetrics(r prometheus.Registerer) *metrics {
	return &metrics{
		runs: counterVec(r, "carryover_runs_total", "Runs by final status (ok, error, aborted, timeout, kernel_died).", "status"),
		runSeconds: capacity.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "carryover_run_seconds", Help: "Wall time of runs including their checkpoint.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		})),
		checkpointBytes: counter(r, "carryover_checkpoint_bytes_total", "Bytes newly written by checkpoints."),
		checkpointSeconds: capacity.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "carryover_checkpoint_seconds", Help: "Time taken by checkpoints.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		})),
		kernelsLive:   gauge(r, "carryover_kernels_live", "Kernels currently attached to sessions."),
		droppedFrames: counter(r, "carryover_ws_dropped_frames_total", "Websocket frames dropped for slow clients (never from the record)."),
		kernelDeaths:  counter(r, "carryover_kernel_deaths_total", "Kernels that died unexpectedly."),
		recordFailures: counter(r, "carryover_record_failures_total",
			"Session, history or cost writes that failed (each is logged and, where a turn answers, reported in it)."),
		limitHits: counterVec(r, "carryover_sandbox_limit_hits_total",
			"Sandbox limit hits by limit (memory: OOM kills, pids: fork refusals).", "limit"),
		hibernations: counterVec(r, "carryover_hibernations_total",
			"Sessions hibernated, by reason (capacity, memory, idle, requested).", "reason"),
		sessionsHibernated: gauge(r, "carryover_sessions_hibernated",
			"Running sessions without a live kernel (hibernated), at the last loop tick."),
		kernelMemory: gauge(r, "carryover_kernel_memory_bytes", "Resident memory of the live kernels at their last sample."),
		poolIdle:     gauge(r, "carryover_pool_idle", "Warm kernels waiting in the pool."),
		poolTarget:   gauge(r, "carryover_pool_target", "What the warm pool refills to now (pool.size, more under a burst of claims)."),
		tenants:      capacity.Register(r, newTenantCollector()),
	}
}
