package server

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/version"
)

// features is what this build serves. Every flag is backed by RPCs that work; the
// end-to-end tests exercise each.
func (s *Server) features() *agentplanev1.Features {
	return &agentplanev1.Features{
		SpecValidation:    true,
		Tasks:             true,
		WatchResume:       true,
		IdempotentStart:   true,
		RuntimeLeases:     true,
		DurableInterrupts: true,
		CelPolicies:       true,
		Verdicts:          true,
		ChatMode:          true,
		HotBackup:         true,
		HttpJson:          s.http != nil,
	}
}

// GetCapabilities answers for the calling principal. Every field is derived from what
// this process actually serves: a feature is true only when its RPCs work.
func (x *capabilityService) GetCapabilities(ctx context.Context, _ *agentplanev1.GetCapabilitiesRequest) (*agentplanev1.GetCapabilitiesResponse, error) {
	s := x.s
	p, ok := auth.FromContext(ctx)
	if !ok {
		return nil, apierr.New(codes.Unauthenticated, apierr.ReasonUnauthenticated, "no principal")
	}
	// The gate-derived answers come from the same predicates StartTask reads.
	d := s.gates.For(p.Tenant)
	caps := gates.Capabilities(d)
	caps.ServerVersion = version.String()
	caps.Store = "bbolt"
	caps.Principal = p.Proto()
	caps.Features = s.features()
	caps.Spec = spec.Vocabulary()
	if !gates.WorkflowsAllowed(d) {
		caps.Spec.Kinds = slices.DeleteFunc(caps.Spec.Kinds, func(k string) bool { return k == spec.KindGraph })
	}
	caps.DecisionTypes = []agentplanev1.DecisionType{
		agentplanev1.DecisionType_DECISION_TYPE_APPROVE,
		agentplanev1.DecisionType_DECISION_TYPE_REJECT,
		agentplanev1.DecisionType_DECISION_TYPE_EDIT,
	}
	maxDepth := s.cfg.Spec.PlatformMaxDepth
	if t := s.tenantMaxDepth(p.Tenant, 0); t > 0 && t < maxDepth {
		maxDepth = t
	}
	caps.Limits = &agentplanev1.Limits{
		MaxDepth:            maxDepth,
		MaxSpecBytes:        s.cfg.Limits.MaxSpecBytes,
		MaxEventBytes:       s.cfg.Limits.MaxEventBytes,
		MaxTaskHistoryBytes: s.cfg.Limits.MaxTaskHistoryBytes,
		MaxTaskEvents:       s.cfg.Limits.MaxTaskEvents,
	}
	return &agentplanev1.GetCapabilitiesResponse{Capabilities: caps}, nil
}
