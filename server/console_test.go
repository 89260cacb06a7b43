package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// uiClient is a browser stand-in for the console: it keeps the session cookie by
// hand (so a test can copy, tamper with or replay it) and does not follow redirects.
type uiClient struct {
	t      *testing.T
	base   string
	cookie *http.Cookie
	csrf   string
	hc     *http.Client
}

func newUI(t *testing.T, httpAddr string) *uiClient {
	return &uiClient{t: t, base: "http://" + httpAddr, hc: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var csrfField = regexp.MustCompile(`name="csrf" (?:value|content)="([^"]+)"`)

func (u *uiClient) do(req *http.Request) (*http.Response, string) {
	u.t.Helper()
	if u.cookie != nil {
		req.AddCookie(u.cookie)
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if strings.HasSuffix(c.Name, "agentplane_console") {
			if c.MaxAge < 0 {
				u.cookie = nil
			} else {
				u.cookie = c
			}
		}
	}
	if m := csrfField.FindSubmatch(body); m != nil {
		u.csrf = string(m[1])
	}
	return resp, string(body)
}

func (u *uiClient) get(path string) (*http.Response, string) {
	u.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u.base+path, nil)
	return u.do(req)
}

// post sends form with the session's CSRF token unless form sets csrf itself.
func (u *uiClient) post(path string, form url.Values, header ...string) (*http.Response, string) {
	u.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", u.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, u.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return u.do(req)
}

func wantStatus(t *testing.T, what string, resp *http.Response, code int, location string) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("%s: status %d, want %d", what, resp.StatusCode, code)
	}
	if location != "" && resp.Header.Get("Location") != location {
		t.Fatalf("%s: Location %q, want %q", what, resp.Header.Get("Location"), location)
	}
}

// signIn signs a in through the sign-in form.
func signIn(t *testing.T, httpAddr string, a *actor) *uiClient {
	t.Helper()
	u := newUI(t, httpAddr)
	u.get("/ui/signin")
	resp, _ := u.post("/ui/signin", url.Values{"token": {a.token}})
	wantStatus(t, "sign-in of "+a.name, resp, http.StatusSeeOther, "/ui/inbox")
	return u
}

// raiseInterrupt starts a task as tenant's user and has its runtime ask the gate for
// the gated tool: a pending TOOL_APPROVAL interrupt of that tenant.
func raiseInterrupt(t *testing.T, mt *multiTenant, tenant string) (taskID string, in *agentplanev1.Interrupt) {
	t.Helper()
	taskID, in, _ = raiseInterruptLeased(t, mt, tenant)
	return taskID, in
}

// raiseInterruptLeased is raiseInterrupt, with the runtime's lease on the task.
func raiseInterruptLeased(t *testing.T, mt *multiTenant, tenant string) (taskID string, in *agentplanev1.Interrupt, lease *agentplanev1.LeaseRef) {
	t.Helper()
	ctx := context.Background()
	user, rt := mt.by[tenant][auth.RoleUser], mt.by[tenant][auth.RoleRuntime]
	started, err := user.c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:  client.UserText("move 1"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID = started.GetTask().GetTaskId()
	leased, err := rt.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: rt.name, MaxTasks: 1})
	if err != nil || len(leased.GetLeases()) != 1 || leased.GetLeases()[0].GetTask().GetTaskId() != taskID {
		t.Fatalf("LeaseTasks: %v %v", leased, err)
	}
	l := leased.GetLeases()[0]
	lease = &agentplanev1.LeaseRef{TaskId: taskID, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	check, err := rt.c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
		Lease:  lease,
		CallId: "call-1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n":1}`,
	})
	if err != nil || check.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Fatalf("CheckToolCall: %v %v", check, err)
	}
	return taskID, check.GetInterrupt(), lease
}

func pendingState(t *testing.T, a *actor, id string) agentplanev1.InterruptState {
	t.Helper()
	got, err := a.c.Hitl.GetInterrupt(context.Background(), &agentplanev1.GetInterruptRequest{InterruptId: id})
	if err != nil {
		t.Fatal(err)
	}
	return got.GetInterrupt().GetState()
}

func TestConsoleSignInSessionAndHeaders(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme"}, nil)
	addr := mt.in.HTTPAddr
	approver := mt.by["acme"][auth.RoleApprover]

	u := newUI(t, addr)
	resp, _ := u.get("/ui/inbox")
	wantStatus(t, "anonymous inbox", resp, http.StatusSeeOther, "/ui/signin")

	resp, _ = u.get("/ui/signin")
	wantStatus(t, "sign-in page", resp, http.StatusOK, "")
	set := resp.Header.Get("Set-Cookie")
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(set, attr) {
			t.Errorf("session cookie %q lacks %s", set, attr)
		}
	}
	if u.csrf == "" {
		t.Fatal("sign-in form carries no CSRF token")
	}
	anon := u.cookie

	resp, _ = u.post("/ui/signin", url.Values{"token": {approver.token}, "csrf": {""}})
	wantStatus(t, "sign-in without CSRF token", resp, http.StatusForbidden, "")
	resp, _ = u.post("/ui/signin", url.Values{"token": {approver.token}}, "Origin", "http://evil.example")
	wantStatus(t, "sign-in from another origin", resp, http.StatusForbidden, "")
	resp, body := u.post("/ui/signin", url.Values{"token": {"apt_not-a-configured-token"}})
	wantStatus(t, "sign-in with an unknown token", resp, http.StatusUnauthorized, "")
	if !strings.Contains(body, "not accepted") {
		t.Error("an unknown token's sign-in page does not say so")
	}
	resp, _ = u.get("/ui/inbox")
	wantStatus(t, "inbox after a refused sign-in", resp, http.StatusSeeOther, "/ui/signin")

	resp, _ = u.post("/ui/signin", url.Values{"token": {approver.token}})
	wantStatus(t, "sign-in", resp, http.StatusSeeOther, "/ui/inbox")
	if u.cookie == nil || u.cookie.Value == anon.Value {
		t.Fatal("signing in did not issue a new session cookie")
	}
	resp, body = u.get("/ui/inbox")
	wantStatus(t, "inbox", resp, http.StatusOK, "")
	if !strings.Contains(body, approver.name) || !strings.Contains(body, "tenant acme") {
		t.Error("the inbox does not show who is signed in")
	}
	h := resp.Header
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
		!strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("security headers: %v", h)
	}
	if strings.Contains(body, approver.token) {
		t.Error("a page shows the bearer token")
	}

	// A cookie that was tampered with opens nothing.
	signedIn := *u.cookie
	bad := signedIn
	bad.Value = strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return r
	}, bad.Value[:len(bad.Value)-4]) + "AAAA"
	u.cookie = &bad
	resp, _ = u.get("/ui/inbox")
	wantStatus(t, "tampered cookie", resp, http.StatusSeeOther, "/ui/signin")

	// Sign-out ends the session: the old cookie, replayed, is refused.
	u.cookie = &signedIn
	u.get("/ui/inbox")
	resp, _ = u.post("/ui/signout", url.Values{})
	wantStatus(t, "sign-out", resp, http.StatusSeeOther, "/ui/signin")
	u.cookie = &signedIn
	resp, _ = u.get("/ui/inbox")
	wantStatus(t, "replayed cookie after sign-out", resp, http.StatusSeeOther, "/ui/signin")
}

// TestConsoleSignInReturns: a link into the console (a notification's) opens the
// page it names after sign-in; a next that leaves the console is ignored.
func TestConsoleSignInReturns(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme"}, nil)
	approver := mt.by["acme"][auth.RoleApprover]
	u := newUI(t, mt.in.HTTPAddr)
	resp, _ := u.get("/ui/interrupts/in-1?x=1")
	wantStatus(t, "anonymous link", resp, http.StatusSeeOther, "/ui/signin?next=%2Fui%2Finterrupts%2Fin-1%3Fx%3D1")
	_, body := u.get("/ui/signin?next=%2Fui%2Finterrupts%2Fin-1%3Fx%3D1")
	if !strings.Contains(body, `name="next" value="/ui/interrupts/in-1?x=1"`) {
		t.Fatal("the sign-in form does not carry next")
	}
	for next, want := range map[string]string{
		"/ui/interrupts/in-1?x=1": "/ui/interrupts/in-1?x=1", "//evil.example/ui/": "/ui/inbox",
		"/ui//evil.example": "/ui/inbox", "https://evil.example/ui/": "/ui/inbox", "/v1/tasks": "/ui/inbox",
	} {
		v := newUI(t, mt.in.HTTPAddr)
		v.get("/ui/signin")
		resp, _ := v.post("/ui/signin", url.Values{"token": {approver.token}, "next": {next}})
		wantStatus(t, "sign-in with next "+next, resp, http.StatusSeeOther, want)
	}
}

func TestConsoleCSRF(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme"}, nil)
	approver := mt.by["acme"][auth.RoleApprover]
	_, in := raiseInterrupt(t, mt, "acme")
	path := "/ui/interrupts/" + in.GetInterruptId()
	u := signIn(t, mt.in.HTTPAddr, approver)
	other := signIn(t, mt.in.HTTPAddr, approver) // the same principal, another session
	u.get(path)

	for _, c := range []struct {
		name   string
		form   url.Values
		header []string
	}{
		{"no token", url.Values{"decision": {"approve"}, "csrf": {""}}, nil},
		{"wrong token", url.Values{"decision": {"approve"}, "csrf": {"x" + u.csrf}}, nil},
		{"another session's token", url.Values{"decision": {"approve"}, "csrf": {other.csrf}}, nil},
		{"another origin", url.Values{"decision": {"approve"}}, []string{"Origin", "http://evil.example"}},
		{"a cross-site fetch", url.Values{"decision": {"approve"}}, []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		resp, _ := u.post(path, c.form, c.header...)
		wantStatus(t, c.name, resp, http.StatusForbidden, "")
		if st := pendingState(t, approver, in.GetInterruptId()); st != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
			t.Fatalf("%s: the interrupt is %v", c.name, st)
		}
	}
	resp, _ := u.post(path, url.Values{"decision": {"approve"}, "args_digest": {in.GetArgsDigest()}}, "Origin", u.base, "Sec-Fetch-Site", "same-origin")
	wantStatus(t, "approve", resp, http.StatusSeeOther, path+"?done=1")
	got, err := approver.c.Hitl.GetInterrupt(context.Background(), &agentplanev1.GetInterruptRequest{InterruptId: in.GetInterruptId()})
	if err != nil || got.GetInterrupt().GetDecision().GetDecidedBy() != approver.name ||
		got.GetInterrupt().GetDecision().GetType() != agentplanev1.DecisionType_DECISION_TYPE_APPROVE {
		t.Fatalf("after approve: %v %v", got, err)
	}
}

func TestConsoleTenantIsolationAndRoles(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, nil)
	addr := mt.in.HTTPAddr
	taskID, in := raiseInterrupt(t, mt, "acme")
	id := in.GetInterruptId()
	acmeApprover := mt.by["acme"][auth.RoleApprover]

	t.Run("another tenant sees none of it", func(t *testing.T) {
		for _, a := range []*actor{mt.by["globex"][auth.RoleApprover], mt.by["globex"][auth.RoleUser]} {
			u := signIn(t, addr, a)
			for _, p := range []string{"/ui/inbox", "/ui/inbox/rows", "/ui/tasks"} {
				resp, body := u.get(p)
				wantStatus(t, a.name+" "+p, resp, http.StatusOK, "")
				if strings.Contains(body, id) || strings.Contains(body, taskID) {
					t.Errorf("%s sees acme's interrupt or task on %s", a.name, p)
				}
			}
			for _, p := range []string{"/ui/interrupts/" + id, "/ui/tasks/" + taskID, "/ui/tasks/" + taskID + "/events?after=0"} {
				resp, body := u.get(p)
				wantStatus(t, a.name+" "+p, resp, http.StatusNotFound, "")
				if strings.Contains(body, gatedTool) {
					t.Errorf("%s: the not-found page of %s shows the tool", a.name, p)
				}
			}
			resp, _ := u.post("/ui/interrupts/"+id, url.Values{"decision": {"approve"}})
			wantStatus(t, a.name+" approves acme's interrupt", resp, http.StatusNotFound, "")
			resp, _ = u.post("/ui/tasks/"+taskID+"/continue", url.Values{"message": {"hi"}})
			wantStatus(t, a.name+" continues acme's task", resp, http.StatusNotFound, "")
		}
		if st := pendingState(t, acmeApprover, id); st != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
			t.Fatalf("the interrupt is %v", st)
		}
	})

	t.Run("a user cannot approve", func(t *testing.T) {
		u := signIn(t, addr, mt.by["acme"][auth.RoleUser])
		resp, body := u.get("/ui/interrupts/" + id)
		wantStatus(t, "user reads the interrupt", resp, http.StatusOK, "")
		if strings.Contains(body, `value="approve"`) || !strings.Contains(body, "approver") {
			t.Error("a user's interrupt page offers the decision forms, or does not say why not")
		}
		for _, d := range []string{"approve", "reject", "edit"} {
			resp, body = u.post("/ui/interrupts/"+id, url.Values{"decision": {d}, "reason": {"no"}, "arg:n": {"2"}})
			wantStatus(t, "user "+d, resp, http.StatusForbidden, "")
			if !strings.Contains(body, "AUTH_PERMISSION_DENIED") {
				t.Errorf("user %s: the page does not show the API's refusal", d)
			}
		}
		if st := pendingState(t, acmeApprover, id); st != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
			t.Fatalf("the interrupt is %v", st)
		}
	})

	t.Run("an approver edits against the schema", func(t *testing.T) {
		u := signIn(t, addr, acmeApprover)
		for q, listed := range map[string]bool{"": true, "?tool=" + gatedTool: true, "?tool=" + freeTool: false,
			"?tag=nope": false, "?age=1h": false, "?age=1m&tool=" + gatedTool: false} {
			for _, p := range []string{"/ui/inbox", "/ui/inbox/rows"} {
				resp, body := u.get(p + q)
				wantStatus(t, p+q, resp, http.StatusOK, "")
				if strings.Contains(body, id) != listed {
					t.Errorf("%s%s lists the interrupt: %v, want %v", p, q, !listed, listed)
				}
			}
		}
		_, body := u.get("/ui/interrupts/" + id)
		if !strings.Contains(body, `name="arg:n"`) {
			t.Fatal("the edit form has no field for the schema's property n")
		}
		resp, body := u.post("/ui/interrupts/"+id, url.Values{"decision": {"edit"}, "arg:n": {"many"}, "args_digest": {in.GetArgsDigest()}})
		wantStatus(t, "edit against the schema", resp, http.StatusBadRequest, "")
		if !regexp.MustCompile(`(?s)data-field="n".*id="arg-n-err">[^<]*want integer`).MatchString(body) {
			t.Errorf("the field error is not shown beside n:\n%s", body)
		}
		resp, body = u.post("/ui/interrupts/"+id, url.Values{"decision": {"reject"}, "reason": {""}})
		wantStatus(t, "reject without a reason", resp, http.StatusBadRequest, "")
		if !strings.Contains(body, `id="reason-err"`) && !strings.Contains(body, "reason") {
			t.Error("a reject without reason does not say the reason is missing")
		}
		resp, _ = u.post("/ui/interrupts/"+id, url.Values{"decision": {"edit"}, "arg:n": {"7"}, "args_digest": {in.GetArgsDigest()}})
		wantStatus(t, "edit", resp, http.StatusSeeOther, "/ui/interrupts/"+id+"?done=1")
		got, err := acmeApprover.c.Hitl.GetInterrupt(context.Background(), &agentplanev1.GetInterruptRequest{InterruptId: id})
		d := got.GetInterrupt().GetDecision()
		if err != nil || d.GetType() != agentplanev1.DecisionType_DECISION_TYPE_EDIT || d.GetArgumentsJson() != `{"n":7}` || d.GetDecidedBy() != acmeApprover.name {
			t.Fatalf("decision %v %v", d, err)
		}
		_, body = u.get("/ui/tasks/" + taskID)
		if !strings.Contains(body, "interrupt resolved: edit by "+acmeApprover.name) {
			t.Error("the task's timeline does not show the decision")
		}
	})
}

func TestConsoleSingleUser(t *testing.T) {
	in := servertest.Start(t, nil)
	u := newUI(t, in.HTTPAddr)
	resp, body := u.get("/ui/inbox")
	wantStatus(t, "inbox", resp, http.StatusOK, "")
	if !strings.Contains(body, "owner") || u.csrf == "" {
		t.Error("single-user inbox: no owner, or no CSRF token")
	}
	resp, _ = u.get("/ui/signin")
	wantStatus(t, "sign-in page in single-user mode", resp, http.StatusSeeOther, "/ui/inbox")
	resp, _ = u.post("/ui/tasks/t-1/continue", url.Values{"message": {"hi"}, "csrf": {""}})
	wantStatus(t, "POST without CSRF token", resp, http.StatusForbidden, "")
	resp, body = u.get("/ui/capabilities")
	wantStatus(t, "capabilities", resp, http.StatusOK, "")
	if !strings.Contains(body, "Can approve</dt><dd>yes") {
		t.Error("the owner's capabilities page does not say it can approve")
	}
	resp, _ = u.get("/ui/nope")
	wantStatus(t, "unknown page", resp, http.StatusNotFound, "")
}

func TestConsoleDisabled(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { c.Console.Disabled = true })
	resp, _ := newUI(t, in.HTTPAddr).get("/ui/inbox")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Security-Policy") != "" {
		t.Fatalf("disabled console: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestConsoleSessionKeyPersists: the generated key is kept (0600) in the data
// directory, so a sign-in outlives a restart of the control plane.
func TestConsoleSessionKeyPersists(t *testing.T) {
	tok, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	cfg := servertest.Config(t)
	cfg.Auth.RequirePrincipal = true
	cfg.Auth.Tokens = []config.Token{{Name: "ann", SHA256: hash, Tenant: "acme", Roles: []string{"approver"}}}
	first := servertest.StartConfig(t, cfg)
	u := signIn(t, first.HTTPAddr, &actor{name: "ann", token: tok})
	first.Stop(t)
	fi, err := os.Stat(filepath.Join(cfg.DataDir, "console-session.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session key file: %v %v", fi, err)
	}
	second := servertest.StartConfig(t, cfg)
	u.base = "http://" + second.HTTPAddr
	resp, body := u.get("/ui/inbox")
	wantStatus(t, "inbox after a restart", resp, http.StatusOK, "")
	if !strings.Contains(body, "ann") {
		t.Error("the session after a restart is not ann's")
	}
}

// TestConsoleOverTLS: under TLS the session cookie is Secure, with the __Host- prefix,
// and pages ask for HTTPS from then on.
func TestConsoleOverTLS(t *testing.T) {
	pki := newTestPKI(t, t.TempDir(), "acme-bot")
	tok, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, func(c *config.Config) {
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = []config.Token{{Name: "ann", SHA256: hash, Tenant: "acme", Roles: []string{"approver"}}}
		c.TLS = config.TLS{CertFile: pki.certFile, KeyFile: pki.keyFile}
	})
	u := newUI(t, in.HTTPAddr)
	u.base = "https://" + in.HTTPAddr
	u.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}}
	defer u.hc.CloseIdleConnections()
	resp, _ := u.get("/ui/signin")
	wantStatus(t, "sign-in page over HTTPS", resp, http.StatusOK, "")
	set := resp.Header.Get("Set-Cookie")
	if !strings.HasPrefix(set, "__Host-agentplane_console=") || !strings.Contains(set, "; Secure") {
		t.Errorf("session cookie over HTTPS: %q", set)
	}
	if resp.Header.Get("Strict-Transport-Security") == "" {
		t.Error("no Strict-Transport-Security over HTTPS")
	}
	resp, _ = u.post("/ui/signin", url.Values{"token": {tok}})
	wantStatus(t, "sign-in over HTTPS", resp, http.StatusSeeOther, "/ui/inbox")
	resp, body := u.get("/ui/inbox")
	wantStatus(t, "inbox over HTTPS", resp, http.StatusOK, "")
	if !strings.Contains(body, "ann") {
		t.Error("the inbox over HTTPS is not ann's")
	}
}

// TestConsoleTasksContinueAndPaging: the tasks page pages and filters; a task paused
// at the end of a chat turn shows the continue box, and a message sent from it
// resumes the task with the user's words in its log.
func TestConsoleTasksContinueAndPaging(t *testing.T) {
	in := servertest.Start(t, nil)
	ctx := context.Background()
	c := in.Client
	agent := tenancyAgent()
	agent.AutoPauseOnTurnEnd = proto.Bool(true)
	for i := range 30 {
		_, err := c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(agent)},
			Input: client.UserText("hello"), Labels: map[string]string{"batch": map[bool]string{true: "even", false: "odd"}[i%2 == 0]}})
		if err != nil {
			t.Fatal(err)
		}
	}
	u := newUI(t, in.HTTPAddr)
	seen := map[string]bool{}
	next := "/ui/tasks?label=batch%3Deven"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		resp, body := u.get(next)
		wantStatus(t, next, resp, http.StatusOK, "")
		for _, m := range regexp.MustCompile(`<td><a href="/ui/tasks/([^"]+)" class="mono">`).FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Errorf("task %s on two pages", m[1])
			}
			seen[m[1]] = true
		}
		next = ""
		if m := regexp.MustCompile(`<a href="(/ui/tasks\?[^"]+)">Next page</a>`).FindStringSubmatch(body); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 15 {
		t.Fatalf("label filter and paging listed %d tasks, want the 15 even ones", len(seen))
	}

	leased, err := c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", MaxTasks: 1})
	if err != nil || len(leased.GetLeases()) != 1 {
		t.Fatalf("LeaseTasks: %v %v", leased, err)
	}
	l := leased.GetLeases()[0]
	chat := l.GetTask().GetTaskId()
	if _, err := c.Runtime.PauseTask(ctx, &agentplanev1.PauseTaskRequest{Lease: &agentplanev1.LeaseRef{TaskId: chat, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()},
		Node: "teller", Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "anything else?")}); err != nil {
		t.Fatal(err)
	}
	resp, body := u.get("/ui/tasks/" + chat)
	wantStatus(t, "paused task", resp, http.StatusOK, "")
	if !strings.Contains(body, `id="continue" aria-labelledby="h-cont">`) || !strings.Contains(body, "the user's next message") {
		t.Fatalf("a task waiting on its user does not show the continue box:\n%s", body)
	}
	pause := regexp.MustCompile(`<a href="/ui/interrupts/([^"]+)">[^<]+</a>: the user's next message`).FindStringSubmatch(body)
	if pause == nil {
		t.Fatal("the task page does not link the pause")
	}
	resp, body = u.get("/ui/interrupts/" + pause[1])
	wantStatus(t, "the pause's page", resp, http.StatusOK, "")
	if !strings.Contains(body, "its user's next message") || strings.Contains(body, `value="approve"`) {
		t.Error("a chat pause's page does not send the reader to the task, or offers to approve")
	}
	resp, _ = u.get("/ui/tasks?state=INPUT_REQUIRED")
	wantStatus(t, "state filter", resp, http.StatusOK, "")
	resp, _ = u.post("/ui/tasks/"+chat+"/continue", url.Values{"message": {"one more thing"}, "request_id": {"c-1"}})
	wantStatus(t, "continue", resp, http.StatusSeeOther, "/ui/tasks/"+chat)
	got, err := c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: chat})
	if err != nil || got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED {
		t.Fatalf("after continue: %v %v", got.GetTask().GetState(), err)
	}
	resp, body = u.get("/ui/tasks/" + chat + "/events?after=0")
	wantStatus(t, "events", resp, http.StatusOK, "")
	if !strings.Contains(body, "one more thing") || !strings.Contains(body, `"state":"SUBMITTED"`) {
		t.Errorf("the live timeline lacks the user's message or the state: %s", body)
	}
	resp, body = u.post("/ui/tasks/"+chat+"/continue", url.Values{"message": {"again"}, "request_id": {"c-2"}})
	if resp.StatusCode < 400 || !strings.Contains(body, `role="alert"`) {
		t.Errorf("continuing a task that waits on nothing: %d, no error shown", resp.StatusCode)
	}
}

// TestConsoleRejectedCallReadsAsRefused: after a rejection the interrupt's page shows
// the decision (who, the reason, as text), and the runtime's report of the refused
// call and of what it told the model read as refused on the task's page and in its
// live updates, never as a call that ran.
func TestConsoleRejectedCallReadsAsRefused(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme"}, nil)
	taskID, in, lease := raiseInterruptLeased(t, mt, "acme")
	ctx := context.Background()
	approver, rt := mt.by["acme"][auth.RoleApprover], mt.by["acme"][auth.RoleRuntime]
	if _, err := approver.c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: in.GetInterruptId(),
		Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: "no <b>way</b>"}}}); err != nil {
		t.Fatal(err)
	}
	task, err := mt.by["acme"][auth.RoleUser].c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	before := task.GetTask().GetLastSequence() // the rejection is at or before this event
	if _, err := rt.c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: lease, Events: []*agentplanev1.RuntimeEvent{
		{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: "call-1", ToolName: gatedTool, ArgumentsJson: `{"n":1}`}}},
		{Payload: &agentplanev1.RuntimeEvent_ToolResult{ToolResult: &agentplanev1.ToolResult{CallId: "call-1", ToolName: gatedTool,
			Result: structpb.NewStringValue("rejected: no <b>way</b>"), IsError: true}}},
	}}); err != nil {
		t.Fatal(err)
	}
	u := signIn(t, mt.in.HTTPAddr, approver)
	_, page := u.get("/ui/interrupts/" + in.GetInterruptId())
	for _, want := range []string{`id="decision"`, "Decision: rejected", "the call did not run", approver.name, "no &lt;b&gt;way&lt;/b&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the interrupt page lacks %q", want)
		}
	}
	refused := "refused: " + gatedTool + " (call-1) did not run, rejected by " + approver.name
	_, page = u.get("/ui/tasks/" + taskID)
	for _, want := range []string{refused, "the model is told " + gatedTool + " (call-1) was refused", "reason: no &lt;b&gt;way&lt;/b&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}
	if strings.Contains(page, "tool call "+gatedTool) {
		t.Error("the task page reads the refused call as run")
	}
	// The live update after the rejection learns it from the interrupt, not from the events it sends.
	_, live := u.get(fmt.Sprintf("/ui/tasks/%s/events?after=%d", taskID, before))
	var upd struct{ HTML string }
	if err := json.Unmarshal([]byte(live), &upd); err != nil || !strings.Contains(upd.HTML, refused) || strings.Contains(upd.HTML, "tool call "+gatedTool) {
		t.Errorf("live update %v: %s", err, live)
	}
}
