package tasks

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// bigAgentParams starts an inline agent whose instructions are n bytes, with an MCP
// server whose header carries a secret.
func bigAgentParams(tenant string, n int) StartParams {
	p := params(tenant)
	name := "big"
	agent := &agentplanev1.AgentSpec{Name: &name, Model: "m", Instructions: &agentplanev1.Instructions{
		Source: &agentplanev1.Instructions_Text{Text: strings.Repeat("x", n)}}}
	p.AgentID, p.Agent = "", agent
	p.Resolved = &agentplanev1.ResolvedSpec{Spec: &agentplanev1.ResolvedSpec_Agent{Agent: agent}}
	p.McpServers = []*agentplanev1.McpServer{{Name: "ops", Url: "https://mcp.example.com/sse?key=k1", Headers: map[string]string{"Authorization": "Bearer s1", "X-Org": "o"}}}
	return p
}

func TestViews(t *testing.T) {
	h := newHarness(t)
	p := bigAgentParams("acme", 1000)
	p.View = ViewBasic
	basic := h.start(t, p)
	id := basic.GetTaskId()
	full := h.get(t, "acme", id)
	if basic.GetSpec() != nil || full.GetAgent().GetName() != "big" {
		t.Fatalf("Start (basic) spec = %v; Get (full) spec = %v", basic.GetSpec(), full.GetSpec())
	}
	if basic.GetSpecKind() != KindAgent || full.GetSpecKind() != KindAgent {
		t.Errorf("spec_kind = %q, %q; want %q", basic.GetSpecKind(), full.GetSpecKind(), KindAgent)
	}
	// The basic view is the full one without the spec.
	want := proto.Clone(full).(*agentplanev1.Task)
	want.Spec = nil
	for _, got := range []*agentplanev1.Task{basic, mustGet(t, h, id, ViewBasic)} {
		equal(t, "basic view", got, want)
	}
	list, _, err := h.m.List(ctx, "acme", ListQuery{View: ViewBasic})
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	equal(t, "basic list", list[0], want)
	list, _, err = h.m.List(ctx, "acme", ListQuery{View: ViewFull})
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	equal(t, "full list", list[0], full)

	// A retry in another view is the same request, answered in the view it asks for.
	p.View = ViewFull
	again, created, err := h.m.Start(ctx, withRequestID(p, "r"))
	if err != nil || !created {
		t.Fatal(err)
	}
	p.View = ViewBasic
	retry, created, err := h.m.Start(ctx, withRequestID(p, "r"))
	if err != nil || created || retry.GetTaskId() != again.GetTaskId() || retry.GetSpec() != nil || again.GetAgent() == nil {
		t.Fatalf("retry in the basic view = %v created=%v, %v (first: %v)", retry.GetSpec(), created, err, again.GetSpec())
	}

	// Static agents keep their id in both views.
	static := params("acme")
	static.View = ViewBasic
	if got := h.start(t, static); got.GetAgentId() != "echo" || got.GetSpecKind() != KindStatic {
		t.Errorf("basic view of a static agent: spec %v, kind %q", got.GetSpec(), got.GetSpecKind())
	}
}

func withRequestID(p StartParams, id string) StartParams {
	p.RequestID = id
	return p
}

func mustGet(t *testing.T, h *harness, id string, view View) *agentplanev1.Task {
	t.Helper()
	task, err := h.m.Get(ctx, "acme", id, view)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestTaskShowsPeerNamesNotHeaderValues: every view of a task names the effective
// servers with their URL (no query) and header names; the header values reach only
// the lease.
func TestTaskShowsPeerNamesNotHeaderValues(t *testing.T) {
	h := newHarness(t)
	p := bigAgentParams("acme", 10)
	p.A2aPeers = []*agentplanev1.A2APeer{{Name: "billing", Url: "https://a2a.example.com/a#t2", Headers: map[string]string{"X-Key": "s2"}}}
	task := h.start(t, p)
	wantMcp := []*agentplanev1.McpServerInfo{{Name: "ops", Url: "https://mcp.example.com/sse", HeaderNames: []string{"Authorization", "X-Org"}}}
	wantA2a := []*agentplanev1.A2APeerInfo{{Name: "billing", Url: "https://a2a.example.com/a", HeaderNames: []string{"X-Key"}}}
	list, _, err := h.m.List(ctx, "acme", ListQuery{View: ViewBasic})
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []*agentplanev1.Task{task, mustGet(t, h, task.GetTaskId(), ViewFull), mustGet(t, h, task.GetTaskId(), ViewBasic), list[0]} {
		equal(t, "effective_mcp_servers", &agentplanev1.Task{EffectiveMcpServers: got.GetEffectiveMcpServers(), EffectiveA2APeers: got.GetEffectiveA2APeers()},
			&agentplanev1.Task{EffectiveMcpServers: wantMcp, EffectiveA2APeers: wantA2a})
		b, _ := proto.Marshal(got)
		for _, secret := range []string{"s1", "k1", "s2", "t2"} {
			if strings.Contains(string(b), "Bearer s1") || strings.Contains(string(b), "key="+secret) || strings.Contains(string(b), "#"+secret) {
				t.Errorf("a client-facing task carries %q", secret)
			}
		}
	}
	l := h.lease(t, "rt")
	equal(t, "lease mcp_servers", &agentplanev1.Lease{McpServers: l.GetMcpServers(), A2APeers: l.GetA2APeers()},
		&agentplanev1.Lease{McpServers: p.McpServers, A2APeers: p.A2aPeers})
}

// TestTaskHoldsNoPeerEntries: no field reachable from agentplane.v1.Task can hold an MCP
// server's or A2A peer's full entry (McpServer, A2aPeer: their header values may be an
// operator's credentials). Task.mcp_servers and Task.a2a_peers, which could, are removed
// and reserved; a client sees McpServerInfo and A2aPeerInfo only.
func TestTaskHoldsNoPeerEntries(t *testing.T) {
	forbidden := map[protoreflect.FullName]bool{
		(&agentplanev1.McpServer{}).ProtoReflect().Descriptor().FullName(): true,
		(&agentplanev1.A2APeer{}).ProtoReflect().Descriptor().FullName():   true,
	}
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor, path string)
	walk = func(md protoreflect.MessageDescriptor, path string) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			sub := fd.Message()
			if fd.IsMap() {
				sub = fd.MapValue().Message()
			}
			if sub == nil {
				continue
			}
			if forbidden[sub.FullName()] {
				t.Errorf("%s.%s holds %s", path, fd.Name(), sub.FullName())
				continue
			}
			walk(sub, path+"."+string(fd.Name()))
		}
	}
	task := (&agentplanev1.Task{}).ProtoReflect().Descriptor()
	walk(task, "Task")
	for _, n := range []protoreflect.Name{"mcp_servers", "a2a_peers"} {
		if !task.ReservedNames().Has(n) {
			t.Errorf("Task does not reserve the name %s", n)
		}
	}
	for _, n := range []protoreflect.FieldNumber{19, 20} {
		if !task.ReservedRanges().Has(n) {
			t.Errorf("Task does not reserve field number %d", n)
		}
	}
}

// TestListByteCap: a page stops before its tasks would pass MaxListResponseBytes,
// holds at least one task whatever its size, and the pages together list every task
// once.
func TestListByteCap(t *testing.T) {
	const specBytes = 10 << 10
	h := newHarness(t, func(c *Config) { c.MaxListResponseBytes = 25 << 10 })
	var want []string
	for range 7 {
		want = append([]string{h.start(t, bigAgentParams("acme", specBytes)).GetTaskId()}, want...)
		h.clock.Advance(time.Second)
	}
	pages := func(view View) (sizes []int) {
		var got []string
		q := ListQuery{View: view, PageSize: 500}
		for range 20 {
			list, next, err := h.m.List(ctx, "acme", q)
			if err != nil {
				t.Fatal(err)
			}
			resp := &agentplanev1.ListTasksResponse{Tasks: list}
			if n := proto.Size(resp); len(list) > 1 && n > int(h.m.cfg.MaxListResponseBytes) {
				t.Errorf("%v page of %d tasks is %d bytes, over the cap", view, len(list), n)
			}
			sizes = append(sizes, len(list))
			got = append(got, ids(list)...)
			if q.PageToken = next; next == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v pages list %v, want %v", view, got, want)
		}
		return sizes
	}
	if got := pages(ViewFull); !slices.Equal(got, []int{2, 2, 2, 1}) {
		t.Errorf("full pages hold %v tasks, want [2 2 2 1] (10 KiB specs, 25 KiB cap)", got)
	}
	if got := pages(ViewBasic); !slices.Equal(got, []int{7}) {
		t.Errorf("basic pages hold %v tasks, want [7]", got)
	}
	// One task over the cap still makes a page of one.
	h.m.cfg.MaxListResponseBytes = 1
	if got := pages(ViewFull); !slices.Equal(got, []int{1, 1, 1, 1, 1, 1, 1}) {
		t.Errorf("pages under a 1-byte cap hold %v tasks, want one each", got)
	}
}

// TestBasicListDoesNotDecodeSpecs: a basic listing of tasks with large specs
// allocates far less than the specs, because it skips them undecoded.
func TestBasicListDoesNotDecodeSpecs(t *testing.T) {
	const n, specBytes = 20, 256 << 10
	h := newHarness(t, func(c *Config) { c.MaxListResponseBytes = 64 << 20 })
	for range n {
		h.start(t, bigAgentParams("acme", specBytes))
	}
	alloc := func(view View) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		list, _, err := h.m.List(ctx, "acme", ListQuery{View: view, PageSize: 500})
		runtime.ReadMemStats(&after)
		if err != nil || len(list) != n {
			t.Fatalf("List = %d tasks, %v", len(list), err)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	full, basic := alloc(ViewFull), alloc(ViewBasic)
	t.Logf("listing %d tasks with %d KiB specs allocates %d KiB (full), %d KiB (basic)", n, specBytes>>10, full>>10, basic>>10)
	if basic > n*specBytes/10 {
		t.Errorf("a basic listing allocates %d bytes for %d tasks with %d-byte specs: it decodes the specs", basic, n, specBytes)
	}
}
