package configs

import "fmt"

// RateLimitConfig is auth.rate_limit: each credential's token bucket.
type RateLimitConfig struct {
	RequestsPerSecond float64 `mapstructure:"requests_per_second"`
	Burst             int     `mapstructure:"burst"`
}

// QuotaConfig is quotas: every tenant's limits (0: none).
type QuotaConfig struct {
	Sessions         int     `mapstructure:"sessions"`
	LiveKernels      int     `mapstructure:"live_kernels"`
	StoredBytes      int64   `mapstructure:"stored_bytes"`
	CPUSeconds       float64 `mapstructure:"cpu_seconds"`
	CPUPeriodSeconds float64 `mapstructure:"cpu_period_seconds"`
}

// TenantConfig is tenants.<name>: one tenant's own settings.
type TenantConfig struct {
	Quotas TenantQuotas `mapstructure:"quotas"`
}

// TenantQuotas are one tenant's quotas; a nil field keeps the value of quotas.
type TenantQuotas struct {
	Sessions    *int     `mapstructure:"sessions"`
	LiveKernels *int     `mapstructure:"live_kernels"`
	StoredBytes *int64   `mapstructure:"stored_bytes"`
	CPUSeconds  *float64 `mapstructure:"cpu_seconds"`
}

// QuotasOf is tenant's quotas: quotas, with what tenants.<tenant>.quotas sets in its place.
func (c *Config) QuotasOf(tenant string) QuotaConfig {
	q := c.Quotas
	t := c.Tenants[tenant].Quotas
	if t.Sessions != nil {
		q.Sessions = *t.Sessions
	}
	if t.LiveKernels != nil {
		q.LiveKernels = *t.LiveKernels
	}
	if t.StoredBytes != nil {
		q.StoredBytes = *t.StoredBytes
	}
	if t.CPUSeconds != nil {
		q.CPUSeconds = *t.CPUSeconds
	}
	return q
}

// validateTenants refuses negative limits and rates.
func (c *Config) validateTenants() error {
	if c.Auth.RateLimit.RequestsPerSecond < 0 || c.Auth.RateLimit.Burst < 0 {
		return fmt.Errorf("configs: auth.rate_limit: requests_per_second and burst must be >= 0")
	}
	if c.Quotas.CPUPeriodSeconds <= 0 {
		return fmt.Errorf("configs: quotas.cpu_period_seconds must be > 0")
	}
	check := func(where string, q QuotaConfig) error {
		if q.Sessions < 0 || q.LiveKernels < 0 || q.StoredBytes < 0 || q.CPUSeconds < 0 {
			return fmt.Errorf("configs: %s: limits must be >= 0 (0: no limit)", where)
		}
		return nil
	}
	if err := check("quotas", c.Quotas); err != nil {
		return err
	}
	for name := range c.Tenants {
		if err := check("tenants."+name+".quotas", c.QuotasOf(name)); err != nil {
			return err
		}
	}
	return nil
}
