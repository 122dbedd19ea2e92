package synth

import (
	"fmt"
	"regexp"
	"time"
)

// Defaults applied by [Options] zero values.
const (
	DefaultSeed   int64 = 1
	DefaultTenant       = "general-hospital"
)

// DefaultNow is the reference date used when [Options.Now] is zero. Output
// never depends on the wall clock.
var DefaultNow = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// Options configure [Generate]. Zero values are documented per field.
type Options struct {
	// Patients is the number of patients to generate; it must be >= 1.
	Patients int
	// Seed selects the data set; 0 means DefaultSeed (1).
	Seed int64
	// Tenant is the URI host of every resource; "" means DefaultTenant.
	// It must match [a-z0-9]([a-z0-9-]*[a-z0-9])?.
	Tenant string
	// Now is the reference date for ages and dates; the zero value means
	// DefaultNow (2026-01-01T00:00:00Z). It is truncated to the second and
	// converted to UTC.
	Now time.Time
	// Progress, if set, is called after each patient's manifest lines are
	// written, in order, from the goroutine that called Generate.
	Progress func(done, total int)
}

var tenantRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// withDefaults validates o and returns a copy with defaults applied.
func (o Options) withDefaults() (Options, error) {
	if o.Patients < 1 {
		return o, fmt.Errorf("%w: patients must be >= 1, got %d", ErrInvalidOptions, o.Patients)
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Tenant == "" {
		o.Tenant = DefaultTenant
	}
	if len(o.Tenant) > 63 || !tenantRE.MatchString(o.Tenant) {
		return o, fmt.Errorf("%w: tenant %q is not a lowercase host label", ErrInvalidOptions, o.Tenant)
	}
	if o.Now.IsZero() {
		o.Now = DefaultNow
	}
	o.Now = o.Now.UTC().Truncate(time.Second)
	return o, nil
}

// Summary describes a generated data set.
type Summary struct {
	// Patients is the number of patients generated.
	Patients int `json:"patients"`
	// Resources is the number of manifest lines (equal to Estimate(Patients)).
	Resources int `json:"resources"`
	// Bytes is the total size of every file written, manifest included.
	Bytes int64 `json:"bytes"`
	// ByType counts resources by labels.type (patient, observation, ...).
	ByType map[string]int `json:"by_type"`
}
