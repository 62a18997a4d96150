package carryover

import (
	"fmt"
	"time"
)

// The codes of tenants and keys (docs/tenants.md). HTTP: forbidden 403, quota_exceeded and
// rate_limited 429 (rate_limited with a Retry-After header).
const (
	CodeForbidden     Code = "forbidden"      // a valid credential whose scope does not allow the request
	CodeQuotaExceeded Code = "quota_exceeded" // a tenant quota is used up: details name it, its limit and use
	CodeRateLimited   Code = "rate_limited"   // the credential's request rate is over its limit
)

// Quotas are the limits of one tenant (config quotas and tenants.<name>.quotas); zero means no
// limit.
type Quotas struct {
	Sessions    int           // sessions that exist (any state) in the store
	LiveKernels int           // sessions with a live kernel on one node at once
	StoredBytes int64         // bytes of the tenant's checkpoints (the workspace files and namespaces saved)
	CPUSeconds  float64       // kernel and command CPU seconds per CPUPeriod
	CPUPeriod   time.Duration // the window CPUSeconds counts in (fixed windows from the Unix epoch)
}

// The names of the quotas, as an error's details carry them.
const (
	QuotaSessions    = "sessions"
	QuotaLiveKernels = "live_kernels"
	QuotaStoredBytes = "stored_bytes"
	QuotaCPUSeconds  = "cpu_seconds"
)

// QuotaError is the refusal of a request that would go over quota name of tenant: its message and
// its details both say the quota, its limit and the use so far.
func QuotaError(tenant, name string, limit, use any) *Error {
	return Errorf(CodeQuotaExceeded, "tenant %q is at its %s quota: %v used of %v", tenant, name, fmtNum(use), fmtNum(limit)).
		WithDetails("quota", name, "limit", limit, "use", use, "tenant", tenant)
}

func fmtNum(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprint(v)
}
