package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/api/reasons"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// bytesCodec sends a []byte request as it is, so a test can put any bytes on the
// wire, and discards the response.
type bytesCodec struct{}

func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (bytesCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (bytesCodec) Name() string                         { return "proto" }

// startLogged starts a server whose log is returned.
func startLogged(t *testing.T) (grpcAddr, httpAddr string, logs *testutil.SyncBuffer) {
	t.Helper()
	logs = &testutil.SyncBuffer{}
	srv, err := server.New(servertest.Config(t), server.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(server.ShutdownTimeout + 5*time.Second):
			t.Error("server did not stop")
		}
	})
	return srv.GRPCAddr(), srv.HTTPAddr(), logs
}

// TestUnreadableRequestsOverGRPC: bytes that are not a valid request message, sent
// over a real connection, are INVALID_ARGUMENT REQUEST_MALFORMED (and over the size
// limit RESOURCE_EXHAUSTED LIMIT_EXCEEDED), with an ErrorInfo, counted in the request
// metrics and logged, for unary and streaming calls.
func TestUnreadableRequestsOverGRPC(t *testing.T) {
	grpcAddr, httpAddr, logs := startLogged(t)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	unary := func(method string, req []byte) error {
		return conn.Invoke(ctx, method, req, &emptyMsg{}, grpc.ForceCodecV2(bytesCodec{}))
	}
	stream := func(method string, req []byte) error {
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodecV2(bytesCodec{}))
		if err != nil {
			return err
		}
		if err := cs.SendMsg(req); err != nil {
			return err
		}
		_ = cs.CloseSend()
		return cs.RecvMsg(&emptyMsg{})
	}
	const getTask, watchTask = "/agentplane.v1.TaskService/GetTask", "/agentplane.v1.TaskService/WatchTask"
	tests := []struct {
		name   string
		call   func(string, []byte) error
		method string
		req    []byte
		code   codes.Code
		reason apierr.Reason
	}{
		{"invalid UTF-8", unary, getTask, []byte{0x0a, 0x01, 0xff}, codes.InvalidArgument, apierr.ReasonRequestMalformed},
		{"truncated", unary, getTask, []byte{0x0a, 0x05, 'a'}, codes.InvalidArgument, apierr.ReasonRequestMalformed},
		// grpc-go refuses a message over its size limit from the length prefix,
		// before the codec and the interceptors, and writes the status itself: no
		// ErrorInfo (docs/errors.md says so).
		{"over the size limit", unary, "/agentplane.v1.SpecService/ValidateSpec", make([]byte, 2<<20), codes.ResourceExhausted, 0},
		{"stream invalid UTF-8", stream, watchTask, []byte{0x0a, 0x01, 0xff}, codes.InvalidArgument, apierr.ReasonRequestMalformed},
		{"stream truncated", stream, watchTask, []byte{0x0a, 0x05, 'a'}, codes.InvalidArgument, apierr.ReasonRequestMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(tt.method, tt.req)
			if status.Code(err) != tt.code || reasons.Of(err) != tt.reason {
				t.Fatalf("got %v (ErrorInfo %v), want %s %s", err, reasons.Info(err), tt.code, tt.reason)
			}
		})
	}

	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		// Counted though grpc-go answered it: the interceptors saw the failure.
		`agentplane_grpc_requests_total{code="ResourceExhausted",method="/agentplane.v1.SpecService/ValidateSpec"} 1`,
		`agentplane_grpc_requests_total{code="InvalidArgument",method="/agentplane.v1.TaskService/GetTask"} 2`,
		`agentplane_grpc_requests_total{code="InvalidArgument",method="/agentplane.v1.TaskService/WatchTask"} 2`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if n := strings.Count(logs.String(), "REQUEST_MALFORMED"); n != 4 {
		t.Errorf("%d of 4 malformed requests logged:\n%s", n, logs)
	}
}

// TestUnreadableRequestsOverHTTP: what the gateway refuses before any method runs
// carries an ErrorInfo, is never a 500, and is counted and logged.
func TestUnreadableRequestsOverHTTP(t *testing.T) {
	_, httpAddr, logs := startLogged(t)
	base := "http://" + httpAddr
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, method, path, body string
		code                     int
		reason                   apierr.Reason
	}{
		{"invalid UTF-8 in the path", http.MethodGet, "/v1/tasks/%ff", "", http.StatusBadRequest, apierr.ReasonRequestMalformed},
		{"body not JSON", http.MethodPost, "/v1/tasks", "{", http.StatusBadRequest, apierr.ReasonRequestMalformed},
		{"body over the limit", http.MethodPost, "/v1/specs/validate", strings.Repeat(" ", 2<<20), http.StatusRequestEntityTooLarge, apierr.ReasonResourceExhausted},
		{"unknown route", http.MethodGet, "/v1/nope", "", http.StatusNotFound, apierr.ReasonRouteNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(tt.method, tt.path, tt.body)
			if code != tt.code || !strings.Contains(body, `"reason":"`+reasons.Wire(tt.reason)+`"`) || !strings.Contains(body, `"domain":"agentplane.dev"`) {
				t.Fatalf("got %d %s, want %d with reason %s", code, body, tt.code, tt.reason)
			}
		})
	}
	_, metrics := do(http.MethodGet, "/metrics", "")
	for _, want := range []string{
		`agentplane_http_refused_total{code="InvalidArgument",reason="REQUEST_MALFORMED"} 2`,
		`agentplane_http_refused_total{code="ResourceExhausted",reason="LIMIT_EXCEEDED"} 1`,
		`agentplane_http_refused_total{code="NotFound",reason="ROUTE_NOT_FOUND"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if n := strings.Count(logs.String(), "http request refused"); n != 3 {
		t.Errorf("%d of 3 refusals logged at info:\n%s", n, logs)
	}
}

// TestListTasksRefusesInvalidTimestamps: a Timestamp outside its documented range
// (nanos=-1) is INVALID_ARGUMENT, not silently normalised.
func TestListTasksRefusesInvalidTimestamps(t *testing.T) {
	in := servertest.Start(t, nil)
	for _, req := range []*agentplanev1.ListTasksRequest{
		{CreatedAfter: &timestamppb.Timestamp{Seconds: 1, Nanos: -1}},
		{CreatedBefore: &timestamppb.Timestamp{Seconds: 1, Nanos: 1e9}},
	} {
		_, err := in.Client.Tasks.ListTasks(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument || reasons.Of(err) != apierr.ReasonInvalidArgument {
			t.Errorf("%v: got %v, want INVALID_ARGUMENT REQUEST_INVALID", req, err)
		}
	}
}

// TestUnreadableRequestsAuthenticateFirst: in a multi-tenant deployment a caller
// without credentials is UNAUTHENTICATED whatever it sends, over gRPC and HTTP; with
// credentials the same bytes are REQUEST_MALFORMED.
func TestUnreadableRequestsAuthenticateFirst(t *testing.T) {
	token, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, func(c *config.Config) {
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = []config.Token{{Name: "alice", SHA256: hash, Tenant: "acme", Roles: []string{"user"}}}
	})
	conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		token  string
		code   codes.Code
		reason apierr.Reason
		http   int
	}{
		{"", codes.Unauthenticated, apierr.ReasonUnauthenticated, http.StatusUnauthorized},
		{token, codes.InvalidArgument, apierr.ReasonRequestMalformed, http.StatusBadRequest},
	} {
		ctx := context.Background()
		if tc.token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.token)
		}
		err := conn.Invoke(ctx, "/agentplane.v1.TaskService/GetTask", []byte{0x0a, 0x01, 0xff}, &emptyMsg{}, grpc.ForceCodecV2(bytesCodec{}))
		if status.Code(err) != tc.code || reasons.Of(err) != tc.reason {
			t.Errorf("gRPC, token %v: got %v, want %s %s", tc.token != "", err, tc.code, tc.reason)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+in.HTTPAddr+"/v1/tasks/%ff", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.http || !strings.Contains(string(body), `"reason":"`+reasons.Wire(tc.reason)+`"`) {
			t.Errorf("HTTP, token %v: got %d %s, want %d %s", tc.token != "", resp.StatusCode, body, tc.http, tc.reason)
		}
	}
}
