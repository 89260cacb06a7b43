package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
)

// limitsRun is a multi-tenant server whose principals may each hold two calls, two
// watches and two awaits.
type limitsRun struct {
	t  *testing.T
	mt *multiTenant
}

const perPrincipal = 2

func startLimited(t *testing.T) *limitsRun {
	mt := startMultiTenant(t, []string{"acme", "globex"}, func(c *config.Config) {
		c.Limits.MaxCallsPerPrincipal = perPrincipal
		c.Limits.MaxWatchesPerPrincipal = perPrincipal
		c.Limits.MaxAwaitsPerPrincipal = perPrincipal
	})
	return &limitsRun{t: t, mt: mt}
}

func (r *limitsRun) actor(tenant string, role auth.Role) *actor { return r.mt.by[tenant][role] }

// inUse reads agentplane_principal_slots_in_use{kind} from /metrics.
func (r *limitsRun) inUse(kind string) int {
	r.t.Helper()
	return r.metric("agentplane_principal_slots_in_use", kind)
}

// metric reads name{kind} from /metrics (as the admin; a scrape is no gRPC call, so it
// holds no slot).
func (r *limitsRun) metric(name, kind string) int {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.mt.in.HTTPAddr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+r.mt.admin.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	prefix := name + `{kind="` + kind + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				r.t.Fatalf("%s%s: %v", prefix, v, err)
			}
			return n
		}
	}
	r.t.Fatalf("/metrics has no %s", prefix)
	return 0
}

// settle waits until the server holds exactly n slots of kind: the server takes and
// frees a slot a moment after the client opens or ends the call.
func (r *limitsRun) settle(kind string, n int) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for got := r.inUse(kind); got != n; got = r.inUse(kind) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d %s slots in use, want %d", got, kind, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantLimited checks err is the per-principal refusal of kind.
func wantLimited(t *testing.T, what string, err error, kind string) {
	t.Helper()
	info := reasons.Info(err)
	if status.Code(err) != codes.ResourceExhausted || reasons.Parse(info.GetReason()) != apierr.ReasonConcurrencyLimit ||
		info.GetMetadata()["kind"] != kind || info.GetMetadata()["limit"] != strconv.Itoa(perPrincipal) {
		t.Fatalf("%s: want RESOURCE_EXHAUSTED %s kind=%s limit=%d, got %v (%v)", what, apierr.ReasonConcurrencyLimit, kind, perPrincipal, err, info)
	}
	if delay, retry := reasons.RetryAfter(err); !retry || delay <= 0 || !worker.IsTransient(err) {
		t.Fatalf("%s: a concurrency refusal must say it is retryable (RetryInfo %v %v, IsTransient %v)", what, delay, retry, worker.IsTransient(err))
	}
}

func (r *limitsRun) startTask(a *actor) string {
	r.t.Helper()
	resp, err := a.c.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hi"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		r.t.Fatalf("StartTask by %v: %v", a, err)
	}
	return resp.GetTask().GetTaskId()
}

// watch opens a watch by c on task and reads its first event, so the server holds
// the slot when it returns. cancel ends it.
func (r *limitsRun) watch(c *client.Client, task string) (cancel context.CancelFunc, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: task})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return cancel, nil
}

func (r *limitsRun) mustWatch(c *client.Client, task string) context.CancelFunc {
	r.t.Helper()
	cancel, err := r.watch(c, task)
	if err != nil {
		r.t.Fatalf("WatchTask: %v", err)
	}
	return cancel
}

// The N+1th watch of one principal is refused while another principal (of the same
// tenant or another) still watches, and the slot comes back when a watch is canceled
// or its client disconnects.
func TestPrincipalLimitWatches(t *testing.T) {
	r := startLimited(t)
	user, approver, other := r.actor("acme", auth.RoleUser), r.actor("acme", auth.RoleApprover), r.actor("globex", auth.RoleUser)
	task, otherTask := r.startTask(user), r.startTask(other)

	first := r.mustWatch(user.c, task)
	defer first()
	second := r.mustWatch(user.c, task)
	defer second()
	_, err := r.watch(user.c, task)
	wantLimited(t, "third watch of one principal", err, "watch")
	if n := r.metric("agentplane_principal_limit_refusals_total", "watch"); n != 1 {
		t.Fatalf("agentplane_principal_limit_refusals_total{kind=\"watch\"} = %d, want 1", n)
	}

	r.mustWatch(approver.c, task)()   // same tenant, another principal
	r.mustWatch(other.c, otherTask)() // another tenant
	r.settle("watch", perPrincipal)

	first()
	r.settle("watch", perPrincipal-1)
	r.mustWatch(user.c, task)()
	r.settle("watch", perPrincipal-1)

	// A client that goes away without canceling frees its slot too.
	conn, err := client.Dial(context.Background(), r.mt.in.GRPCAddr, client.WithToken(user.token))
	if err != nil {
		t.Fatal(err)
	}
	r.mustWatch(conn, task)
	r.settle("watch", perPrincipal)
	_, err = r.watch(user.c, task)
	wantLimited(t, "watch while the second connection's is open", err, "watch")
	_ = conn.Close()
	r.settle("watch", perPrincipal-1)
	r.mustWatch(user.c, task)()
}

// The HTTP/JSON gateway reaches the same limit: watches over HTTP count against the
// principal's gRPC ones and the other way round, and an HTTP client that hangs up
// frees its slot.
func TestPrincipalLimitWatchesOverHTTP(t *testing.T) {
	r := startLimited(t)
	user := r.actor("acme", auth.RoleUser)
	task := r.startTask(user)

	httpWatch := func() (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+r.mt.in.HTTPAddr+"/v1/tasks/"+task+":watch", nil)
		req.Header.Set("Authorization", "Bearer "+user.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return resp, line
	}

	first, line := httpWatch()
	defer first.Body.Close()
	if first.StatusCode != http.StatusOK || !strings.Contains(line, `"event"`) {
		t.Fatalf("HTTP watch: %d %s", first.StatusCode, line)
	}
	grpcCancel := r.mustWatch(user.c, task)
	defer grpcCancel()
	r.settle("watch", perPrincipal)

	_, err := r.watch(user.c, task)
	wantLimited(t, "gRPC watch with one HTTP and one gRPC watch open", err, "watch")
	refused, line := httpWatch()
	refused.Body.Close()
	if refused.StatusCode != http.StatusTooManyRequests || !strings.Contains(line, `"reason":"`+reasons.Wire(apierr.ReasonConcurrencyLimit)+`"`) {
		t.Fatalf("third watch over HTTP: %d %s, want the %s refusal", refused.StatusCode, line, apierr.ReasonConcurrencyLimit)
	}

	first.Body.Close() // the HTTP client hangs up
	r.settle("watch", perPrincipal-1)
	r.mustWatch(user.c, task)()
}

// pendingInterrupt starts a task in tenant, leases it as the tenant's runtime and asks
// about the gated tool, leaving an interrupt pending.
func (r *limitsRun) pendingInterrupt(tenant string) (*agentplanev1.LeaseRef, string) {
	r.t.Helper()
	rt := r.actor(tenant, auth.RoleRuntime)
	task := r.startTask(r.actor(tenant, auth.RoleUser))
	leases, err := rt.c.Runtime.LeaseTasks(context.Background(), &agentplanev1.LeaseTasksRequest{
		RuntimeId: rt.name, MaxTasks: 1, Wait: durationpb.New(10 * time.Second),
	})
	if err != nil || len(leases.GetLeases()) != 1 || leases.GetLeases()[0].GetTask().GetTaskId() != task {
		r.t.Fatalf("LeaseTasks: %v %v", leases, err)
	}
	l := leases.GetLeases()[0]
	ref := &agentplanev1.LeaseRef{TaskId: task, LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
	check, err := rt.c.Runtime.CheckToolCall(context.Background(), &agentplanev1.CheckToolCallRequest{
		Lease: ref, CallId: "call-1", ToolName: gatedTool, AgentName: "teller",
		ArgumentsJson: `{"n":1}`,
	})
	if err != nil || check.GetInterrupt().GetInterruptId() == "" {
		r.t.Fatalf("CheckToolCall: %v %v", check, err)
	}
	return ref, check.GetInterrupt().GetInterruptId()
}

func (r *limitsRun) await(c *client.Client, ref *agentplanev1.LeaseRef, id string) (grpc.ServerStreamingClient[agentplanev1.AwaitDecisionResponse], context.CancelFunc) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: id})
	if err != nil {
		r.t.Fatal(err)
	}
	return stream, cancel
}

// The N+1th await of one runtime principal is refused while another runtime awaits,
// and a canceled await frees its slot.
func TestPrincipalLimitAwaits(t *testing.T) {
	r := startLimited(t)
	rt, otherRT := r.actor("acme", auth.RoleRuntime), r.actor("globex", auth.RoleRuntime)
	ref, id := r.pendingInterrupt("acme")
	otherRef, otherID := r.pendingInterrupt("globex")

	_, first := r.await(rt.c, ref, id)
	defer first()
	_, second := r.await(rt.c, ref, id)
	defer second()
	r.settle("await", perPrincipal)
	third, cancel := r.await(rt.c, ref, id)
	_, err := third.Recv()
	cancel()
	wantLimited(t, "third await of one principal", err, "await")

	_, otherCancel := r.await(otherRT.c, otherRef, otherID)
	r.settle("await", perPrincipal+1)
	otherCancel()
	r.settle("await", perPrincipal)

	first()
	r.settle("await", perPrincipal-1)
	again, cancelAgain := r.await(rt.c, ref, id)
	defer cancelAgain()
	r.settle("await", perPrincipal)

	// A decision ends the awaits, which frees their slots.
	if _, err := r.actor("acme", auth.RoleApprover).c.Hitl.ResolveInterrupt(context.Background(), &agentplanev1.ResolveInterruptRequest{
		InterruptId: id, Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
	}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := again.Recv()
		if err != nil {
			t.Fatalf("await after the decision: %v", err)
		}
		if resp.GetDecision() != nil {
			break
		}
	}
	r.settle("await", 0)
}

// The N+1th call in flight of one principal (here LeaseTasks long polls) is refused
// while another principal's calls go through, and an ended call frees its slot.
func TestPrincipalLimitCalls(t *testing.T) {
	r := startLimited(t)
	rt, otherRT := r.actor("acme", auth.RoleRuntime), r.actor("globex", auth.RoleRuntime)
	poll := func(a *actor, wait time.Duration) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := a.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: a.name, MaxTasks: 1, Wait: durationpb.New(wait)})
			done <- err
		}()
		return cancel, done
	}
	cancel1, done1 := poll(rt, time.Minute)
	cancel2, done2 := poll(rt, time.Minute)
	defer cancel2()
	r.settle("call", perPrincipal)

	_, err := rt.c.Runtime.LeaseTasks(context.Background(), &agentplanev1.LeaseTasksRequest{RuntimeId: rt.name, MaxTasks: 1})
	wantLimited(t, "third call of one principal", err, "call")
	if _, err := otherRT.c.Runtime.LeaseTasks(context.Background(), &agentplanev1.LeaseTasksRequest{RuntimeId: otherRT.name, MaxTasks: 1}); err != nil {
		t.Fatalf("another principal's call: %v", err)
	}

	cancel1()
	if err := <-done1; status.Code(err) != codes.Canceled {
		t.Fatalf("canceled long poll: %v", err)
	}
	r.settle("call", perPrincipal-1)
	if _, err := rt.c.Runtime.LeaseTasks(context.Background(), &agentplanev1.LeaseTasksRequest{RuntimeId: rt.name, MaxTasks: 1}); err != nil {
		t.Fatalf("call after a slot was freed: %v", err)
	}
	cancel2()
	<-done2
	r.settle("call", 0)
}

// TestCapabilitiesAdvertisePerPrincipalLimits: in multi-tenant mode GetCapabilities
// says how many calls, watches and awaits the caller may hold.
func TestCapabilitiesAdvertisePerPrincipalLimits(t *testing.T) {
	r := startLimited(t)
	resp, err := r.actor("acme", auth.RoleUser).c.Capabilities.GetCapabilities(context.Background(), &agentplanev1.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	lim := resp.GetCapabilities().GetLimits()
	if lim.GetMaxCallsPerPrincipal() != perPrincipal || lim.GetMaxWatchesPerPrincipal() != perPrincipal || lim.GetMaxAwaitsPerPrincipal() != perPrincipal {
		t.Fatalf("limits %v, want %d of each per principal", lim, perPrincipal)
	}
}
