package server

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
)

// features is what this build serves; each flag turns true in the commit that makes
// its RPCs work.
func (s *Server) features() *agentplanev1.Features {
	return &agentplanev1.Features{
		HttpJson: s.http != nil,
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
	features := s.features()
	// The gate-derived answers come from the same predicates StartTask reads; a lane is
	// only a "yes" when StartTask itself works in this build.
	caps := gates.Capabilities(s.gates.For(p.Tenant))
	if !features.GetTasks() {
		caps.McpInjection, caps.A2AInjection, caps.MaxCallerPeers = false, false, 0
	}
	caps.ServerVersion = BuildVersion()
	caps.Store = "bbolt"
	caps.Principal = p.Proto()
	caps.Features = features
	caps.Limits = &agentplanev1.Limits{
		MaxDepth:            s.cfg.Spec.PlatformMaxDepth,
		MaxSpecBytes:        s.cfg.Limits.MaxSpecBytes,
		MaxEventBytes:       s.cfg.Limits.MaxEventBytes,
		MaxTaskHistoryBytes: s.cfg.Limits.MaxTaskHistoryBytes,
		MaxTaskEvents:       s.cfg.Limits.MaxTaskEvents,
	}
	return &agentplanev1.GetCapabilitiesResponse{Capabilities: caps}, nil
}
