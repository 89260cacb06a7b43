package config

import (
	"math"
	"sort"
)

// Flow configures lease-time flow control (docs/api.md#flow-control): how leases are
// shared between the tenants of a queue, and per-queue concurrency caps and rate
// limits.
type Flow struct {
	// Fairness is how a runtime serving every tenant shares its leases between them.
	Fairness Fairness `yaml:"fairness"`
	// Queues holds per-queue policies, by queue name.
	Queues map[string]QueueFlow `yaml:"queues"`
}

// Fairness modes.
const (
	// FairRoundRobin takes tenants in turn, FIFO within each (the default).
	FairRoundRobin = "round_robin"
	// FairWeighted hands leases out in proportion to the tenants' weights.
	FairWeighted = "weighted"
	// FairFIFO is first come, first served across tenants: no fairness.
	FairFIFO = "fifo"
)

// Fairness configures how tenants share a queue.
type Fairness struct {
	// Mode is round_robin (the default), weighted or fifo.
	Mode string `yaml:"mode"`
	// Weights are the tenants' shares under weighted (1 to 1000); a tenant not named
	// has DefaultWeight.
	Weights map[string]int `yaml:"weights"`
	// DefaultWeight is the weight of a tenant Weights does not name (default 1).
	DefaultWeight int `yaml:"default_weight"`
}

// Weight is a tenant's weight.
func (f Fairness) Weight(tenant string) int {
	if w, ok := f.Weights[tenant]; ok {
		return w
	}
	if f.DefaultWeight > 0 {
		return f.DefaultWeight
	}
	return 1
}

// QueueFlow is the flow control of one queue.
type QueueFlow struct {
	// Concurrency caps the leased tasks per key.
	Concurrency *Concurrency `yaml:"concurrency"`
	// Rate limits starts or leases per key with a token bucket.
	Rate *Rate `yaml:"rate"`
	// Fairness shares a tenant's leases of the queue between keys by weighted fair
	// share, instead of first come, first served.
	Fairness *KeyFairness `yaml:"fairness"`
}

// KeyFairness shares the leases of one tenant's queue between the keys of its
// tasks (its customers, say): a key that queues 10,000 tasks delays another key's
// by its share only.
type KeyFairness struct {
	// Key is a CEL expression of type string as Concurrency.Key; tasks whose key is ""
	// share one share.
	Key string `yaml:"key"`
	// Weights are the keys' shares (1 to 1000); a key not named has DefaultWeight.
	Weights map[string]int `yaml:"weights"`
	// DefaultWeight is the weight of a key Weights does not name (default 1).
	DefaultWeight int `yaml:"default_weight"`
}

// Weight is a key's weight.
func (f *KeyFairness) Weight(key string) int {
	return Fairness{Weights: f.Weights, DefaultWeight: f.DefaultWeight}.Weight(key)
}

// Concurrency caps how many of a tenant's tasks with the same key hold a lease at
// once; the others wait in queue order.
type Concurrency struct {
	// Key is a CEL expression of type string over tenant, queue, labels and input;
	// tasks for which it is "" are not capped.
	Key string `yaml:"key"`
	// Limit is how many tasks of one key may be leased at once (1 to 10000).
	Limit int `yaml:"limit"`
}

// Rate places on starts or on leases.
const (
	RateOnStart = "start"
	RateOnLease = "lease"
)

// Rate is a token bucket per tenant and key.
type Rate struct {
	// Key is a CEL expression of type string as Concurrency.Key; empty means one bucket
	// for all of a tenant's tasks of the queue; tasks whose key is "" are not limited.
	Key string `yaml:"key"`
	// On is start (StartTask is refused with FLOW_RATE_LIMITED while the bucket is
	// empty) or lease (the task waits in the queue).
	On string `yaml:"on"`
	// PerSecond is the refill rate, tokens a second (> 0).
	PerSecond float64 `yaml:"per_second"`
	// Burst is how many tokens the bucket holds (>= 1; default: ceil(per_second)).
	Burst int `yaml:"burst"`
}

// MaxConcurrencyLimit bounds flow.queues.*.concurrency.limit (the slots are one store record).
const MaxConcurrencyLimit = 10000

func (c *Config) validateFlow(bad func(string, ...any)) {
	f := c.Flow
	switch f.Fairness.Mode {
	case "", FairRoundRobin, FairWeighted, FairFIFO:
	default:
		bad("flow.fairness.mode %q: want round_robin, weighted or fifo", f.Fairness.Mode)
	}
	if f.Fairness.DefaultWeight < 0 || f.Fairness.DefaultWeight > 1000 {
		bad("flow.fairness.default_weight %d: want 1 to 1000 (0: 1)", f.Fairness.DefaultWeight)
	}
	for t, w := range f.Fairness.Weights {
		if t == "" || len(t) > 255 {
			bad("flow.fairness.weights: tenant names are 1 to 255 bytes")
		}
		if w < 1 || w > 1000 {
			bad("flow.fairness.weights.%s %d: want 1 to 1000", t, w)
		}
	}
	if len(f.Fairness.Weights) > 0 && f.Fairness.Mode != FairWeighted {
		bad("flow.fairness.weights are set but flow.fairness.mode is %q: weights apply only to weighted", f.Fairness.Mode)
	}
	names := make([]string, 0, len(f.Queues))
	for q := range f.Queues {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		qf := f.Queues[q]
		path := "flow.queues." + q
		// The queue name and the CEL keys are checked when the task manager compiles
		// them at boot (tasks.compileFlow: the boot fails with the key's path), so that
		// this package, which ctl links, needs neither the store's schema nor CEL.
		if cc := qf.Concurrency; cc != nil {
			if cc.Limit < 1 || cc.Limit > MaxConcurrencyLimit {
				bad("%s.concurrency.limit %d: want 1 to %d", path, cc.Limit, MaxConcurrencyLimit)
			}
		}
		if r := qf.Rate; r != nil {
			if r.On != RateOnStart && r.On != RateOnLease {
				bad("%s.rate.on %q: want start or lease", path, r.On)
			}
			if !(r.PerSecond > 0) || math.IsInf(r.PerSecond, 0) || r.PerSecond > 1e6 {
				bad("%s.rate.per_second %v: want more than 0 and at most 1e6", path, r.PerSecond)
			}
			if r.Burst < 0 || r.Burst > 1e6 {
				bad("%s.rate.burst %d: want 1 to 1e6 (0: ceil(per_second))", path, r.Burst)
			}
		}
		if kf := qf.Fairness; kf != nil {
			if kf.DefaultWeight < 0 || kf.DefaultWeight > 1000 {
				bad("%s.fairness.default_weight %d: want 1 to 1000 (0: 1)", path, kf.DefaultWeight)
			}
			for k, w := range kf.Weights {
				if w < 1 || w > 1000 {
					bad("%s.fairness.weights.%s %d: want 1 to 1000", path, k, w)
				}
			}
		}
		if qf.Concurrency == nil && qf.Rate == nil && qf.Fairness == nil {
			bad("%s: none of concurrency, rate and fairness is set", path)
		}
	}
}
