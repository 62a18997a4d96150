// Package metrics is the session service's Prometheus metrics, served at /metrics, registered on
// the registry the service is given (the node's ledger has its own: package capacity's). Every
// label is from a fixed set; the per-tenant ones are bounded (tenants.go).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/carryover/carryover/server/capacity"
)

// Metrics are the service's metrics.
type Metrics struct {
	Runs               *prometheus.CounterVec // by final status
	RunSeconds         prometheus.Histogram
	CheckpointBytes    prometheus.Counter
	CheckpointSeconds  prometheus.Histogram
	KernelsLive        prometheus.Gauge
	DroppedFrames      prometheus.Counter
	KernelDeaths       prometheus.Counter
	RecordFailures     prometheus.Counter
	LimitHits          *prometheus.CounterVec // sandbox limit hits by limit
	Hibernations       *prometheus.CounterVec // by reason
	SessionsHibernated prometheus.Gauge
	KernelMemory       prometheus.Gauge
	PoolIdle           prometheus.Gauge
	PoolTarget         prometheus.Gauge
	Tenants            *TenantCollector // per tenant, bounded (tenants.go)
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

// New makes the service's metrics on r (nil: registered nowhere).
func New(r prometheus.Registerer) *Metrics {
	return &Metrics{
		Runs: counterVec(r, "carryover_runs_total", "Runs by final status (ok, error, aborted, timeout, kernel_died).", "status"),
		RunSeconds: capacity.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "carryover_run_seconds", Help: "Wall time of runs including their checkpoint.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		})),
		CheckpointBytes: counter(r, "carryover_checkpoint_bytes_total", "Bytes newly written by checkpoints."),
		CheckpointSeconds: capacity.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "carryover_checkpoint_seconds", Help: "Time taken by checkpoints.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		})),
		KernelsLive:   gauge(r, "carryover_kernels_live", "Kernels currently attached to sessions."),
		DroppedFrames: counter(r, "carryover_ws_dropped_frames_total", "Websocket frames dropped for slow clients (never from the record)."),
		KernelDeaths:  counter(r, "carryover_kernel_deaths_total", "Kernels that died unexpectedly."),
		RecordFailures: counter(r, "carryover_record_failures_total",
			"Session, history or cost writes that failed (each is logged and, where a turn answers, reported in it)."),
		LimitHits: counterVec(r, "carryover_sandbox_limit_hits_total",
			"Sandbox limit hits by limit (memory: OOM kills, pids: fork refusals).", "limit"),
		Hibernations: counterVec(r, "carryover_hibernations_total",
			"Sessions hibernated, by reason (capacity, memory, idle, requested).", "reason"),
		SessionsHibernated: gauge(r, "carryover_sessions_hibernated",
			"Running sessions without a live kernel (hibernated), at the last loop tick."),
		KernelMemory: gauge(r, "carryover_kernel_memory_bytes", "Resident memory of the live kernels at their last sample."),
		PoolIdle:     gauge(r, "carryover_pool_idle", "Warm kernels waiting in the pool."),
		PoolTarget:   gauge(r, "carryover_pool_target", "What the warm pool refills to now (pool.size, more under a burst of claims)."),
		Tenants:      capacity.Register(r, NewTenantCollector()),
	}
}
