package auth

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/agentplane/agentplane/server/apierr"
)

// Authorize is the one decision both interceptors make: it authenticates the caller
// of fullMethod and checks the method table, returning ctx with the principal
// attached, or a gRPC status error: UNAUTHENTICATED (AUTH_UNAUTHENTICATED) when
// credentials are missing or wrong, PERMISSION_DENIED (AUTH_PERMISSION_DENIED) when
// the method is not in the table or the caller holds none of its roles. Public
// methods pass without credentials; unknown methods are denied in every mode.
func (g *Guard) Authorize(ctx context.Context, fullMethod string) (context.Context, error) {
	rule, known := g.methods[fullMethod]
	if known && rule.Scope == ScopePublic && g.multiTenant {
		return ctx, nil
	}
	p, err := g.Authenticate(ctx)
	if err != nil {
		return nil, statusErr(err)
	}
	if !known {
		return nil, statusErr(apierr.New(codes.PermissionDenied, apierr.ReasonPermissionDenied,
			"method %s is not in the authorization table", fullMethod))
	}
	if !rule.Allows(p) {
		return nil, statusErr(apierr.New(codes.PermissionDenied, apierr.ReasonPermissionDenied,
			"%s needs one of the roles %v; %q has %v", fullMethod, rule.Roles, p.Subject, p.Roles))
	}
	return WithPrincipal(ctx, p), nil
}

// statusErr turns an apierr error into the status error gRPC sends, so the result is
// right whether or not an error-mapping interceptor runs outside this one.
func statusErr(err error) error {
	st, _ := apierr.ToStatus(err)
	return st.Err()
}

// UnaryInterceptor enforces Authorize on unary calls. Chain it inside the error
// mapping, logging and metrics interceptors, so refusals are counted and logged.
func (g *Guard) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := g.Authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// StreamInterceptor enforces Authorize on streaming calls; the handler's stream
// context carries the principal.
func (g *Guard) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := g.Authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &principalStream{ServerStream: ss, ctx: ctx})
}

type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *principalStream) Context() context.Context { return s.ctx }
