package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/server/auth"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

func TestHealthServing(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	for _, svc := range []string{"", "agentplane.v1.TaskService", "agentplane.v1.SpecService"} {
		resp, err := in.Client.Health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("health %q: %v", svc, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q = %v", svc, resp.GetStatus())
		}
	}
}

// TestReflectionListsAllServices is what grpcurl does: list services by reflection.
func TestReflectionListsAllServices(t *testing.T) {
	in := servertest.Start(t, nil)
	conn, err := grpc.NewClient(in.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		got[s.GetName()] = true
	}
	for _, want := range []string{"SpecService", "TaskService", "HitlService", "CapabilityService", "RuntimeService", "AdminService"} {
		if !got["agentplane.v1."+want] {
			t.Errorf("reflection does not list agentplane.v1.%s (got %v)", want, got)
		}
	}
}

// TestEveryRPCAnswers calls every RPC of every agentplane.v1 service with an empty
// request: each must answer (never hang, never panic, never UNIMPLEMENTED), and an
// error must carry an ErrorInfo with a declared reason.
func TestEveryRPCAnswers(t *testing.T) {
	in := servertest.Start(t, nil)
	conn := in.Client.Conn()
	for name, info := range in.Server.ServiceInfo() {
		if !strings.HasPrefix(name, "agentplane.v1.") {
			continue
		}
		for _, m := range info.Methods {
			full := "/" + name + "/" + m.Name
			t.Run(full, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				err := invokeEmpty(ctx, conn, full, m.IsServerStream)
				if status.Code(err) == codes.Unimplemented {
					t.Errorf("%s is not implemented: %v", full, err)
				}
				if err != nil && reasons.Of(err) == agentplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED {
					t.Errorf("%s: %v carries no declared reason (ErrorInfo %v)", full, err, reasons.Info(err))
				}
				if status.Code(err) == codes.Unknown || status.Code(err) == codes.DeadlineExceeded {
					t.Errorf("%s: %v", full, err)
				}
			})
		}
	}
}

// invokeEmpty calls a method with an empty request message by its full name.
func invokeEmpty(ctx context.Context, conn *grpc.ClientConn, full string, serverStream bool) error {
	in := &emptyMsg{}
	if !serverStream {
		return conn.Invoke(ctx, full, in, &emptyMsg{}, grpc.ForceCodecV2(rawCodec{}))
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, full, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	if err := stream.SendMsg(in); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if err := stream.RecvMsg(&emptyMsg{}); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func TestCapabilitiesDescribeThisBuild(t *testing.T) {
	in := servertest.Start(t, nil)
	resp, err := in.Client.Capabilities.GetCapabilities(context.Background(), &agentplanev1.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	caps := resp.GetCapabilities()
	if !caps.GetFeatures().GetHttpJson() {
		t.Errorf("http_json must be true when HTTP is on")
	}
	if caps.GetPrincipal().GetTenant() == "" || caps.GetStore() != "bbolt" || caps.GetServerVersion() == "" {
		t.Errorf("incomplete capabilities: %v", caps)
	}
}

func TestHTTPGatewayReachesServer(t *testing.T) {
	in := servertest.Start(t, nil)
	base := "http://" + in.HTTPAddr
	resp, err := http.Get(base + "/v1/capabilities")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || body["capabilities"] == nil {
		t.Fatalf("GET /v1/capabilities: %d %v", resp.StatusCode, body)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if path == "/metrics" {
			for _, name := range []string{"agentplane_grpc_requests_total", "agentplane_pending_interrupts", "agentplane_store_commits_total",
				"agentplane_store_log_bytes", "agentplane_store_checkpoints_total"} {
				if !bytes.Contains(b, []byte(name)) {
					t.Fatalf("/metrics lacks %s", name)
				}
			}
		}
	}
	// The validate route takes the spec document itself as its body.
	resp, err = http.Post(base+"/v1/specs/validate", "application/json", strings.NewReader(`{"apiVersion":"qar/v1","kind":"AgentSpec"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		t.Fatalf("POST /v1/specs/validate is not routed")
	}
}

func TestSecondInstanceFailsFast(t *testing.T) {
	in := servertest.Start(t, nil)
	cfg := in.Config
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "off"
	cfg.Store.OpenTimeout = config.Duration(200 * time.Millisecond)
	start := time.Now()
	_, err := server.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "in use by another agentplane process") {
		t.Fatalf("want a clear lock error, got %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("second instance hung for %s", waited)
	}
}

func TestGracefulShutdownReleasesStore(t *testing.T) {
	in := servertest.Start(t, nil)
	in.Stop(t)
	// The store lock is released: the same data directory opens again at once.
	cfg := in.Config
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "off"
	cfg.Store.OpenTimeout = config.Duration(200 * time.Millisecond)
	again := servertest.StartConfig(t, cfg)
	if _, err := again.Client.Capabilities.GetCapabilities(context.Background(), &agentplanev1.GetCapabilitiesRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrorsStopBoot(t *testing.T) {
	cfg := servertest.Config(t)
	cfg.Log.Level = "loud"
	if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("want config error naming log.level, got %v", err)
	}
}

// TestShutdownEndsWatchesWithUnavailable: a graceful stop does not wait for open
// WatchTask streams to time out; it ends them with UNAVAILABLE, which tells a client
// to reconnect and resume from its last sequence.
func TestShutdownEndsWatchesWithUnavailable(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{ApiVersion: "qar/v1", Kind: "AgentSpec", Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "hi"}}})},
		Input: client.UserText("wait"),
	})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := client.Dial(ctx, in.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	stream, err := watcher.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: started.GetTask().GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	for { // the replay, up to caught_up: the watch is live
		msg, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if msg.GetCaughtUp() != nil {
			break
		}
	}
	start := time.Now()
	in.Stop(t)
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after shutdown: want UNAVAILABLE, got %v", err)
	}
	if took := time.Since(start); took >= server.ShutdownTimeout {
		t.Fatalf("shutdown waited %s for the watch (the drain timeout)", took)
	}
}

func TestPprofIsOptInAndGuarded(t *testing.T) {
	get := func(in *servertest.Instance) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + in.HTTPAddr + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(servertest.Start(t, nil)); code == http.StatusOK {
		t.Fatal("/debug/pprof/ is served without debug.pprof")
	}
	if code, body := get(servertest.Start(t, func(c *config.Config) { c.Debug.Pprof = true })); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("with debug.pprof: %d %.200s", code, body)
	}
	_, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	mt := servertest.Start(t, func(c *config.Config) {
		c.Debug.Pprof = true
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = []config.Token{{Name: "alice", SHA256: hash, Tenant: "acme", Roles: []string{"user"}}}
	})
	if code, _ := get(mt); code != http.StatusUnauthorized {
		t.Fatalf("multi-tenant /debug/pprof/ without a token: %d, want 401", code)
	}
}
