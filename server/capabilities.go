package server

import (
	"context"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// GetCapabilities answers for the calling principal. Every field is derived from what
// this process actually serves: a feature is true only when its RPCs work.
func (x *capabilityService) GetCapabilities(ctx context.Context, _ *agentplanev1.GetCapabilitiesRequest) (*agentplanev1.GetCapabilitiesResponse, error) {
	s := x.s
	caps := &agentplanev1.Capabilities{
		ServerVersion:    BuildVersion(),
		Store:            "bbolt",
		Principal:        &agentplanev1.Principal{Subject: "owner", Tenant: "default", Roles: []string{"user", "approver", "runtime", "admin"}},
		RequirePrincipal: s.cfg.Auth.RequirePrincipal,
		Limits: &agentplanev1.Limits{
			MaxDepth:            s.cfg.Spec.PlatformMaxDepth,
			MaxSpecBytes:        s.cfg.Limits.MaxSpecBytes,
			MaxEventBytes:       s.cfg.Limits.MaxEventBytes,
			MaxTaskHistoryBytes: s.cfg.Limits.MaxTaskHistoryBytes,
			MaxTaskEvents:       s.cfg.Limits.MaxTaskEvents,
		},
		Features: &agentplanev1.Features{
			HttpJson: s.http != nil,
		},
	}
	return &agentplanev1.GetCapabilitiesResponse{Capabilities: caps}, nil
}
