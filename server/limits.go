package server

import (
	"context"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
)

// slotKind is what a principal holds while a call runs: a watch (WatchTask), an await
// (AwaitDecision), or any other call (unary calls, LeaseTasks' long poll included, and
// the other streams).
type slotKind int

const (
	slotCall slotKind = iota
	slotWatch
	slotAwait
	numSlotKinds
)

var (
	slotNames  = [numSlotKinds]string{"call", "watch", "await"}
	slotPlural = [numSlotKinds]string{"calls", "watches", "awaits"}
)

// slotKeys are the config keys of the limits, for messages.
var slotKeys = [numSlotKinds]string{"limits.max_calls_per_principal", "limits.max_watches_per_principal", "limits.max_awaits_per_principal"}

// principalLimits bounds, in multi-tenant mode, how many calls, watches and awaits
// each principal has open at once, so that one tenant's client cannot take the
// handler pool, memory or file descriptors from the others. It sits after
// authorization in the interceptor chain of both gRPC servers (the public one and the
// in-process one behind the HTTP gateway), sharing one count, so HTTP/JSON callers
// are counted with gRPC ones. A slot is held until the handler returns, which a
// stream's handler does when the stream ends or its client goes away (its context is
// canceled). Public methods (health) carry no principal and are not counted; in
// single-user mode nothing is.
type principalLimits struct {
	enabled bool
	max     [numSlotKinds]int

	mu   sync.Mutex
	held map[string]*[numSlotKinds]int

	// inUse and refused are the metrics' series, by kind.
	inUse   [numSlotKinds]prometheus.Gauge
	refused [numSlotKinds]prometheus.Counter
}

func newPrincipalLimits(cfg config.Config, reg prometheus.Registerer) *principalLimits {
	l := &principalLimits{
		enabled: cfg.Auth.RequirePrincipal,
		max:     [numSlotKinds]int{cfg.Limits.MaxCallsPerPrincipal, cfg.Limits.MaxWatchesPerPrincipal, cfg.Limits.MaxAwaitsPerPrincipal},
		held:    map[string]*[numSlotKinds]int{},
	}
	inUse := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "agentplane", Name: "principal_slots_in_use",
		Help: "Calls, watches and awaits open under the per-principal limits (multi-tenant mode), summed over principals, by kind.",
	}, []string{"kind"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentplane", Name: "principal_limit_refusals_total",
		Help: "Calls refused because their principal was at its limit (RESOURCE_EXHAUSTED, LIMIT_CONCURRENCY), by kind.",
	}, []string{"kind"})
	for k, name := range slotNames {
		l.inUse[k] = inUse.WithLabelValues(name)
		l.refused[k] = refused.WithLabelValues(name)
	}
	reg.MustRegister(inUse, refused)
	return l
}

// principalKey names a principal: token names and certificate names are unique only
// among their own kind.
func principalKey(p auth.Principal) string { return p.Via + "/" + p.Subject }

// acquire takes a slot of kind k for the principal of ctx, or refuses with
// RESOURCE_EXHAUSTED (LIMIT_CONCURRENCY). release must be called exactly once.
func (l *principalLimits) acquire(ctx context.Context, k slotKind) (release func(), err error) {
	if !l.enabled {
		return func() {}, nil
	}
	p, ok := auth.FromContext(ctx)
	if !ok {
		return func() {}, nil
	}
	key := principalKey(p)
	l.mu.Lock()
	h := l.held[key]
	if h == nil {
		h = new([numSlotKinds]int)
		l.held[key] = h
	}
	if h[k] >= l.max[k] {
		l.mu.Unlock()
		l.refused[k].Inc()
		return nil, apierr.New(codes.ResourceExhausted, apierr.ReasonConcurrencyLimit,
			"%q already has %d %s open, the most one principal may have (%s); retry once one of them ends",
			p.Subject, l.max[k], slotPlural[k], slotKeys[k]).
			WithMetadata("kind", slotNames[k]).WithMetadata("limit", strconv.Itoa(l.max[k]))
	}
	h[k]++
	l.mu.Unlock()
	l.inUse[k].Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			h[k]--
			if *h == ([numSlotKinds]int{}) {
				delete(l.held, key)
			}
			l.mu.Unlock()
			l.inUse[k].Dec()
		})
	}, nil
}

// unary is the interceptor for unary calls (chained after authorization).
func (l *principalLimits) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	release, err := l.acquire(ctx, slotCall)
	if err != nil {
		return nil, err
	}
	defer release()
	return handler(ctx, req)
}

// stream is the interceptor for streams (chained after authorization).
func (l *principalLimits) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	k := slotCall
	switch info.FullMethod {
	case agentplanev1.TaskService_WatchTask_FullMethodName:
		k = slotWatch
	case agentplanev1.RuntimeService_AwaitDecision_FullMethodName:
		k = slotAwait
	}
	release, err := l.acquire(ss.Context(), k)
	if err != nil {
		return err
	}
	defer release()
	return handler(srv, ss)
}
