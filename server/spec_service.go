package server

import (
	"context"
	"strconv"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/spec"
	"github.com/agentplane/agentplane/server/store/pagetoken"
)

// ValidateSpec checks a typed spec or a document with the same validator StartTask uses.
func (x *specService) ValidateSpec(ctx context.Context, req *agentplanev1.ValidateSpecRequest) (*agentplanev1.ValidateSpecResponse, error) {
	tenant, err := auth.TenantOf(ctx)
	if err != nil {
		return nil, err
	}
	in := spec.InputFromRequest(req)
	in.TenantMaxDepth = x.s.tenantMaxDepth(tenant, int64(req.GetTenantMaxDepth()))
	res, err := x.s.validate(ctx, in)
	if err != nil {
		return nil, err
	}
	return res.Response(), nil
}

// validate is the validation of ValidateSpec and StartTask: a document is decoded
// under the decode gate (waiting its turn while others are decoded), and a document
// refused for its size or density is LIMIT_EXCEEDED, not an invalid spec.
func (s *Server) validate(ctx context.Context, in spec.Input) (*spec.Result, error) {
	if w := s.domain.specs.DecodeWeight(in); w > 0 {
		release, err := s.domain.decodes.acquire(ctx, w)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	res, err := s.domain.specs.Validate(in)
	if err != nil {
		return nil, err
	}
	if v := res.OverLimit(); v != nil {
		return nil, apierr.ResourceExhausted("the document is over this deployment's limits: %s", v.GetMessage()).
			WithDetails(&agentplanev1.SpecViolations{Violations: res.Errors})
	}
	return res, nil
}

// tenantMaxDepth is the tenant's nesting cap: the configured one, tightened by the
// request's when that is smaller. 0 means no tenant cap.
func (s *Server) tenantMaxDepth(tenant string, requested int64) int64 {
	return spec.TenantMaxDepth(&s.cfg, tenant, requested)
}

// ListRules pages the rule catalogue in id order, with the page sizes of every List
// RPC (pagetoken.PageSize). The page token is the index of the
// next rule: the catalogue is compiled in, so it cannot change under a client.
func (x *specService) ListRules(_ context.Context, req *agentplanev1.ListRulesRequest) (*agentplanev1.ListRulesResponse, error) {
	rules := spec.Rules()
	start := 0
	if t := req.GetPageToken(); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > len(rules) {
			return nil, apierr.InvalidArgument(apierr.ReasonPageTokenInvalid, "page_token %q was not issued by ListRules", t)
		}
		start = n
	}
	size, err := pagetoken.PageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	end := min(start+size, len(rules))
	resp := &agentplanev1.ListRulesResponse{Rules: rules[start:end]}
	if end < len(rules) {
		resp.NextPageToken = strconv.Itoa(end)
	}
	return resp, nil
}

// GetRule explains one rule.
func (x *specService) GetRule(_ context.Context, req *agentplanev1.GetRuleRequest) (*agentplanev1.GetRuleResponse, error) {
	r, ok := spec.LookupRule(req.GetRuleId())
	if !ok {
		return nil, apierr.NotFound(apierr.ReasonRuleNotFound, "no rule %q; ListRules shows the catalogue", req.GetRuleId())
	}
	return &agentplanev1.GetRuleResponse{Rule: r}, nil
}

// GetSpecSchema returns the JSON Schema of qar/v1 documents.
func (x *specService) GetSpecSchema(context.Context, *agentplanev1.GetSpecSchemaRequest) (*agentplanev1.GetSpecSchemaResponse, error) {
	return &agentplanev1.GetSpecSchemaResponse{JsonSchema: string(spec.DocumentSchema())}, nil
}
