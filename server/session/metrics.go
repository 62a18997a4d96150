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
