package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// guardReq is one request of the guard's table: what a browser (or a page it runs)
// would send, and the status the real server's root handler must answer.
type guardReq struct {
	name         string
	method, path string
	host         string // "" is the listener's own 127.0.0.1:port
	header       []string
	body         string
	want         int
}

// startGuarded starts a real server (with a logger the test reads) on loopback.
func startGuarded(t *testing.T, mutate func(*config.Config)) (*servertest.Instance, *testutil.SyncBuffer) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	cfg := servertest.Config(t)
	if mutate != nil {
		mutate(&cfg)
	}
	return servertest.StartLogged(t, cfg, slog.New(slog.NewTextHandler(logs, nil))), logs
}

func guardDo(t *testing.T, httpAddr string, c guardReq) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, "http://"+httpAddr+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.host != "" {
		req.Host = c.host
	}
	for i := 0; i+1 < len(c.header); i += 2 {
		req.Header.Set(c.header[i], c.header[i+1])
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// raiseOwnerInterrupt starts a task as the single-user owner and asks the gate for the
// gated tool as its runtime: a pending interrupt, the refund a page must not approve.
func raiseOwnerInterrupt(t *testing.T, c *client.Client) *agentplanev1.Interrupt {
	t.Helper()
	ctx := context.Background()
	started, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:  client.UserText("move 1"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	leased, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "guard-rt", MaxTasks: 1})
	if err != nil || len(leased.GetLeases()) != 1 {
		t.Fatalf("LeaseTasks: %v %v", leased, err)
	}
	l := leased.GetLeases()[0]
	check, err := c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
		Lease:  &agentplanev1.LeaseRef{TaskId: started.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()},
		CallId: "call-1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n":1}`,
	})
	if err != nil || check.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Fatalf("CheckToolCall: %v %v", check, err)
	}
	return check.GetInterrupt()
}

func taskCount(t *testing.T, c *client.Client) int {
	t.Helper()
	list, err := c.Tasks.ListTasks(context.Background(), &agentplanev1.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.GetTasks())
}

func startTaskJSON(t *testing.T) string {
	t.Helper()
	agent, err := specwire.Encode(tenancyAgent())
	if err != nil {
		t.Fatal(err)
	}
	return `{"spec":` + string(agent) + `,"input":{"parts":[{"text":"refund order 42"}]}}`
}

// TestHTTPGuardSingleUser reproduces, against the real root handler of a default
// (single-user, loopback) server, what a web page the owner visits tried: read and
// approve through a rebound host name, create tasks with cross-site simple requests,
// write from another origin; and checks that the owner's own requests still pass.
// Nothing refused may reach a handler: the interrupt stays pending and no task is
// created.
func TestHTTPGuardSingleUser(t *testing.T) {
	in, logs := startGuarded(t, nil)
	pending := raiseOwnerInterrupt(t, in.Client)
	resolve := "/v1/interrupts/" + pending.GetInterruptId() + ":resolve"
	approve := `{"decision":{"type":"DECISION_TYPE_APPROVE"},"argsDigest":"` + pending.GetArgsDigest() + `"}`
	_, port, _ := strings.Cut(in.HTTPAddr, ":")
	evil := "evil.test:" + port
	self := "http://" + in.HTTPAddr
	startTask := startTaskJSON(t)
	json := []string{"Content-Type", "application/json"}
	tasksBefore := taskCount(t, in.Client)

	for _, c := range []guardReq{
		// DNS rebinding: the page's name now points at 127.0.0.1; it is same-origin
		// with itself, so the browser sends its own name in Host and Origin.
		{name: "rebound read of /v1/tasks", method: "GET", path: "/v1/tasks", host: evil, want: http.StatusMisdirectedRequest},
		{name: "rebound read of /v1/interrupts", method: "GET", path: "/v1/interrupts", host: evil, want: http.StatusMisdirectedRequest},
		{name: "rebound approval", method: "POST", path: resolve, host: evil, body: approve,
			header: []string{"Content-Type", "application/json", "Origin", "http://" + evil, "Sec-Fetch-Site", "same-origin"}, want: http.StatusMisdirectedRequest},
		{name: "rebound console", method: "GET", path: "/ui/inbox", host: evil, want: http.StatusMisdirectedRequest},
		{name: "rebound metrics", method: "GET", path: "/metrics", host: evil, want: http.StatusMisdirectedRequest},
		{name: "rebound health", method: "GET", path: "/healthz", host: evil, want: http.StatusMisdirectedRequest},
		{name: "rebound name with a trailing dot", method: "GET", path: "/v1/tasks", host: "evil.test.:" + port, want: http.StatusMisdirectedRequest},
		{name: "a *.localhost name is not served unlisted", method: "GET", path: "/v1/tasks", host: "evil.localhost:" + port, want: http.StatusMisdirectedRequest},
		{name: "a LAN address literal", method: "GET", path: "/v1/tasks", host: "192.168.1.5:" + port, want: http.StatusMisdirectedRequest},
		// Cross-site simple requests: no preflight, so the body type is what stops them.
		{name: "no-cors text/plain task", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Content-Type", "text/plain;charset=UTF-8"}, want: http.StatusUnsupportedMediaType},
		{name: "no-cors form task", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Content-Type", "application/x-www-form-urlencoded"}, want: http.StatusUnsupportedMediaType},
		{name: "no-cors Blob task (no Content-Type)", method: "POST", path: "/v1/tasks", body: startTask, want: http.StatusUnsupportedMediaType},
		{name: "text/plain approval", method: "POST", path: resolve, body: approve,
			header: []string{"Content-Type", "text/plain"}, want: http.StatusUnsupportedMediaType},
		{name: "JSON in another charset", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Content-Type", "application/json; charset=iso-8859-1"}, want: http.StatusUnsupportedMediaType},
		{name: "a text/plain spec document", method: "POST", path: "/v1/specs/validate", body: `{"apiVersion":"qar/v1"}`,
			header: []string{"Content-Type", "text/plain"}, want: http.StatusUnsupportedMediaType},
		// The same writes as the browser sends them cross-site: Origin and Sec-Fetch-Site.
		{name: "text/plain task from another origin", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Content-Type", "text/plain", "Origin", "http://evil.test", "Sec-Fetch-Site", "cross-site"}, want: http.StatusForbidden},
		{name: "JSON approval from another origin", method: "POST", path: resolve, body: approve,
			header: []string{"Content-Type", "application/json", "Origin", "http://evil.test"}, want: http.StatusForbidden},
		{name: "JSON approval from another loopback port", method: "POST", path: resolve, body: approve,
			header: []string{"Content-Type", "application/json", "Origin", "http://127.0.0.1:1"}, want: http.StatusForbidden},
		{name: "JSON approval from an opaque origin", method: "POST", path: resolve, body: approve,
			header: []string{"Content-Type", "application/json", "Origin", "null"}, want: http.StatusForbidden},
		{name: "approval marked cross-site", method: "POST", path: resolve, body: approve,
			header: []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, want: http.StatusForbidden},
		{name: "cancel marked same-site", method: "POST", path: "/v1/tasks/" + pending.GetTaskId() + ":cancel", body: "{}",
			header: []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-site"}, want: http.StatusForbidden},
		{name: "delete from another origin", method: "DELETE", path: "/v1/tasks/" + pending.GetTaskId(),
			header: []string{"Origin", "http://evil.test"}, want: http.StatusForbidden},
		{name: "CORS preflight, CORS off", method: "OPTIONS", path: "/v1/tasks",
			header: []string{"Origin", "http://evil.test", "Access-Control-Request-Method", "POST"}, want: http.StatusForbidden},
		{name: "console form from another origin", method: "POST", path: "/ui/interrupts/" + pending.GetInterruptId(), body: "decision=approve",
			header: []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", "http://evil.test"}, want: http.StatusForbidden},
		{name: "console post that is not a form", method: "POST", path: "/ui/interrupts/" + pending.GetInterruptId(), body: "decision=approve",
			header: []string{"Content-Type", "text/plain"}, want: http.StatusUnsupportedMediaType},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := guardDo(t, in.HTTPAddr, c)
			if resp.StatusCode != c.want {
				t.Fatalf("%s %s (Host %q): %d %s, want %d", c.method, c.path, c.host, resp.StatusCode, body, c.want)
			}
			if strings.Contains(body, pending.GetInterruptId()) || strings.Contains(body, `"tasks"`) {
				t.Fatalf("the refusal leaks data: %s", body)
			}
		})
	}
	got, err := in.Client.Hitl.GetInterrupt(context.Background(), &agentplanev1.GetInterruptRequest{InterruptId: pending.GetInterruptId()})
	if err != nil || got.GetInterrupt().GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		t.Fatalf("after the attacks the interrupt is %v (%v), want pending", got.GetInterrupt().GetState(), err)
	}
	if n := taskCount(t, in.Client); n != tasksBefore {
		t.Fatalf("the attacks created %d tasks", n-tasksBefore)
	}
	task, err := in.Client.Tasks.GetTask(context.Background(), &agentplanev1.GetTaskRequest{TaskId: pending.GetTaskId()})
	if err != nil || task.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		t.Fatalf("after the attacks the task is %v (%v)", task.GetTask().GetState(), err)
	}

	// What the owner's tools and the console send still passes.
	for _, c := range []guardReq{
		{name: "curl read", method: "GET", path: "/v1/tasks", want: http.StatusOK},
		{name: "localhost", method: "GET", path: "/v1/tasks", host: "localhost:" + port, want: http.StatusOK},
		{name: "localhost with a trailing dot", method: "GET", path: "/healthz", host: "LOCALHOST.:" + port, want: http.StatusOK},
		{name: "another loopback literal", method: "GET", path: "/metrics", host: "127.0.0.2:" + port, want: http.StatusOK},
		{name: "IPv6 loopback", method: "GET", path: "/healthz", host: "[::1]:" + port, want: http.StatusOK},
		{name: "JSON task", method: "POST", path: "/v1/tasks", body: startTask, header: json, want: http.StatusOK},
		{name: "JSON task with charset, same origin", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Content-Type", "application/json; charset=utf-8", "Origin", self, "Sec-Fetch-Site", "same-origin"}, want: http.StatusOK},
		{name: "YAML spec document", method: "POST", path: "/v1/specs/validate", body: "apiVersion: qar/v1\n",
			header: []string{"Content-Type", "application/yaml"}, want: http.StatusOK},
		{name: "cancel without a body", method: "POST", path: "/v1/tasks/" + pending.GetTaskId() + ":cancel", want: http.StatusOK},
		// What Chrome sends from a page with Referrer-Policy: no-referrer, as the console's are.
		{name: "Origin null, same-origin", method: "POST", path: "/v1/specs/validate", body: `{"apiVersion":"qar/v1"}`,
			header: []string{"Content-Type", "application/json", "Origin", "null", "Sec-Fetch-Site", "same-origin"}, want: http.StatusOK},
		{name: "console page", method: "GET", path: "/ui/inbox", header: []string{"Sec-Fetch-Site", "none"}, want: http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			if resp, body := guardDo(t, in.HTTPAddr, c); resp.StatusCode != c.want {
				t.Fatalf("%s %s (Host %q): %d %s, want %d", c.method, c.path, c.host, resp.StatusCode, body, c.want)
			}
		})
	}

	_, metrics := guardDo(t, in.HTTPAddr, guardReq{method: "GET", path: "/metrics"})
	for _, want := range []string{
		`agentplane_http_guard_refused_total{reason="http.host_not_allowed"} 9`,
		`agentplane_http_guard_refused_total{reason="http.content_type"} 7`,
		`agentplane_http_guard_refused_total{reason="http.cross_origin"} 9`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if n := strings.Count(logs.String(), "http request refused by the guard"); n != 25 {
		t.Errorf("%d of 25 refusals logged:\n%s", n, logs)
	}
}

// TestHTTPGuardAllowedHosts: http.allowed_hosts adds names in single-user mode; in
// multi-tenant mode every Host is served until the list is set, then only it.
func TestHTTPGuardAllowedHosts(t *testing.T) {
	for _, c := range []struct {
		name        string
		multiTenant bool
		allowed     []string
		host        string
		want        int
	}{
		{"single-user, listed", false, []string{"agentplane.internal"}, "agentplane.internal", http.StatusOK},
		{"single-user, listed, another case and a port", false, []string{"agentplane.internal"}, "AgentPlane.Internal:7280", http.StatusOK},
		{"single-user, listed IP", false, []string{"10.0.0.7"}, "10.0.0.7:7280", http.StatusOK},
		{"single-user, unlisted", false, []string{"agentplane.internal"}, "evil.test", http.StatusMisdirectedRequest},
		{"single-user, a sub-domain of a listed name", false, []string{"agentplane.internal"}, "x.agentplane.internal", http.StatusMisdirectedRequest},
		{"single-user, loopback beside the list", false, []string{"agentplane.internal"}, "127.0.0.1", http.StatusOK},
		{"multi-tenant, no list", true, nil, "agentplane.example.com", http.StatusUnauthorized},
		{"multi-tenant, listed", true, []string{"agentplane.example.com"}, "agentplane.example.com", http.StatusUnauthorized},
		{"multi-tenant, unlisted", true, []string{"agentplane.example.com"}, "evil.test", http.StatusMisdirectedRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, _ := startGuarded(t, func(cfg *config.Config) {
				if c.multiTenant {
					cfg.Auth.RequirePrincipal = true
					cfg.Auth.Tokens = []config.Token{{Name: "ops", SHA256: strings.Repeat("ab", 32), Tenant: "*", Roles: []string{"admin"}}}
				}
				cfg.HTTP.AllowedHosts = c.allowed
			})
			if resp, body := guardDo(t, in.HTTPAddr, guardReq{method: "GET", path: "/v1/tasks", host: c.host}); resp.StatusCode != c.want {
				t.Fatalf("Host %q: %d %s, want %d", c.host, resp.StatusCode, body, c.want)
			}
			// Probes and metrics sit behind the same check.
			want := http.StatusOK
			if c.want == http.StatusMisdirectedRequest {
				want = c.want
			}
			if resp, _ := guardDo(t, in.HTTPAddr, guardReq{method: "GET", path: "/healthz", host: c.host}); resp.StatusCode != want {
				t.Fatalf("/healthz with Host %q: %d, want %d", c.host, resp.StatusCode, want)
			}
		})
	}
}

// TestHTTPGuardCORS: an origin in http.cors_origins gets a preflight answer and may
// write to the API with JSON; others do not; the console never answers CORS.
func TestHTTPGuardCORS(t *testing.T) {
	const app = "https://app.example.com"
	in, _ := startGuarded(t, func(cfg *config.Config) { cfg.HTTP.CORSOrigins = []string{app} })
	startTask := startTaskJSON(t)
	for _, c := range []struct {
		guardReq
		allowOrigin string
	}{
		{guardReq{name: "preflight, listed", method: "OPTIONS", path: "/v1/tasks",
			header: []string{"Origin", app, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type"}, want: http.StatusNoContent}, app},
		{guardReq{name: "JSON task, listed", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Origin", app, "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, want: http.StatusOK}, app},
		{guardReq{name: "read, listed", method: "GET", path: "/v1/tasks", header: []string{"Origin", app}, want: http.StatusOK}, app},
		{guardReq{name: "text/plain task, listed", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Origin", app, "Content-Type", "text/plain"}, want: http.StatusUnsupportedMediaType}, app},
		{guardReq{name: "preflight, unlisted", method: "OPTIONS", path: "/v1/tasks",
			header: []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}, want: http.StatusForbidden}, ""},
		{guardReq{name: "JSON task, unlisted", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Origin", "https://evil.example", "Content-Type", "application/json"}, want: http.StatusForbidden}, ""},
		{guardReq{name: "JSON task, listed origin's other scheme", method: "POST", path: "/v1/tasks", body: startTask,
			header: []string{"Origin", "http://app.example.com", "Content-Type", "application/json"}, want: http.StatusForbidden}, ""},
		{guardReq{name: "console preflight, listed", method: "OPTIONS", path: "/ui/inbox",
			header: []string{"Origin", app, "Access-Control-Request-Method", "POST"}, want: http.StatusForbidden}, ""},
		{guardReq{name: "console form, listed", method: "POST", path: "/ui/signout", body: "csrf=x",
			header: []string{"Origin", app, "Content-Type", "application/x-www-form-urlencoded"}, want: http.StatusForbidden}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := guardDo(t, in.HTTPAddr, c.guardReq)
			if resp.StatusCode != c.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, c.want)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != c.allowOrigin {
				t.Fatalf("Access-Control-Allow-Origin %q, want %q", got, c.allowOrigin)
			}
			if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
				t.Fatal("CORS must not carry credentials (the console's cookie)")
			}
			if c.method == "OPTIONS" && c.want == http.StatusNoContent &&
				(!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
					!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Content-Type")) {
				t.Fatalf("preflight answer lacks methods or headers: %v", resp.Header)
			}
		})
	}
}

func TestHTTPGuardConfigValidation(t *testing.T) {
	for _, c := range []struct {
		name    string
		hosts   []string
		origins []string
		bad     string
	}{
		{"fine", []string{"agentplane.internal", "10.0.0.7", "::1"}, []string{"https://app.example.com", "http://localhost:5173"}, ""},
		{"host with a port", []string{"agentplane.internal:7280"}, nil, "http.allowed_hosts"},
		{"host wildcard", []string{"*.example.com"}, nil, "http.allowed_hosts"},
		{"host with a scheme", []string{"http://agentplane.internal"}, nil, "http.allowed_hosts"},
		{"empty host", []string{""}, nil, "http.allowed_hosts"},
		{"origin *", nil, []string{"*"}, "http.cors_origins"},
		{"origin null", nil, []string{"null"}, "http.cors_origins"},
		{"origin with a path", nil, []string{"https://app.example.com/"}, "http.cors_origins"},
		{"origin with the default port", nil, []string{"https://app.example.com:443"}, "http.cors_origins"},
		{"origin in capitals", nil, []string{"https://App.example.com"}, "http.cors_origins"},
		{"origin without a scheme", nil, []string{"app.example.com"}, "http.cors_origins"},
		{"origin ftp", nil, []string{"ftp://app.example.com"}, "http.cors_origins"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.HTTP.AllowedHosts, cfg.HTTP.CORSOrigins = c.hosts, c.origins
			err := cfg.Validate()
			if c.bad == "" && err != nil || c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)) {
				t.Fatalf("Validate: %v, want %q", err, c.bad)
			}
		})
	}
	cfg := config.Default()
	if err := config.Parse([]byte("http:\n  allowed_hostz: [a]\n"), &cfg); err == nil || !strings.Contains(err.Error(), "allowed_hostz") {
		t.Fatalf("an unknown http key: %v", err)
	}
}
