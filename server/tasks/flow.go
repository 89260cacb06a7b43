package tasks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/flow"
	"github.com/agentplane/agentplane/server/store"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
	"github.com/agentplane/agentplane/server/store/schema"
)

// Lease-time flow control (docs/api.md#flow-control). The state every replica must
// agree on, the slots of a concurrency key and the tokens of a bucket, is a store
// record (store.FlowRecord) read and written in the transaction that starts or leases
// the task: exact across replicas, at the price of one more locked row per start or
// lease of a limited queue. Fair sharing between tenants is a per-replica order of
// the tenants' queue heads: it needs no shared state to be correct, only to be fair,
// and each replica's share is fair by itself.

// Flow record names: a kind letter, the queue, the key.
func slotName(queue, key string) string        { return "c:" + queue + ":" + key }
func startBucketName(queue, key string) string { return "s:" + queue + ":" + key }
func leaseBucketName(queue, key string) string { return "l:" + queue + ":" + key }
func policySlotName(queue, key string) string  { return "p:" + queue + ":" + key }
func fairName(queue, key string) string        { return "f:" + queue + ":" + key }

// allKey is the rate key of a queue whose rate names no key: one bucket per tenant.
const allKey = "*"

// queueFlow is a queue's compiled policies.
type queueFlow struct {
	concKey   *flow.Key
	concLimit int
	rate      *config.Rate
	rateKey   *flow.Key // nil: allKey
	bucket    flow.Bucket
	fairKey   *flow.Key // nil: no fair share between keys
	fair      *config.KeyFairness
}

// limitsLeases says whether leasing from the queue must look past capped tasks.
func (q *queueFlow) limitsLeases() bool {
	return q != nil && (q.concKey != nil || q.rate != nil && q.rate.On == config.RateOnLease)
}

func compileFlow(c config.Flow) (map[string]*queueFlow, error) {
	out := map[string]*queueFlow{}
	for name, qc := range c.Queues {
		if !schema.ValidQueueName(name) {
			return nil, fmt.Errorf("tasks: flow.queues.%s: %q is not a queue name (1 to %d letters, digits, '.', '_' and '-', starting with a letter or digit)", name, name, schema.MaxQueueName)
		}
		q := &queueFlow{}
		if cc := qc.Concurrency; cc != nil {
			k, err := flow.CompileKey(cc.Key)
			if err != nil {
				return nil, fmt.Errorf("tasks: flow.queues.%s.concurrency.key: %w", name, err)
			}
			q.concKey, q.concLimit = k, cc.Limit
		}
		if r := qc.Rate; r != nil {
			q.rate, q.bucket = r, bucketOf(r)
			if r.Key != "" {
				k, err := flow.CompileKey(r.Key)
				if err != nil {
					return nil, fmt.Errorf("tasks: flow.queues.%s.rate.key: %w", name, err)
				}
				q.rateKey = k
			}
		}
		if kf := qc.Fairness; kf != nil {
			k, err := flow.CompileKey(kf.Key)
			if err != nil {
				return nil, fmt.Errorf("tasks: flow.queues.%s.fairness.key: %w", name, err)
			}
			q.fairKey, q.fair = k, kf
		}
		out[name] = q
	}
	return out, nil
}

// flowKeys computes a starting task's keys: its concurrency key and, for a rate on
// leases, its lease-rate key (into rec), and for a rate on starts the bucket to take
// a token from ("" when none).
func (m *Manager) flowKeys(ctx context.Context, p *StartParams, rec *storagev1.TaskRecord) (startBucket string, err error) {
	t := flow.Task{Tenant: p.Tenant, Queue: p.Queue, Labels: p.Labels, Input: p.Input}
	if c := p.Concurrency; c != nil {
		k, err := m.taskKeys.Compile(c.GetKey())
		if err == nil {
			rec.PolicyConcurrencyKey, err = k.Eval(ctx, t)
		}
		if err != nil {
			return "", fieldInvalid("concurrency.key", "concurrency.key: %v", err)
		}
	}
	q := m.flow[p.Queue]
	if q == nil {
		return "", nil
	}
	if q.fairKey != nil {
		if rec.FairnessKey, err = q.fairKey.Eval(ctx, t); err != nil {
			return "", apierr.InvalidArgument(apierr.ReasonInvalidArgument, "flow.queues.%s.fairness.key: %v", p.Queue, err)
		}
	}
	if q.concKey != nil {
		k, err := q.concKey.Eval(ctx, t)
		if err != nil {
			return "", apierr.InvalidArgument(apierr.ReasonInvalidArgument, "flow.queues.%s.concurrency.key: %v", p.Queue, err)
		}
		rec.ConcurrencyKey = k
	}
	if q.rate != nil {
		k := allKey
		if q.rateKey != nil {
			if k, err = q.rateKey.Eval(ctx, t); err != nil {
				return "", apierr.InvalidArgument(apierr.ReasonInvalidArgument, "flow.queues.%s.rate.key: %v", p.Queue, err)
			}
		}
		switch {
		case k == "":
		case q.rate.On == config.RateOnStart:
			startBucket = k
		default:
			rec.RateKey = k
		}
	}
	return startBucket, nil
}

// takeStartToken takes a token of the start bucket of key, or refuses the start with
// FLOW_RATE_LIMITED and the wait until the bucket holds one.
func (m *Manager) takeStartToken(w store.Writer, tenant, queue, key string, now time.Time) error {
	q := m.flow[queue]
	name := startBucketName(queue, key)
	rec, err := w.GetFlow(tenant, name)
	if err != nil {
		return err
	}
	next, ok, wait := q.bucket.Take(rec, now)
	if !ok {
		m.countFlow(queue, FlowStartRefused)
		return apierr.New(codes.ResourceExhausted, apierr.ReasonFlowRateLimited,
			"queue %q allows %s starts a second per key (burst %s); key %q has no token left: retry in %s",
			queue, fmtRate(q.bucket.Rate), fmtRate(q.bucket.Burst), key, wait.Round(time.Millisecond)).
			WithMetadata("queue", queue).WithMetadata("key", key).WithMetadata("rate", fmtRate(q.bucket.Rate)).
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)})
	}
	return w.PutFlow(tenant, name, next)
}

func fmtRate(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// Flow outcomes counted by Options.CountFlow.
const (
	// FlowStartRefused: a start refused by its queue's start rate.
	FlowStartRefused = "start_rate_limited"
	// FlowConcurrencyWait: a queued task passed over because its key's slots are full.
	FlowConcurrencyWait = "concurrency_full"
	// FlowLeaseRateWait: a queued task passed over because its lease bucket is empty.
	FlowLeaseRateWait = "lease_rate_limited"
)

func (m *Manager) countFlow(queue, what string) {
	if m.onFlow != nil {
		m.onFlow(queue, what)
	}
}

// limitsLease says whether a lease of rec must pass admit: its queue has a
// concurrency cap or a lease rate, or the task has a concurrency cap of its own.
func (m *Manager) limitsLease(rec *storagev1.TaskRecord) bool {
	return rec.GetPolicyConcurrencyKey() != "" || m.flow[store.QueueOf(rec)].limitsLeases()
}

// slotTake is a concurrency slot a lease is to take.
type slotTake struct {
	name string
	rec  *storagev1.FlowRecord
}

// takeSlot reads the slot record name and says whether it has room under limit
// (nil: it is full, and full remembers it for the claim).
func (o *Op) takeSlot(full map[string]bool, name string, limit int) (*slotTake, error) {
	queue := store.QueueOf(o.rec)
	seen := fullKey(o.rec.GetTenant(), name) + "\x00" + strconv.Itoa(limit)
	if full[seen] {
		return nil, nil
	}
	slot, err := o.w.GetFlow(o.rec.GetTenant(), name)
	if err != nil {
		return nil, err
	}
	if slot == nil {
		slot = &storagev1.FlowRecord{}
	}
	if len(slot.GetHolders()) >= limit {
		full[seen] = true
		o.m.countFlow(queue, FlowConcurrencyWait)
		return nil, nil
	}
	return &slotTake{name, slot}, nil
}

// fullKey names a tenant's flow record in a claim's memory of those found full:
// tenants' keys of the same name are not the same key.
func fullKey(tenant, name string) string { return tenant + "\x00" + name }

// admit is the flow-control check of a lease of rec: it takes a slot of the queue's
// concurrency key and one of the task's own (both must have room), and a token of
// its lease bucket, or says which is missing and takes nothing. full remembers,
// within one claim, the keys found full.
func (o *Op) admit(full map[string]bool) (ok bool, err error) {
	rec, queue := o.rec, store.QueueOf(o.rec)
	q := o.m.flow[queue]
	var slots []*slotTake
	if ck := rec.GetConcurrencyKey(); ck != "" && q != nil && q.concKey != nil {
		s, err := o.takeSlot(full, slotName(queue, ck), q.concLimit)
		if err != nil || s == nil {
			return false, err
		}
		slots = append(slots, s)
	}
	if pk := rec.GetPolicyConcurrencyKey(); pk != "" {
		s, err := o.takeSlot(full, policySlotName(queue, pk), int(rec.GetConcurrency().GetLimit()))
		if err != nil || s == nil {
			return false, err
		}
		slots = append(slots, s)
	}
	if rk := rec.GetRateKey(); rk != "" && q != nil && q.rate != nil && q.rate.On == config.RateOnLease {
		name := leaseBucketName(queue, rk)
		if full[fullKey(rec.GetTenant(), name)] {
			return false, nil
		}
		b, err := o.w.GetFlow(rec.GetTenant(), name)
		if err != nil {
			return false, err
		}
		next, ok, _ := q.bucket.Take(b, o.now)
		if !ok {
			full[fullKey(rec.GetTenant(), name)] = true
			o.m.countFlow(queue, FlowLeaseRateWait)
			return false, nil
		}
		if err := o.w.PutFlow(rec.GetTenant(), name, next); err != nil {
			return false, err
		}
	}
	for _, s := range slots {
		s.rec.Holders = append(s.rec.Holders, rec.GetTaskId())
		if err := o.w.PutFlow(rec.GetTenant(), s.name, s.rec); err != nil {
			return false, err
		}
		o.touched = true
		rec.HoldsSlot = true
	}
	return true, nil
}

// releaseSlot frees the concurrency slot of a task whose lease ended (released,
// expired, or revoked by a cancellation or the task's end), and wakes the long polls
// of its queue, where a task of the same key may be waiting for it.
func (o *Op) releaseSlot() error {
	rec := o.rec
	if !rec.GetHoldsSlot() {
		return nil
	}
	if l := rec.GetLease(); l != nil && !l.GetRevoked() {
		return nil
	}
	o.touched = true
	rec.HoldsSlot = false
	queue := store.QueueOf(rec)
	var names []string
	if k := rec.GetConcurrencyKey(); k != "" {
		names = append(names, slotName(queue, k))
	}
	if k := rec.GetPolicyConcurrencyKey(); k != "" {
		names = append(names, policySlotName(queue, k))
	}
	for _, name := range names {
		slot, err := o.w.GetFlow(rec.GetTenant(), name)
		if err != nil {
			return err
		}
		n := len(slot.GetHolders())
		if n == 0 {
			continue
		}
		slot.Holders = slices.DeleteFunc(slot.Holders, func(id string) bool { return id == rec.GetTaskId() })
		if len(slot.Holders) == n {
			continue // it held none of this key (the queue's cap came after its lease)
		}
		if len(slot.Holders) == 0 {
			slot = nil
		}
		if err := o.w.PutFlow(rec.GetTenant(), name, slot); err != nil {
			return err
		}
	}
	m := o.m
	o.w.OnCommit(func() { m.work.broadcast(queue) })
	return nil
}

// fairShare orders the tenants' queue heads for a claim under weighted fair
// sharing: start-time fair queueing over a per-replica virtual time. Each tenant has
// a finish tag that grows by 1/weight per lease; a claim takes the heads of the
// tenant with the smallest tag first. A tenant that was idle starts at the current
// virtual time, so idling banks no credit.
type fairShare struct {
	vnow float64
	tags map[string]float64
}

// order returns the candidates of heads (per tenant, in queue order) in the order
// a claim should try them.
func (f *fairShare) order(heads map[string][]queued, weight func(string) int) []queued {
	tags := make(map[string]float64, len(heads))
	next := make(map[string]int, len(heads))
	total := 0
	for t, h := range heads {
		tags[t] = math.Max(f.tags[t], f.vnow)
		total += len(h)
	}
	out := make([]queued, 0, total)
	for len(out) < total {
		best := ""
		for t, h := range heads {
			if next[t] >= len(h) {
				continue
			}
			if best == "" || tags[t] < tags[best] || tags[t] == tags[best] && t < best {
				best = t
			}
		}
		out = append(out, heads[best][next[best]])
		next[best]++
		tags[best] += 1 / float64(weight(best))
	}
	return out
}

// granted advances the tags by the leases a claim granted. backlogged are the
// tenants that had queued work; the virtual time moves to the smallest of their
// tags, and tags at or below it are forgotten (the same as absent).
func (f *fairShare) granted(tenants []string, backlogged []string, weight func(string) int) {
	if f.tags == nil {
		f.tags = map[string]float64{}
	}
	for _, t := range tenants {
		f.tags[t] = math.Max(f.tags[t], f.vnow) + 1/float64(weight(t))
	}
	low := math.Inf(1)
	for _, t := range backlogged {
		low = math.Min(low, math.Max(f.tags[t], f.vnow))
	}
	if !math.IsInf(low, 1) && low > f.vnow {
		f.vnow = low
	}
	for t, v := range f.tags {
		if v <= f.vnow {
			delete(f.tags, t)
		}
	}
}

// Fair share between the keys of one tenant's queue (flow.queues.<queue>.fairness) is
// start-time fair queueing done when a task is queued: the task's fair time (its
// start tag, TaskRecord.fair_time) is the later of the queue's virtual time and the
// finish tag of its key's last queued task, and its key's finish tag moves on by
// fairStep / weight. The queue index orders by fair time, so a lease reads the
// queue exactly as without fairness and costs nothing more: a key that queued
// 10,000 tasks has its tags spread far ahead, and another key's first task is
// tagged at the virtual time, next to the head. The finish tags are store records
// (FlowRecord "f" + queue + key), exact across replicas, one locked row per start,
// contended by the key's own starts only. The virtual time is the fair time of the
// task at the queue's head: each replica keeps its own view, moved on by the leases it
// grants and read again from the head when older than fairRefresh, so that a replica
// that leases nothing still tags from the queue's progress.

// fairStep is the virtual time one task of a key of weight 1 takes.
const fairStep = time.Microsecond

// fairRefresh is how long a replica trusts its view of a queue's virtual time.
const fairRefresh = time.Second

// vclock is a replica's view of the virtual time of one tenant's queue.
type vclock struct {
	v, read time.Time
}

// fairTag sets the fair time of the task being queued when its queue shares leases
// between keys, and moves its key's finish tag on.
func (o *Op) fairTag() error {
	rec := o.rec
	queue := store.QueueOf(rec)
	q := o.m.flow[queue]
	if q == nil || q.fair == nil {
		rec.FairTime = nil
		return nil
	}
	v, err := o.m.virtualTime(o.w, rec.GetTenant(), queue, o.now)
	if err != nil {
		return err
	}
	name := fairName(queue, rec.GetFairnessKey())
	f, err := o.w.GetFlow(rec.GetTenant(), name)
	if err != nil {
		return err
	}
	if f == nil {
		f = &storagev1.FlowRecord{}
	}
	start := v
	if t := f.GetFairFinish(); t != nil && t.AsTime().After(start) {
		start = t.AsTime()
	}
	f.FairFinish = timestamppb.New(start.Add(fairStep / time.Duration(q.fair.Weight(rec.GetFairnessKey()))))
	rec.FairTime = timestamppb.New(start)
	return o.w.PutFlow(rec.GetTenant(), name, f)
}

// virtualTime is this replica's view of the virtual time of tenant's queue: the fair
// time of the task at its head (now when it is empty), read again when the view is
// older than fairRefresh.
func (m *Manager) virtualTime(r store.Reader, tenant, queue string, now time.Time) (time.Time, error) {
	k := [2]string{tenant, queue}
	m.fairMu.Lock()
	c, ok := m.vclocks[k]
	m.fairMu.Unlock()
	if ok && now.Sub(c.read) < fairRefresh && !now.Before(c.read) {
		return c.v, nil
	}
	var head string
	if err := r.ScanQueue(tenant, queue, store.IndexRange{Until: queueHorizon(now)}, func(e store.IndexEntry) (bool, error) {
		head = e.ID
		return false, nil
	}); err != nil {
		return time.Time{}, err
	}
	v := now
	if head != "" {
		rec, err := r.GetTask(tenant, head)
		if err != nil && !store.IsNotFound(err) {
			return time.Time{}, err
		}
		if t := rec.GetFairTime(); t != nil {
			v = t.AsTime()
		} else if t := rec.GetQueueTime(); t != nil {
			v = t.AsTime()
		}
	}
	m.fairMu.Lock()
	if m.vclocks == nil || len(m.vclocks) >= maxVclocks {
		m.vclocks = map[[2]string]vclock{}
	}
	m.vclocks[k] = vclock{v: v, read: now}
	m.fairMu.Unlock()
	return v, nil
}

// maxVclocks bounds the queues whose virtual time a replica remembers.
const maxVclocks = 65536

// served moves this replica's view of the virtual times on by the fair times of
// the tasks a claim leased.
func (m *Manager) served(fairs []fairServed) {
	if len(fairs) == 0 {
		return
	}
	m.fairMu.Lock()
	defer m.fairMu.Unlock()
	for _, f := range fairs {
		k := [2]string{f.tenant, f.queue}
		if c, ok := m.vclocks[k]; ok && f.at.After(c.v) {
			c.v = f.at
			m.vclocks[k] = c
		}
	}
}

// fairServed is the fair time of a leased task.
type fairServed struct {
	tenant, queue string
	at            time.Time
}

// queueHorizon is the Until of a lease's queue scans: past every queue time moved
// by a negative priority (schema.QueueOrder).
func queueHorizon(now time.Time) time.Time {
	return now.Add(-schema.MinPriority * schema.PriorityStep)
}

// bucketOf is the token bucket of a rate: burst 0 means ceil(per_second), at least 1.
func bucketOf(r *config.Rate) flow.Bucket {
	burst := float64(r.Burst)
	if burst < 1 {
		burst = math.Max(1, math.Ceil(r.PerSecond))
	}
	return flow.Bucket{Rate: r.PerSecond, Burst: burst}
}
