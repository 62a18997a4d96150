package session

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Prometheus metrics, served at /metrics.
var (
	runsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "carryover_runs_total", Help: "Runs by final status (ok, error, aborted, timeout, kernel_died).",
	}, []string{"status"})
	runSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "carryover_run_seconds", Help: "Wall time of runs including their checkpoint.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
	})
	checkpointBytes = promauto.NewCounter(prometheus.CounterOpts{
		Name: "carryover_checkpoint_bytes_total", Help: "Bytes newly written by checkpoints.",
	})
	checkpointSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "carryover_checkpoint_seconds", Help: "Time taken by checkpoints.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
	})
	kernelsLive = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "carryover_kernels_live", Help: "Kernels currently attached to sessions.",
	})
	droppedFrames = promauto.NewCounter(prometheus.CounterOpts{
		Name: "carryover_ws_dropped_frames_total", Help: "Websocket frames dropped for slow clients (never from the record).",
	})
	kernelDeaths = promauto.NewCounter(prometheus.CounterOpts{
		Name: "carryover_kernel_deaths_total", Help: "Kernels that died unexpectedly.",
	})
)

var recordFailures = promauto.NewCounter(prometheus.CounterOpts{
	Name: "carryover_record_failures_total", Help: "Session, history or cost writes that failed (each is logged and, where a turn answers, reported in it).",
})

// Capacity metrics (capacity*.go, docs/capacity.md). Every label is from a fixed set: a reason.
var (
	capacityMax = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "carryover_capacity_max_live_kernels", Help: "Live kernels this node holds at most (0: no limit).",
	})
	capacityQueued = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "carryover_capacity_queued", Help: "Claims of a kernel waiting for a free slot.",
	})
	capacityRefusals = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "carryover_capacity_refusals_total", Help: "Claims refused with 429 capacity, by reason (busy: the queue time ran out; queue_full).",
	}, []string{"reason"})
	hibernations = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "carryover_hibernations_total", Help: "Sessions hibernated, by reason (capacity, memory, idle, requested).",
	}, []string{"reason"})
	sessionsHibernated = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "carryover_sessions_hibernated", Help: "Running sessions without a live kernel (hibernated), at the last loop tick.",
	})
	kernelMemoryBytes = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "carryover_kernel_memory_bytes", Help: "Resident memory of the live kernels at their last sample.",
	})
	poolIdle = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "carryover_pool_idle", Help: "Warm kernels waiting in the pool.",
	})
	poolTarget = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "carryover_pool_target", Help: "What the warm pool refills to now (pool.size, more under a burst of claims).",
	})
)
