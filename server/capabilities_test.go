package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// The tests in this file prove through the real server that GetCapabilities says yes
// exactly when a StartTask using the capability is honoured, and that caller MCP
// servers and A2A peers are shape-checked, merged under the deployment's baseline and
// handed to the runtime as the gates decide.

// The deployment baseline every server in this file is configured with.
var (
	baselineMcp = config.Peer{Name: "corp", URL: "https://mcp.corp.example.com/sse"}
	baselineA2a = config.Peer{Name: "partner", URL: "https://agents.partner.example.com/"}
)

func withBaseline(c *config.Config) {
	c.Gates.McpServers = []config.Peer{baselineMcp}
	c.Gates.A2aPeers = []config.Peer{baselineA2a}
}

// lane is one injection lane as a client sees it: how a request carries it, where
// the task (names, URLs, header names) and the lease (whole entries) hold it, which
// event says it was ignored.
type lane struct {
	name string // the locked key: mcp or a2a
	// set puts entries (nil: absent) into req, as a present list even when empty.
	set func(req *agentplanev1.StartTaskRequest, entries []peer)
	// effective reads the lane's effective list of a task or lease, as peers.
	fromTask  func(*agentplanev1.Task) []peer
	fromLease func(*agentplanev1.Lease) []peer
	ignored   func(*agentplanev1.TaskEvent) *agentplanev1.InjectionIgnored
	honoured  func(*agentplanev1.Capabilities) bool
	baseline  config.Peer
	cap       gates.Capability
}

// peer is an entry of either lane: headers as the lease holds them, or only
// headerNames as a task shows them.
type peer struct {
	name, url   string
	headers     map[string]string
	headerNames []string
}

var lanes = []lane{
	{
		name: "mcp",
		set: func(req *agentplanev1.StartTaskRequest, entries []peer) {
			if entries == nil {
				req.McpServers = nil
				return
			}
			req.McpServers = &agentplanev1.McpServerList{}
			for _, e := range entries {
				req.McpServers.Servers = append(req.McpServers.Servers, &agentplanev1.McpServer{Name: e.name, Url: e.url, Headers: e.headers})
			}
		},
		fromTask: func(t *agentplanev1.Task) []peer {
			var out []peer
			for _, e := range t.GetEffectiveMcpServers() {
				out = append(out, peer{name: e.GetName(), url: e.GetUrl(), headerNames: e.GetHeaderNames()})
			}
			return out
		},
		fromLease: func(l *agentplanev1.Lease) []peer { return mcpPeers(l.GetMcpServers()) },
		ignored:   func(ev *agentplanev1.TaskEvent) *agentplanev1.InjectionIgnored { return ev.GetMcpInjectionIgnored() },
		honoured:  func(c *agentplanev1.Capabilities) bool { return c.GetMcpInjection() },
		baseline:  baselineMcp,
		cap:       gates.CapMcpServers,
	},
	{
		name: "a2a",
		set: func(req *agentplanev1.StartTaskRequest, entries []peer) {
			if entries == nil {
				req.A2APeers = nil
				return
			}
			req.A2APeers = &agentplanev1.A2APeerList{}
			for _, e := range entries {
				req.A2APeers.Peers = append(req.A2APeers.Peers, &agentplanev1.A2APeer{Name: e.name, Url: e.url, Headers: e.headers})
			}
		},
		fromTask: func(t *agentplanev1.Task) []peer {
			var out []peer
			for _, e := range t.GetEffectiveA2APeers() {
				out = append(out, peer{name: e.GetName(), url: e.GetUrl(), headerNames: e.GetHeaderNames()})
			}
			return out
		},
		fromLease: func(l *agentplanev1.Lease) []peer { return a2aPeers(l.GetA2APeers()) },
		ignored:   func(ev *agentplanev1.TaskEvent) *agentplanev1.InjectionIgnored { return ev.GetA2AInjectionIgnored() },
		honoured:  func(c *agentplanev1.Capabilities) bool { return c.GetA2AInjection() },
		baseline:  baselineA2a,
		cap:       gates.CapA2aPeers,
	},
}

func mcpPeers(in []*agentplanev1.McpServer) []peer {
	var out []peer
	for _, e := range in {
		out = append(out, peer{name: e.GetName(), url: e.GetUrl(), headers: e.GetHeaders()})
	}
	return out
}

func a2aPeers(in []*agentplanev1.A2APeer) []peer {
	var out []peer
	for _, e := range in {
		out = append(out, peer{name: e.GetName(), url: e.GetUrl(), headers: e.GetHeaders()})
	}
	return out
}

func peerNames(ps []peer) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.name)
	}
	return out
}

// startRequest is a valid StartTask request with no caller entries.
func startRequest() *agentplanev1.StartTaskRequest {
	return &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hello")}
}

// taskLog reads task's log up to the sequence it had when returned.
func taskLog(t *testing.T, c *client.Client, task *agentplanev1.Task) []*agentplanev1.TaskEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: task.GetTaskId()})
	if err != nil {
		t.Fatal(err)
	}
	var out []*agentplanev1.TaskEvent
	for len(out) == 0 || out[len(out)-1].GetSequence() < task.GetLastSequence() {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("watching task %s: %v after %d events", task.GetTaskId(), err, len(out))
		}
		out = append(out, resp.GetEvent())
	}
	return out
}

// dropsOf collects the task's entries_dropped reports for protocol, by entry name.
func dropsOf(events []*agentplanev1.TaskEvent, protocol string) map[string]string {
	out := map[string]string{}
	for _, ev := range events {
		if d := ev.GetEntriesDropped(); d != nil && d.GetProtocol() == protocol {
			for _, e := range d.GetEntries() {
				out[e.GetName()] = e.GetReason()
			}
		}
	}
	return out
}

// capsCase is one deployment and caller.
type capsCase struct {
	multi   bool
	locked  []string
	posture gates.Posture
	// tenant, when set, is the caller's tenant's settings (they may only tighten).
	tenant *config.Tenant
}

func (c capsCase) String() string {
	mode := "single"
	if c.multi {
		mode = "multi"
	}
	s := fmt.Sprintf("%s/locked=%s/%s", mode, strings.Join(c.locked, "+"), c.posture)
	if c.tenant != nil {
		s += fmt.Sprintf("/tenant(locked=%s,%s)", strings.Join(c.tenant.LockedKeys, "+"), c.tenant.CompliancePosture)
	}
	return s
}

// callerTenant is the tenant the case's caller acts in.
func (c capsCase) callerTenant() string {
	if c.multi {
		return "acme"
	}
	return auth.DefaultTenant
}

// want returns what the case's caller is owed: the locked keys (canonical order), the
// posture in force, and whether a lane is honoured. It is the three vetoes written out
// from the design, not read from the gates.
func (c capsCase) want() (locked []string, posture gates.Posture, honoured func(lane) bool) {
	all := slices.Clone(c.locked)
	posture = c.posture
	if c.tenant != nil {
		all = append(all, c.tenant.LockedKeys...)
		if c.tenant.CompliancePosture != "" {
			posture = gates.Posture(c.tenant.CompliancePosture)
		}
	}
	for _, k := range gates.AllLockedKeys() {
		if slices.Contains(all, string(k)) {
			locked = append(locked, string(k))
		}
	}
	return locked, posture, func(l lane) bool {
		return !slices.Contains(locked, l.name) && !c.multi && !posture.Denies(l.cap)
	}
}

// capsCases is every combination of mode, locked subset of {mcp, a2a} and posture,
// plus per-tenant tightening of a deployment that would honour everything.
func capsCases() []capsCase {
	var out []capsCase
	for _, multi := range []bool{false, true} {
		for _, locked := range [][]string{nil, {"mcp"}, {"a2a"}, {"mcp", "a2a"}} {
			for _, p := range gates.AllPostures() {
				out = append(out, capsCase{multi: multi, locked: locked, posture: p})
			}
		}
	}
	for _, tc := range []config.Tenant{
		{LockedKeys: []string{"mcp"}},
		{LockedKeys: []string{"a2a"}},
		{CompliancePosture: string(gates.PostureRestricted)},
		{CompliancePosture: string(gates.PostureAirgapped), LockedKeys: []string{"a2a"}},
	} {
		for _, multi := range []bool{false, true} {
			out = append(out, capsCase{multi: multi, posture: gates.PostureStandard, tenant: &tc})
		}
	}
	return out
}

// startCapsServer starts the case's deployment and returns a client acting as its caller.
func startCapsServer(t *testing.T, c capsCase) *client.Client {
	t.Helper()
	token, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, func(cfg *config.Config) {
		withBaseline(cfg)
		cfg.HTTPAddr = "off"
		cfg.Gates.LockedKeys = c.locked
		cfg.Gates.CompliancePosture = string(c.posture)
		if c.tenant != nil {
			cfg.Tenants = map[string]config.Tenant{c.callerTenant(): *c.tenant}
		}
		if c.multi {
			cfg.Auth.RequirePrincipal = true
			cfg.Auth.Tokens = []config.Token{{Name: "acme-user", SHA256: hash, Tenant: "acme", Roles: []string{"user"}}}
		}
	})
	if !c.multi {
		return in.Client
	}
	cl, err := client.Dial(context.Background(), in.GRPCAddr, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// TestCapabilitiesNeverLie starts a server for every combination of mode, locked keys
// and compliance posture (and a few per-tenant tightenings), asks GetCapabilities as
// the caller, then sends StartTask with each lane absent, empty and non-empty. A lane
// advertised as honoured puts the caller's entry in the task's effective list; one
// advertised as not honoured ignores it and says so in the task's log; a locked lane
// refuses any present list (even empty) with CONFIG_LOCKED_KEY and accepts an absent one.
func TestCapabilitiesNeverLie(t *testing.T) {
	for _, c := range capsCases() {
		t.Run(c.String(), func(t *testing.T) {
			cl := startCapsServer(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := cl.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			caps := resp.GetCapabilities()
			wantLocked, wantPosture, wantHonoured := c.want()

			// What the capabilities say, against the design.
			if caps.GetPrincipal().GetTenant() != c.callerTenant() || caps.GetRequirePrincipal() != c.multi {
				t.Errorf("principal %v, require_principal %v", caps.GetPrincipal(), caps.GetRequirePrincipal())
			}
			if !slices.Equal(caps.GetLockedKeys(), wantLocked) {
				t.Errorf("locked_keys %v, want %v", caps.GetLockedKeys(), wantLocked)
			}
			if caps.GetCompliancePosture() != string(wantPosture) {
				t.Errorf("compliance_posture %q, want %q", caps.GetCompliancePosture(), wantPosture)
			}
			var wantDenied []string
			for _, cp := range wantPosture.Denied() {
				wantDenied = append(wantDenied, string(cp))
			}
			if !slices.Equal(caps.GetDeniedCapabilities(), wantDenied) {
				t.Errorf("denied_capabilities %v, want %v", caps.GetDeniedCapabilities(), wantDenied)
			}
			anyHonoured := false
			for _, l := range lanes {
				if l.honoured(caps) != wantHonoured(l) {
					t.Errorf("%s_injection %v; the three vetoes say %v", l.name, l.honoured(caps), wantHonoured(l))
				}
				anyHonoured = anyHonoured || l.honoured(caps)
			}
			if wantCap := map[bool]int32{true: gates.MaxCallerPeers}[anyHonoured]; caps.GetMaxCallerPeers() != wantCap {
				t.Errorf("max_caller_peers %d, want %d", caps.GetMaxCallerPeers(), wantCap)
			}

			// What the route does, against what the capabilities say.
			mine := []peer{{name: "mine", url: "https://tools.example.com/"}}
			for _, l := range lanes {
				locked := slices.Contains(caps.GetLockedKeys(), l.name)
				for _, shape := range []struct {
					name    string
					entries []peer
				}{{"absent", nil}, {"empty", []peer{}}, {"non-empty", mine}} {
					req := startRequest()
					l.set(req, shape.entries)
					started, err := cl.Tasks.StartTask(ctx, req)
					if locked && shape.entries != nil {
						if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != apierr.ReasonLockedKey ||
							reasons.Info(err).GetMetadata()["keys"] != l.name {
							t.Errorf("%s %s list on a locked key: want FAILED_PRECONDITION %s keys=%s, got %v (%v)",
								l.name, shape.name, apierr.ReasonLockedKey, l.name, err, reasons.Info(err).GetMetadata())
						}
						continue
					}
					if err != nil {
						t.Errorf("%s %s list: %v", l.name, shape.name, err)
						continue
					}
					task := started.GetTask()
					effective := l.fromTask(task)
					if len(effective) == 0 || effective[0].name != l.baseline.Name || effective[0].url != l.baseline.URL {
						t.Errorf("%s %s list: effective %v does not start with the baseline %v", l.name, shape.name, effective, l.baseline)
					}
					honoured := slices.Contains(peerNames(effective), "mine")
					if len(shape.entries) > 0 && honoured != l.honoured(caps) {
						t.Errorf("%s_injection says %v but the caller's server honoured=%v (effective %v)",
							l.name, l.honoured(caps), honoured, peerNames(effective))
					}
					var ignored []*agentplanev1.InjectionIgnored
					for _, ev := range taskLog(t, cl, task) {
						if ig := l.ignored(ev); ig != nil {
							ignored = append(ignored, ig)
						}
					}
					wantIgnored := len(shape.entries) > 0 && !l.honoured(caps)
					switch {
					case wantIgnored && (len(ignored) != 1 || !slices.Equal(ignored[0].GetNames(), []string{"mine"})):
						t.Errorf("%s %s list not honoured: want one %s_injection_ignored event naming mine, got %v", l.name, shape.name, l.name, ignored)
					case wantIgnored && ignored[0].GetReason() != map[bool]string{true: "multi_tenant", false: "compliance_posture"}[c.multi]:
						t.Errorf("%s_injection_ignored reason %q (multi-tenant %v, posture %s)", l.name, ignored[0].GetReason(), c.multi, wantPosture)
					case !wantIgnored && len(ignored) > 0:
						t.Errorf("%s %s list (honoured %v): unexpected ignored events %v", l.name, shape.name, l.honoured(caps), ignored)
					}
				}
			}

			// Both lanes on a deployment locking both: one refusal naming both keys.
			if slices.Contains(caps.GetLockedKeys(), "mcp") && slices.Contains(caps.GetLockedKeys(), "a2a") {
				req := startRequest()
				for _, l := range lanes {
					l.set(req, []peer{})
				}
				_, err := cl.Tasks.StartTask(ctx, req)
				if status.Code(err) != codes.FailedPrecondition || reasons.Info(err).GetMetadata()["keys"] != "mcp,a2a" {
					t.Errorf("both lanes locked and present: want one refusal with keys=mcp,a2a, got %v (%v)", err, reasons.Info(err).GetMetadata())
				}
			}
		})
	}
}

// TestCapabilitiesPerTenant runs one multi-tenant deployment whose tenants have
// different settings: each tenant's capabilities are its own, and so are its refusals.
func TestCapabilitiesPerTenant(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "strict"}, func(c *config.Config) {
		withBaseline(c)
		c.Gates.CompliancePosture = string(gates.PostureRestricted)
		c.Tenants = map[string]config.Tenant{"strict": {LockedKeys: []string{"a2a"}, CompliancePosture: string(gates.PostureAirgapped)}}
	})
	ctx := context.Background()
	for _, tc := range []struct {
		tenant  string
		locked  []string
		posture gates.Posture
	}{
		{"acme", nil, gates.PostureRestricted},
		{"strict", []string{"a2a"}, gates.PostureAirgapped},
	} {
		user := mt.by[tc.tenant][auth.RoleUser]
		resp, err := user.c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		caps := resp.GetCapabilities()
		if !slices.Equal(caps.GetLockedKeys(), tc.locked) || caps.GetCompliancePosture() != string(tc.posture) || caps.GetPrincipal().GetTenant() != tc.tenant {
			t.Errorf("%s: locked %v posture %q principal %v; want %v %q", tc.tenant, caps.GetLockedKeys(), caps.GetCompliancePosture(), caps.GetPrincipal(), tc.locked, tc.posture)
		}
		req := startRequest()
		lanes[1].set(req, []peer{})
		_, err = user.c.Tasks.StartTask(ctx, req)
		if locked := slices.Contains(tc.locked, "a2a"); locked != (reasonOf(err) == apierr.ReasonLockedKey) {
			t.Errorf("%s: a2a locked %v, StartTask with an empty a2a list: %v", tc.tenant, locked, err)
		}
	}
}

// entryCase is a caller entry and what the gates make of it in single-user mode: kept,
// or dropped for reason.
type entryCase struct {
	entry peer
	drop  gates.Reason // "" when kept
}

// shapeCases are SSRF-shaped and malformed entries next to acceptable ones.
var shapeCases = []entryCase{
	{peer{name: "metadata", url: "https://169.254.169.254/latest/meta-data/"}, gates.DropURLForbiddenHost},
	{peer{name: "linklocal6", url: "https://[fe80::1]/"}, gates.DropURLForbiddenHost},
	{peer{name: "file", url: "file:///etc/passwd"}, gates.DropURLScheme},
	{peer{name: "plainhttp", url: "http://example.com/"}, gates.DropURLPlainHTTP},
	{peer{name: "userinfo", url: "https://user:pass@example.com/"}, gates.DropURLCredentials},
	{peer{name: "gopher", url: "gopher://x"}, gates.DropURLScheme},
	{peer{name: "unspecified", url: "http://0.0.0.0"}, gates.DropURLForbiddenHost},
	{peer{name: "decimal-ip", url: "https://2852039166/"}, gates.DropURLForbiddenHost},
	{peer{name: "too-many-headers", url: "https://many.example.com/", headers: manyHeaders(gates.MaxHeaders + 1)}, gates.DropHeadersTooMany},
	{peer{name: "host-header", url: "https://host.example.com/", headers: map[string]string{"Host": "internal"}}, gates.DropHeaderReserved},
	{peer{name: "crlf-header", url: "https://crlf.example.com/", headers: map[string]string{"X-A": "a\r\nX-B: b"}}, gates.DropHeaderInvalid},
	{peer{name: "big-header", url: "https://big.example.com/", headers: map[string]string{"X-Big": strings.Repeat("b", gates.MaxHeaderValueBytes+1)}}, gates.DropHeadersTooLarge},
	{peer{name: "bad__name", url: "https://name.example.com/"}, gates.DropNameInvalid},
	{peer{name: "loopback", url: "http://127.0.0.1:8080/mcp"}, ""}, // single-user only
	{peer{name: "good", url: "https://tools.example.com/", headers: map[string]string{"Authorization": "Bearer caller-secret"}}, ""},
	{peer{name: "GOOD", url: "https://other.example.com/"}, gates.DropNameDuplicate},
}

// shapeLabel is how reports name shapeCases[i]: by name, or by index when the name
// is invalid (reports never echo arbitrary caller bytes).
func shapeLabel(i int) string {
	if shapeCases[i].drop == gates.DropNameInvalid {
		return fmt.Sprintf("#%d", i)
	}
	return shapeCases[i].entry.name
}

func manyHeaders(n int) map[string]string {
	h := map[string]string{}
	for i := range n {
		h[fmt.Sprintf("X-H%d", i)] = "v"
	}
	return h
}

// leaseAll leases every queued task as rt and returns the leases by task id.
func leaseAll(t *testing.T, rt *client.Client, want int) map[string]*agentplanev1.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]*agentplanev1.Lease{}
	for len(out) < want {
		resp, err := rt.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "entries-test", MaxTasks: 64, Wait: nil})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetLeases()) == 0 {
			t.Fatalf("leased %d of %d tasks; the queue is empty", len(out), want)
		}
		for _, l := range resp.GetLeases() {
			out[l.GetTask().GetTaskId()] = l
		}
	}
	return out
}

// TestCallerEntriesThroughStartTask sends caller entries through StartTask on both
// lanes of a single-user deployment: SSRF-shaped and malformed entries are dropped and
// named in an entries_dropped event, 33 entries become 32 and one named drop, a caller
// entry named like a baseline entry does not shadow it, and the effective lists reach
// the runtime in its lease. On a multi-tenant deployment the same entries are ignored
// (even the loopback one), and the runtime gets the baseline only.
func TestCallerEntriesThroughStartTask(t *testing.T) {
	var over []peer
	for i := range gates.MaxCallerPeers + 1 {
		over = append(over, peer{name: fmt.Sprintf("p%02d", i), url: fmt.Sprintf("https://p%02d.example.com/", i)})
	}
	shapes := make([]peer, len(shapeCases))
	shapeLabels := make([]string, len(shapeCases))
	for i, c := range shapeCases {
		shapes[i], shapeLabels[i] = c.entry, shapeLabel(i)
	}
	type request struct {
		name        string
		entries     []peer
		wantKept    []string          // caller entries in the effective list, after the baseline
		wantDropped map[string]string // entry name -> reason
		check       func(t *testing.T, l lane, effective []peer)
	}
	requests := func(l lane) []request {
		shapeKept, shapeDropped := []string{}, map[string]string{}
		for i, c := range shapeCases {
			if c.drop == "" {
				shapeKept = append(shapeKept, c.entry.name)
			} else {
				shapeDropped[shapeLabel(i)] = string(c.drop)
			}
		}
		overKept := peerNames(over[:gates.MaxCallerPeers])
		shadowName := strings.ToUpper(l.baseline.Name) // names clash case-insensitively
		return []request{
			{name: "shapes", entries: shapes, wantKept: shapeKept, wantDropped: shapeDropped},
			{name: "33 entries", entries: over, wantKept: overKept, wantDropped: map[string]string{over[gates.MaxCallerPeers].name: string(gates.DropOverLimit)}},
			{
				name:        "shadowing the baseline",
				entries:     []peer{{name: shadowName, url: "https://evil.example.com/"}, {name: "extra", url: "https://extra.example.com/"}},
				wantKept:    []string{"extra"},
				wantDropped: map[string]string{shadowName: string(gates.DropShadowsBaseline)},
				check: func(t *testing.T, l lane, effective []peer) {
					for _, e := range effective {
						if strings.EqualFold(e.name, l.baseline.Name) && e.url != l.baseline.URL {
							t.Errorf("the caller shadowed baseline %s: %v", l.baseline.Name, e)
						}
					}
				},
			},
		}
	}

	t.Run("single-user", func(t *testing.T) {
		in := servertest.Start(t, withBaseline)
		c := in.Client // the owner holds every role, runtime included
		ctx := context.Background()
		type started struct {
			l    lane
			task *agentplanev1.Task
		}
		var all []started
		for _, l := range lanes {
			for _, rq := range requests(l) {
				req := startRequest()
				l.set(req, rq.entries)
				resp, err := c.Tasks.StartTask(ctx, req)
				if err != nil {
					t.Fatalf("%s %s: %v", l.name, rq.name, err)
				}
				task := resp.GetTask()
				all = append(all, started{l, task})
				effective := l.fromTask(task)
				if want := append([]string{l.baseline.Name}, rq.wantKept...); !slices.Equal(peerNames(effective), want) {
					t.Errorf("%s %s: effective %v, want %v", l.name, rq.name, peerNames(effective), want)
				}
				if got := dropsOf(taskLog(t, c, task), l.name); !maps.Equal(got, rq.wantDropped) {
					t.Errorf("%s %s: entries_dropped %v, want %v", l.name, rq.name, got, rq.wantDropped)
				}
				if rq.check != nil {
					rq.check(t, l, effective)
				}
			}
		}
		leases := leaseAll(t, c, len(all))
		for _, s := range all {
			l := leases[s.task.GetTaskId()]
			if got, want := s.l.fromLease(l), s.l.fromTask(s.task); !slices.EqualFunc(got, want, shownAs) {
				t.Errorf("%s: the lease carries %v, the task shows %v", s.l.name, got, want)
			}
			other := lanes[1-slices.IndexFunc(lanes, func(x lane) bool { return x.name == s.l.name })]
			if got := other.fromLease(l); len(got) != 1 || !peerEqual(got[0], peer{name: other.baseline.Name, url: other.baseline.URL}) {
				t.Errorf("%s request: the untouched %s lane leased as %v, want the baseline only", s.l.name, other.name, got)
			}
		}
	})

	t.Run("multi-tenant", func(t *testing.T) {
		mt := startMultiTenant(t, []string{"acme"}, withBaseline)
		user, runtime := mt.by["acme"][auth.RoleUser], mt.by["acme"][auth.RoleRuntime]
		var tasks []*agentplanev1.Task
		for _, l := range lanes {
			req := startRequest()
			l.set(req, shapes)
			resp, err := user.c.Tasks.StartTask(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			task := resp.GetTask()
			tasks = append(tasks, task)
			log := taskLog(t, user.c, task)
			var ignored *agentplanev1.InjectionIgnored
			for _, ev := range log {
				if ig := l.ignored(ev); ig != nil {
					ignored = ig
				}
			}
			if ignored == nil || ignored.GetReason() != string(gates.IgnoredMultiTenant) || !slices.Equal(ignored.GetNames(), shapeLabels) {
				t.Errorf("%s: want an ignored event naming every entry (%v) for multi_tenant, got %v", l.name, shapeLabels, ignored)
			}
			if d := dropsOf(log, l.name); len(d) > 0 {
				t.Errorf("%s: ignored entries are not shape-checked, yet dropped %v", l.name, d)
			}
		}
		leases := leaseAll(t, runtime.c, len(tasks))
		for _, task := range tasks {
			for _, l := range lanes {
				got := l.fromLease(leases[task.GetTaskId()])
				if len(got) != 1 || !peerEqual(got[0], peer{name: l.baseline.Name, url: l.baseline.URL}) {
					t.Errorf("multi-tenant lease: %s %v, want the baseline only", l.name, got)
				}
			}
		}
	})
}

func peerEqual(a, b peer) bool {
	return a.name == b.name && a.url == b.url && maps.Equal(a.headers, b.headers)
}

// shownAs says whether a task shows the entry e (held whole in a lease) as s: its name,
// its URL (these have no query) and its header names, sorted, without their values.
func shownAs(e, s peer) bool {
	return e.name == s.name && e.url == s.url && s.headers == nil && slices.Equal(slices.Sorted(maps.Keys(e.headers)), s.headerNames)
}

// TestPostureDeniedWorkflowsAreRefused: a posture denying workflows (airgapped) is
// advertised in denied_capabilities, so a StartTask running a graph must be refused,
// not run ("every no is a route that does not work").
func TestPostureDeniedWorkflowsAreRefused(t *testing.T) {

	in := servertest.Start(t, func(c *config.Config) { c.Gates.CompliancePosture = string(gates.PostureAirgapped) })
	ctx := context.Background()
	resp, err := in.Client.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(resp.GetCapabilities().GetDeniedCapabilities(), string(gates.CapWorkflows)) {
		t.Fatalf("airgapped does not deny workflows: %v", resp.GetCapabilities().GetDeniedCapabilities())
	}
	doc, err := os.ReadFile("../examples/graphs/write-review.yaml")
	if err != nil {
		t.Fatal(err)
	}
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("write it"),
	})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("StartTask of a GraphSpec with workflows denied: want FAILED_PRECONDITION, got %v (task %v)", err, started.GetTask().GetState())
	}
}

// deployment is one running configuration the features are checked on.
type deployment struct {
	name    string
	backend string // what capabilities and stats must say the store is
	mutate  func(t *testing.T, c *config.Config)
}

func deployments() []deployment {
	return []deployment{
		{"bbolt", "bbolt", func(*testing.T, *config.Config) {}},
		{"bbolt without wal or http", "bbolt", func(_ *testing.T, c *config.Config) {
			c.Store.WAL = false
			c.HTTPAddr = "off"
		}},
		{"postgres", "postgres", func(t *testing.T, c *config.Config) {
			c.Store.Backend = config.BackendPostgres
			c.Store.Postgres.DSN = pgtest.DSN(t)
		}},
	}
}

// featureEnv is what a probe calls through.
type featureEnv struct {
	t   *testing.T
	ctx context.Context
	c   *client.Client
	in  *servertest.Instance
}

// start starts a task of agent with policy and returns it.
func (e featureEnv) start(req *agentplanev1.StartTaskRequest) *agentplanev1.Task {
	e.t.Helper()
	if req.Source == nil {
		req.Source = &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}
	}
	if req.Input == nil {
		req.Input = client.UserText("hello")
	}
	resp, err := e.c.Tasks.StartTask(e.ctx, req)
	if err != nil {
		e.t.Fatalf("StartTask: %v", err)
	}
	return resp.GetTask()
}

// lease leases task id (other queued tasks leased on the way are left to expire).
func (e featureEnv) lease(id string) (*agentplanev1.LeaseRef, *agentplanev1.Lease, error) {
	for range 20 {
		resp, err := e.c.Runtime.LeaseTasks(e.ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "features", MaxTasks: 64})
		if err != nil {
			return nil, nil, err
		}
		for _, l := range resp.GetLeases() {
			if l.GetTask().GetTaskId() == id {
				return &agentplanev1.LeaseRef{TaskId: id, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}, l, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("task %s was never leased", id)
}

// featureProbe calls the routes behind one feature: nil when every call did what the
// feature promises. refused says whether err is the documented refusal when the
// feature is advertised as off.
type featureProbe struct {
	name    string
	on      func(*agentplanev1.Features) bool
	call    func(e featureEnv) error
	refused func(e featureEnv, err error) bool
}

// notServed is the refusal of a route this server does not register.
func notServed(_ featureEnv, err error) bool { return status.Code(err) == codes.Unimplemented }

var featureProbes = []featureProbe{
	{"spec_validation", (*agentplanev1.Features).GetSpecValidation, func(e featureEnv) error {
		v, err := e.c.Spec.ValidateSpec(e.ctx, &agentplanev1.ValidateSpecRequest{Source: &agentplanev1.ValidateSpecRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}})
		if err != nil || !v.GetValid() {
			return fmt.Errorf("ValidateSpec = %v, %v", v, err)
		}
		rules, err := e.c.Spec.ListRules(e.ctx, &agentplanev1.ListRulesRequest{})
		if err != nil || len(rules.GetRules()) == 0 {
			return fmt.Errorf("ListRules = %v, %v", rules, err)
		}
		_, err = e.c.Spec.GetRule(e.ctx, &agentplanev1.GetRuleRequest{RuleId: rules.GetRules()[0].GetRuleId()})
		return err
	}, notServed},
	{"tasks", (*agentplanev1.Features).GetTasks, func(e featureEnv) error {
		task := e.start(&agentplanev1.StartTaskRequest{})
		if _, err := e.c.Tasks.GetTask(e.ctx, &agentplanev1.GetTaskRequest{TaskId: task.GetTaskId()}); err != nil {
			return err
		}
		list, err := e.c.Tasks.ListTasks(e.ctx, &agentplanev1.ListTasksRequest{})
		if err != nil || !slices.ContainsFunc(list.GetTasks(), func(x *agentplanev1.Task) bool { return x.GetTaskId() == task.GetTaskId() }) {
			return fmt.Errorf("ListTasks = %v, %v; want the task listed", list, err)
		}
		c, err := e.c.Tasks.CancelTask(e.ctx, &agentplanev1.CancelTaskRequest{TaskId: task.GetTaskId()})
		if err != nil || c.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED {
			return fmt.Errorf("CancelTask = %v, %v", c, err)
		}
		return nil
	}, notServed},
	{"watch_resume", (*agentplanev1.Features).GetWatchResume, func(e featureEnv) error {
		task := e.start(&agentplanev1.StartTaskRequest{})
		if _, err := e.c.Tasks.CancelTask(e.ctx, &agentplanev1.CancelTaskRequest{TaskId: task.GetTaskId()}); err != nil {
			return err
		}
		stream, err := e.c.Tasks.WatchTask(e.ctx, &agentplanev1.WatchTaskRequest{TaskId: task.GetTaskId(), AfterSequence: 1})
		if err != nil {
			return err
		}
		resp, err := stream.Recv()
		if err != nil || resp.GetEvent().GetSequence() != 2 {
			return fmt.Errorf("WatchTask after sequence 1: first answer %v, %v; want event 2", resp, err)
		}
		return nil
	}, notServed},
	{"idempotent_start", (*agentplanev1.Features).GetIdempotentStart, func(e featureEnv) error {
		first := e.start(&agentplanev1.StartTaskRequest{RequestId: "features-idem"})
		again, err := e.c.Tasks.StartTask(e.ctx, &agentplanev1.StartTaskRequest{RequestId: "features-idem",
			Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hello")})
		if err != nil || again.GetCreated() || again.GetTask().GetTaskId() != first.GetTaskId() {
			return fmt.Errorf("retried StartTask = %v, %v; want task %s, not created", again, err, first.GetTaskId())
		}
		return nil
	}, notServed},
	{"runtime_leases", (*agentplanev1.Features).GetRuntimeLeases, func(e featureEnv) error {
		ref, _, err := e.lease(e.start(&agentplanev1.StartTaskRequest{}).GetTaskId())
		if err != nil {
			return err
		}
		_, err = e.c.Runtime.Heartbeat(e.ctx, &agentplanev1.HeartbeatRequest{Lease: ref})
		return err
	}, notServed},
	{"durable_interrupts", (*agentplanev1.Features).GetDurableInterrupts, func(e featureEnv) error {
		// A gated call; the runtime gives up its lease; the decision is handed to the
		// next lease.
		task := e.start(&agentplanev1.StartTaskRequest{InterruptPolicy: gatedPolicy()})
		ref, _, err := e.lease(task.GetTaskId())
		if err != nil {
			return err
		}
		checked, err := e.c.Runtime.CheckToolCall(e.ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n": 5}`})
		if err != nil || checked.GetInterrupt() == nil {
			return fmt.Errorf("CheckToolCall = %v, %v; want an interrupt", checked, err)
		}
		if _, err := e.c.Runtime.SuspendTask(e.ctx, &agentplanev1.SuspendTaskRequest{Lease: ref}); err != nil {
			return err
		}
		id := checked.GetInterrupt().GetInterruptId()
		inbox, err := e.c.Hitl.ListInterrupts(e.ctx, &agentplanev1.ListInterruptsRequest{TaskId: task.GetTaskId()})
		if err != nil || len(inbox.GetInterrupts()) != 1 || inbox.GetInterrupts()[0].GetInterruptId() != id {
			return fmt.Errorf("inbox = %v, %v; want the interrupt", inbox, err)
		}
		if _, err := e.c.Hitl.ResolveInterrupt(e.ctx, &agentplanev1.ResolveInterruptRequest{InterruptId: id,
			Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}}); err != nil {
			return err
		}
		_, l, err := e.lease(task.GetTaskId())
		if err != nil {
			return err
		}
		if len(l.GetResolvedInterrupts()) != 1 || l.GetResolvedInterrupts()[0].GetInterruptId() != id {
			return fmt.Errorf("the resumed lease carries %v; want the resolved interrupt %s", l.GetResolvedInterrupts(), id)
		}
		return nil
	}, notServed},
	{"cel_policies", (*agentplanev1.Features).GetCelPolicies, func(e featureEnv) error {
		task := e.start(&agentplanev1.StartTaskRequest{InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Predicate{
			Predicate: &agentplanev1.PredicatePolicy{Expression: `tool_name == "` + gatedTool + `" && args.n > 10`}}}})
		ref, _, err := e.lease(task.GetTaskId())
		if err != nil {
			return err
		}
		for _, tc := range []struct {
			args string
			want agentplanev1.GateOutcome
		}{{`{"n": 5}`, agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW}, {`{"n": 50}`, agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT}} {
			got, err := e.c.Runtime.CheckToolCall(e.ctx, &agentplanev1.CheckToolCallRequest{Lease: ref, CallId: "c" + tc.args, ToolName: gatedTool, AgentName: "teller", ArgumentsJson: tc.args})
			if err != nil || got.GetOutcome() != tc.want {
				return fmt.Errorf("CheckToolCall(%s) under a CEL predicate = %v, %v; want %v", tc.args, got, err, tc.want)
			}
		}
		return nil
	}, notServed},
	{"verdicts", (*agentplanev1.Features).GetVerdicts, func(e featureEnv) error {
		doc, err := os.ReadFile("../examples/graphs/write-review.yaml")
		if err != nil {
			return err
		}
		task := e.start(&agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Document{Document: doc}, Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML})
		ref, _, err := e.lease(task.GetTaskId())
		if err != nil {
			return err
		}
		if _, err := e.c.Runtime.RecordVerdict(e.ctx, &agentplanev1.RecordVerdictRequest{Lease: ref, Node: "critic",
			Result: &agentplanev1.VerdictResult{Verdict: "pass", Confidence: new(0.9)}}); err != nil {
			return err
		}
		list, err := e.c.Tasks.ListVerdicts(e.ctx, &agentplanev1.ListVerdictsRequest{TaskId: task.GetTaskId()})
		if err != nil || len(list.GetVerdicts()) != 1 || !list.GetVerdicts()[0].GetApproved() {
			return fmt.Errorf("ListVerdicts = %v, %v; want the pass", list, err)
		}
		_, err = e.c.Tasks.ListObligations(e.ctx, &agentplanev1.ListObligationsRequest{TaskId: task.GetTaskId()})
		return err
	}, notServed},
	{"chat_mode", (*agentplanev1.Features).GetChatMode, func(e featureEnv) error {
		agent := tenancyAgent()
		agent.AutoPauseOnTurnEnd = new(true)
		task := e.start(&agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(agent)}})
		ref, _, err := e.lease(task.GetTaskId())
		if err != nil {
			return err
		}
		if _, err := e.c.Runtime.PauseTask(e.ctx, &agentplanev1.PauseTaskRequest{Lease: ref, Node: "teller",
			Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "anything else?")}); err != nil {
			return err
		}
		cont, err := e.c.Tasks.ContinueTask(e.ctx, &agentplanev1.ContinueTaskRequest{TaskId: task.GetTaskId(),
			Input: &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("yes")}})
		if err != nil || cont.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_SUBMITTED {
			return fmt.Errorf("ContinueTask = %v, %v; want the task queued again", cont, err)
		}
		return nil
	}, notServed},
	{"hot_backup", (*agentplanev1.Features).GetHotBackup, func(e featureEnv) error {
		stream, err := e.c.Admin.Backup(e.ctx, &agentplanev1.BackupRequest{})
		if err != nil {
			return err
		}
		var total, got int64
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if total == 0 {
				total = resp.GetTotalBytes()
			}
			got += int64(len(resp.GetChunk()))
		}
		if total == 0 || got != total {
			return fmt.Errorf("backup of %d bytes, %d received", total, got)
		}
		return nil
	}, func(_ featureEnv, err error) bool {
		return status.Code(err) == codes.FailedPrecondition && reasonOf(err) == apierr.ReasonStoreBackupUnsupported
	}},
	{"http_json", (*agentplanev1.Features).GetHttpJson, func(e featureEnv) error {
		if e.in.HTTPAddr == "" {
			return errNoHTTPListener
		}
		resp, err := http.Get("http://" + e.in.HTTPAddr + "/v1/capabilities")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /v1/capabilities: %s", resp.Status)
		}
		return nil
	}, func(_ featureEnv, err error) bool { return errors.Is(err, errNoHTTPListener) }},
	{"schedules", (*agentplanev1.Features).GetSchedules, func(e featureEnv) error {
		created, err := e.c.Schedules.CreateSchedule(e.ctx, &agentplanev1.CreateScheduleRequest{ScheduleId: "features", Spec: intervalSpec(time.Hour),
			Task: &agentplanev1.StartTaskRequest{Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hello")}})
		if err != nil {
			return err
		}
		trig, err := e.c.Schedules.TriggerSchedule(e.ctx, &agentplanev1.TriggerScheduleRequest{ScheduleId: created.GetSchedule().GetScheduleId()})
		if err != nil || trig.GetTask().GetScheduledBy().GetScheduleId() != "features" {
			return fmt.Errorf("TriggerSchedule = %v, %v; want a task of the schedule", trig, err)
		}
		_, err = e.c.Schedules.DeleteSchedule(e.ctx, &agentplanev1.DeleteScheduleRequest{ScheduleId: "features"})
		return err
	}, notServed},
}

var errNoHTTPListener = errors.New("no HTTP listener")

// TestFeaturesNeverLie runs each deployment (bbolt, bbolt without its log and HTTP,
// PostgreSQL) and checks every feature GetCapabilities advertises against real calls
// of its routes: advertised yes, the calls work; advertised no, they are refused
// with the documented reason. The store's name and stats are the backend's own.
func TestFeaturesNeverLie(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			in := servertest.Start(t, func(c *config.Config) { d.mutate(t, c) })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			resp, err := in.Client.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			caps := resp.GetCapabilities()
			if caps.GetStore() != d.backend {
				t.Errorf("capabilities say store %q on %s", caps.GetStore(), d.backend)
			}
			stats, err := in.Client.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if stats.GetStore() != d.backend {
				t.Errorf("stats say store %q on %s", stats.GetStore(), d.backend)
			}
			hasLog := d.backend == "bbolt" && in.Config.Store.WAL
			if stats.GetWriteAheadLog() != hasLog || !hasLog && (stats.GetLogBytes() != 0 || stats.GetCheckpoints() != 0) {
				t.Errorf("stats on %s: write_ahead_log %v (want %v), log %d bytes, %d checkpoints", d.name,
					stats.GetWriteAheadLog(), hasLog, stats.GetLogBytes(), stats.GetCheckpoints())
			}
			if in.HTTPAddr != "" {
				// /metrics exports the log's series only for a store that keeps one.
				resp, err := http.Get("http://" + in.HTTPAddr + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, name := range []string{"agentplane_store_log_bytes ", "agentplane_store_checkpoints_total "} {
					if strings.Contains(string(b), "\n"+name) != hasLog {
						t.Errorf("/metrics on %s (write-ahead log %v) exports %s: %v", d.name, hasLog, name, !hasLog)
					}
				}
			}
			e := featureEnv{t: t, ctx: ctx, c: in.Client, in: in}
			for _, p := range featureProbes {
				on := p.on(caps.GetFeatures())
				err := p.call(e)
				switch {
				case on && err != nil:
					t.Errorf("%s advertised, but its route fails: %v", p.name, err)
				case !on && err == nil:
					t.Errorf("%s advertised as off, but its route works", p.name)
				case !on && !p.refused(e, err):
					t.Errorf("%s advertised as off: want its documented refusal, got %v", p.name, err)
				}
			}
		})
	}
}
