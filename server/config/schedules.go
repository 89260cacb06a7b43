package config

import "time"

// Schedules configures the scheduler (docs/schedules.md).
type Schedules struct {
	// MaxPerTenant is the most schedules one tenant may have.
	MaxPerTenant int `yaml:"max_per_tenant"`
	// RecentRuns is how many runs each schedule keeps in its recent_runs.
	RecentRuns int `yaml:"recent_runs"`
	// PollInterval is the longest the scheduler of a replica sleeps: how soon it sees
	// a schedule that another replica created or changed.
	PollInterval Duration `yaml:"poll_interval"`
	// RecheckInterval is how often a buffered run (overlap BUFFER_ONE) checks whether
	// the previous run ended.
	RecheckInterval Duration `yaml:"recheck_interval"`
	// Concurrency is how many schedules one replica fires at once.
	Concurrency int `yaml:"concurrency"`
}

// DefaultSchedules is the scheduler's configuration when none is given.
func DefaultSchedules() Schedules {
	return Schedules{MaxPerTenant: 1000, RecentRuns: 20, PollInterval: Duration(time.Second),
		RecheckInterval: Duration(time.Second), Concurrency: 16}
}

func (c *Config) validateSchedules(bad func(format string, args ...any)) {
	s := c.Schedules
	if s.MaxPerTenant < 1 || s.RecentRuns < 1 || s.RecentRuns > 1000 || s.Concurrency < 1 || s.Concurrency > 1024 {
		bad("schedules: max_per_tenant must be >= 1, recent_runs 1 to 1000, concurrency 1 to 1024")
	}
	if s.PollInterval < Duration(10*time.Millisecond) || s.PollInterval > Duration(time.Minute) ||
		s.RecheckInterval < Duration(10*time.Millisecond) || s.RecheckInterval > Duration(time.Hour) {
		bad("schedules: poll_interval must be 10ms to 1m, recheck_interval 10ms to 1h")
	}
}
