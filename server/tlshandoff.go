package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// tlsHandoffKey is the metadata key carrying a handoff ticket from the gateway to the
// in-process gRPC server.
const tlsHandoffKey = "x-agentplane-tls-handoff"

// maxPendingHandoffs bounds the tickets waiting to be claimed (a call that never
// reaches the server leaves one behind).
const maxPendingHandoffs = 10000

// tlsHandoff carries an HTTPS caller's TLS state (its verified client certificate)
// from the gateway to the in-process gRPC server, so that mTLS principals authenticate
// over HTTP/JSON exactly as over gRPC. The gateway stores the state under a random,
// single-use ticket and sends the ticket as metadata; the in-process server claims it
// and presents it as the call's peer, where auth reads it. A client cannot forge one:
// tickets are 128 random bits, claimed once, and a call carrying two values (one
// smuggled in as a Grpc-Metadata header) claims none.
type tlsHandoff struct {
	mu      sync.Mutex
	pending map[string]*tls.ConnectionState
}

// annotate is the gateway's metadata annotator.
func (h *tlsHandoff) annotate(_ context.Context, r *http.Request) metadata.MD {
	return h.ticket(r.TLS)
}

// ticket stores state under a fresh single-use ticket and returns the metadata that
// hands it over, or nil when state holds no verified client certificate. The MCP face
// takes one per in-process call it makes for an HTTPS caller.
func (h *tlsHandoff) ticket(state *tls.ConnectionState) metadata.MD {
	if state == nil || len(state.VerifiedChains) == 0 {
		return nil
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	ticket := hex.EncodeToString(b)
	h.mu.Lock()
	if h.pending == nil || len(h.pending) >= maxPendingHandoffs {
		h.pending = map[string]*tls.ConnectionState{}
	}
	h.pending[ticket] = state
	h.mu.Unlock()
	return metadata.Pairs(tlsHandoffKey, ticket)
}

// claim replaces ctx's peer with the handed-over TLS state, if a valid ticket came.
func (h *tlsHandoff) claim(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	tickets := md.Get(tlsHandoffKey)
	if len(tickets) == 0 {
		return ctx
	}
	h.mu.Lock()
	var state *tls.ConnectionState
	if len(tickets) == 1 {
		state = h.pending[tickets[0]]
	}
	for _, t := range tickets {
		delete(h.pending, t)
	}
	h.mu.Unlock()
	if state == nil {
		return ctx
	}
	p, _ := peer.FromContext(ctx)
	np := &peer.Peer{AuthInfo: credentials.TLSInfo{State: *state, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}}
	if p != nil {
		np.Addr, np.LocalAddr = p.Addr, p.LocalAddr
	}
	return peer.NewContext(ctx, np)
}

func (h *tlsHandoff) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(h.claim(ctx), req)
}

func (h *tlsHandoff) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &peerStream{ServerStream: ss, ctx: h.claim(ss.Context())})
}

type peerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *peerStream) Context() context.Context { return s.ctx }
