package server

import (
	"context"
	"log/slog"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/doctor"
)

// DoctorOptions says what cfg asks of the host, for `carryover doctor` and the summary serve logs.
func DoctorOptions(cfg *configs.Config) doctor.Options {
	o := doctor.Options{DataDir: cfg.DataDir, Sandbox: cfg.Sandbox.Enabled, LazyRestore: cfg.Persistence.LazyRestore, Bwrap: cfg.Sandbox.Bwrap,
		UIDBase: cfg.Sandbox.UIDBase, Python: cfg.Kernel.Python}
	if cfg.Store.Driver == "postgres" {
		o.PostgresDSN = cfg.Store.DSN
	}
	if s := cfg.Chunks.S3; s.Bucket != "" {
		o.S3 = &doctor.S3{Endpoint: s.Endpoint, Bucket: s.Bucket, Region: s.Region, AccessKey: s.AccessKey,
			SecretKey: s.SecretKey, PathStyle: s.PathStyle}
	}
	return o
}

// logHostCheck logs the host check at start: one summary line, and each check that did not pass
// with its fix, so "SANDBOX UNAVAILABLE" below it comes with the reason and the remedy. The store's
// reachability and the kernel's Python are left out: opening the store and the warm pool report them.
func logHostCheck(ctx context.Context, cfg *configs.Config, log *slog.Logger) {
	o := DoctorOptions(cfg)
	o.SkipReachable, o.SkipPython = true, true
	r := doctor.Run(ctx, o)
	for _, c := range r {
		switch c.Status {
		case doctor.Fail:
			log.Error("host check: "+c.Name+" FAILED", "detail", c.Detail, "fix", c.Fix)
		case doctor.Warn:
			log.Warn("host check: "+c.Name, "detail", c.Detail, "fix", c.Fix)
		}
	}
	log.Info("host check (carryover doctor for details): " + r.Summary())
}
