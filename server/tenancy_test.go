package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/tasks"
)

// The tests in this file prove tenant isolation through the real server: every call
// goes over gRPC (or HTTP/JSON) with a bearer token, through the same interceptors,
// service layer and store a deployment runs.

// rpcRoles is the access the tests expect per RPC: the roles of which a caller must
// hold one. It is written down here, not read from server/auth, so that a change to
// the method table that nobody meant shows up as a failing test (and so that a
// method the server registers without an expectation here fails too).
var rpcRoles = func() map[string][]auth.Role {
	anyRole := []auth.Role{auth.RoleUser, auth.RoleApprover, auth.RoleRuntime, auth.RoleAdmin}
	reader := []auth.Role{auth.RoleUser, auth.RoleApprover}
	m := map[string][]auth.Role{}
	set := func(roles []auth.Role, methods ...string) {
		for _, name := range methods {
			m[name] = roles
		}
	}
	set(anyRole,
		agentplanev1.SpecService_ValidateSpec_FullMethodName,
		agentplanev1.SpecService_ListRules_FullMethodName,
		agentplanev1.SpecService_GetRule_FullMethodName,
		agentplanev1.SpecService_GetSpecSchema_FullMethodName,
		agentplanev1.CapabilityService_GetCapabilities_FullMethodName)
	set([]auth.Role{auth.RoleUser},
		agentplanev1.TaskService_StartTask_FullMethodName,
		agentplanev1.TaskService_ContinueTask_FullMethodName,
		agentplanev1.TaskService_CancelTask_FullMethodName)
	set(reader,
		agentplanev1.TaskService_GetTask_FullMethodName,
		agentplanev1.TaskService_ListTasks_FullMethodName,
		agentplanev1.TaskService_WatchTask_FullMethodName,
		agentplanev1.TaskService_ListVerdicts_FullMethodName,
		agentplanev1.TaskService_ListObligations_FullMethodName,
		agentplanev1.TaskService_ListTaskEvents_FullMethodName,
		agentplanev1.HitlService_ListInterrupts_FullMethodName,
		agentplanev1.HitlService_GetInterrupt_FullMethodName,
		agentplanev1.HitlService_ListAuditRecords_FullMethodName)
	set([]auth.Role{auth.RoleApprover}, agentplanev1.HitlService_ResolveInterrupt_FullMethodName,
		agentplanev1.HitlService_RevokeApprovalLink_FullMethodName)
	set([]auth.Role{auth.RoleUser},
		agentplanev1.ScheduleService_CreateSchedule_FullMethodName,
		agentplanev1.ScheduleService_UpdateSchedule_FullMethodName,
		agentplanev1.ScheduleService_PauseSchedule_FullMethodName,
		agentplanev1.ScheduleService_ResumeSchedule_FullMethodName,
		agentplanev1.ScheduleService_TriggerSchedule_FullMethodName,
		agentplanev1.ScheduleService_DeleteSchedule_FullMethodName)
	set(reader,
		agentplanev1.ScheduleService_GetSchedule_FullMethodName,
		agentplanev1.ScheduleService_ListSchedules_FullMethodName)
	set([]auth.Role{auth.RoleRuntime},
		agentplanev1.RuntimeService_LeaseTasks_FullMethodName,
		agentplanev1.RuntimeService_Heartbeat_FullMethodName,
		agentplanev1.RuntimeService_ReportEvents_FullMethodName,
		agentplanev1.RuntimeService_CheckToolCall_FullMethodName,
		agentplanev1.RuntimeService_CheckModelCall_FullMethodName,
		agentplanev1.RuntimeService_AwaitDecision_FullMethodName,
		agentplanev1.RuntimeService_SuspendTask_FullMethodName,
		agentplanev1.RuntimeService_RecordVerdict_FullMethodName,
		agentplanev1.RuntimeService_PauseTask_FullMethodName,
		agentplanev1.RuntimeService_CompleteTask_FullMethodName,
		agentplanev1.RuntimeService_FailTask_FullMethodName,
		agentplanev1.RuntimeService_ReadTaskHistory_FullMethodName,
		agentplanev1.RuntimeService_PublishDeltas_FullMethodName)
	set([]auth.Role{auth.RoleAdmin},
		agentplanev1.AdminService_Backup_FullMethodName,
		agentplanev1.AdminService_PurgeTasks_FullMethodName,
		agentplanev1.AdminService_GetStats_FullMethodName,
		agentplanev1.AdminService_ListWebhookDeadLetters_FullMethodName,
		agentplanev1.AdminService_RetryWebhookDeadLetter_FullMethodName,
		reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName,
		reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName)
	return m
}()

// publicRPCs need no credentials: health probes.
var publicRPCs = []string{
	grpc_health_v1.Health_Check_FullMethodName,
	grpc_health_v1.Health_Watch_FullMethodName,
	grpc_health_v1.Health_List_FullMethodName,
}

// actor is one configured principal with a client that authenticates as it.
type actor struct {
	name, tenant string
	roles        []auth.Role
	token        string
	c            *client.Client
}

func (a *actor) String() string { return fmt.Sprintf("%s(%s %v)", a.name, a.tenant, a.roles) }

// may reports whether a's roles allow method, per rpcRoles.
func (a *actor) may(method string) bool {
	for _, r := range rpcRoles[method] {
		if slices.Contains(a.roles, r) {
			return true
		}
	}
	return false
}

// multiTenant is a running multi-tenant server with one user, approver and runtime
// per tenant and one deployment-wide admin.
type multiTenant struct {
	in      *servertest.Instance
	tenants []string
	actors  []*actor
	by      map[string]map[auth.Role]*actor // tenant -> role -> actor
	admin   *actor
}

// tenantRoles are the per-tenant principals, one role each.
var tenantRoles = []auth.Role{auth.RoleUser, auth.RoleApprover, auth.RoleRuntime}

// startMultiTenant starts a multi-tenant server for tenants (mutate may adjust the
// config further) and dials a client per principal.
func startMultiTenant(t testing.TB, tenants []string, mutate func(*config.Config)) *multiTenant {
	t.Helper()
	mt := &multiTenant{tenants: tenants, by: map[string]map[auth.Role]*actor{}}
	var tokens []config.Token
	add := func(name, tenant string, role auth.Role) *actor {
		tok, hash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, config.Token{Name: name, SHA256: hash, Tenant: tenant, Roles: []string{string(role)}})
		a := &actor{name: name, tenant: tenant, roles: []auth.Role{role}, token: tok}
		mt.actors = append(mt.actors, a)
		return a
	}
	for _, tenant := range tenants {
		mt.by[tenant] = map[auth.Role]*actor{}
		for _, role := range tenantRoles {
			mt.by[tenant][role] = add(tenant+"-"+string(role), tenant, role)
		}
	}
	mt.admin = add("operator", auth.AllTenants, auth.RoleAdmin)
	mt.in = servertest.Start(t, func(c *config.Config) {
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = tokens
		if mutate != nil {
			mutate(c)
		}
	})
	for _, a := range mt.actors {
		c, err := client.Dial(context.Background(), mt.in.GRPCAddr, client.WithToken(a.token))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		a.c = c
	}
	return mt
}

// The agent every tenancy task runs: one tool the interrupt policy gates, one it does not.
const (
	gatedTool = "transfer_funds"
	freeTool  = "lookup_account"
)

func tenancyAgent() *agentplanev1.AgentSpec {
	params, err := structpb.NewStruct(map[string]any{
		"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}},
		"required": []any{"n"}, "additionalProperties": false,
	})
	if err != nil {
		panic(err)
	}
	tool := func(name string) *agentplanev1.FunctionTool {
		return &agentplanev1.FunctionTool{Type: "function", Function: &agentplanev1.FunctionDef{
			Name: name, Description: proto.String("a test tool"), Parameters: params,
		}}
	}
	return &agentplanev1.AgentSpec{
		ApiVersion:   "qar/v1",
		Kind:         "AgentSpec",
		Name:         proto.String("teller"),
		Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Ask before moving money."}},
		Model:        "test-model",
		Tools:        []*agentplanev1.FunctionTool{tool(gatedTool), tool(freeTool)},
	}
}

func gatedPolicy() *agentplanev1.InterruptPolicy {
	return &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{
		Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{gatedTool}},
	}}
}

func reasonOf(err error) apierr.Reason { return reasons.Of(err) }

// sameFailure describes how got differs from want (both status errors), "" when they
// carry the same code, ErrorInfo reason and metadata, and the same message once each
// names its own id as "<id>".
func sameFailure(got error, gotID string, want error, wantID string) string {
	gs, ws := status.Convert(got), status.Convert(want)
	gm := strings.ReplaceAll(gs.Message(), gotID, "<id>")
	wm := strings.ReplaceAll(ws.Message(), wantID, "<id>")
	gi, wi := reasons.Info(got), reasons.Info(want)
	switch {
	case gs.Code() != ws.Code():
		return fmt.Sprintf("code %v, an absent id gets %v", gs.Code(), ws.Code())
	case gi.GetReason() != wi.GetReason() || gi.GetDomain() != wi.GetDomain():
		return fmt.Sprintf("reason %q, an absent id gets %q", gi.GetReason(), wi.GetReason())
	case !maps.Equal(gi.GetMetadata(), wi.GetMetadata()):
		return fmt.Sprintf("metadata %v, an absent id gets %v", gi.GetMetadata(), wi.GetMetadata())
	case gm != wm:
		return fmt.Sprintf("message %q, an absent id gets %q", gm, wm)
	case len(gs.Details()) != len(ws.Details()):
		return fmt.Sprintf("%d details, an absent id gets %d", len(gs.Details()), len(ws.Details()))
	}
	return ""
}

// idAlphabet is the lower-case base32 alphabet of task and interrupt ids.
const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// whose says whose resource an operation targets.
type whose int

const (
	own whose = iota
	foreign
	absent
)

func (w whose) String() string { return [...]string{"own", "foreign", "absent"}[w] }

// heldLease is a lease a runtime was granted during the run.
type heldLease struct {
	tenant string
	ref    *agentplanev1.LeaseRef
}

// tenancyRun is one randomized run: the server, the random source, and the model of
// which tenant owns what, against which every answer is checked.
type tenancyRun struct {
	t   *testing.T
	ctx context.Context
	rng *rand.Rand
	mt  *multiTenant

	taskOwner      map[string]string            // task id -> tenant
	tasksOf        map[string][]string          // tenant -> task ids
	interruptOwner map[string]string            // interrupt id -> tenant
	interruptsOf   map[string][]string          // tenant -> interrupt ids
	requests       map[string]map[string]string // tenant -> request id -> task id
	leases         []heldLease
	calls          int

	// tally counts checked outcomes by "method/whose/code", logged at the end and
	// used to prove the run exercised what it claims.
	tally map[string]int
}

// tenancySeed is the run's seed: AGENTPLANE_TENANCY_SEED to replay one, else the clock.
func tenancySeed(t *testing.T) uint64 {
	if s := os.Getenv("AGENTPLANE_TENANCY_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("AGENTPLANE_TENANCY_SEED: %v", err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// TestTenancyRandomizedIsolation performs a seeded random sequence of mixed operations,
// each by a random principal on a random own, foreign or absent resource, and checks
// every answer against a model of who owns what:
//
//   - a role lacking the method is PERMISSION_DENIED whatever the id (before existence);
//   - a foreign task or interrupt is NOT_FOUND exactly like an absent id (code, reason,
//     metadata, message up to the id), and the message does not name the owner;
//   - lists hold exactly the caller's tenant's resources, and a page token does not
//     cross tenants;
//   - a runtime leases only its tenant's tasks, and a foreign lease is LEASE_LOST and
//     changes nothing in the foreign task;
//   - at the end, the admin's stats equal the sum of what each tenant sees.
//
// Replay a failure with AGENTPLANE_TENANCY_SEED=<the logged seed>.
func TestTenancyRandomizedIsolation(t *testing.T) {
	const (
		ops    = 1000
		budget = 90 * time.Second
	)
	seed := tenancySeed(t)
	t.Logf("seed %d (replay with AGENTPLANE_TENANCY_SEED=%d)", seed, seed)
	// "acme" is a prefix of "acme-eu": tenant keys must be delimited, not merely prefixed.
	mt := startMultiTenant(t, []string{"acme", "acme-eu", "globex"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), budget+30*time.Second)
	defer cancel()
	r := &tenancyRun{
		t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), mt: mt,
		taskOwner: map[string]string{}, tasksOf: map[string][]string{},
		interruptOwner: map[string]string{}, interruptsOf: map[string][]string{},
		requests: map[string]map[string]string{}, tally: map[string]int{},
	}
	// Every tenant starts with a leased task holding a pending interrupt, so that
	// foreign targets exist from the first operation.
	for _, tenant := range mt.tenants {
		r.startTask(mt.by[tenant][auth.RoleUser])
		r.leaseTasks(mt.by[tenant][auth.RoleRuntime])
		r.checkTool(mt.by[tenant][auth.RoleRuntime], own, gatedTool)
		if len(r.tasksOf[tenant]) != 1 || len(r.interruptsOf[tenant]) != 1 {
			t.Fatalf("setup of %s: %d tasks, %d interrupts; want one of each", tenant, len(r.tasksOf[tenant]), len(r.interruptsOf[tenant]))
		}
	}

	type op struct {
		method string
		weight int
		run    func(a *actor)
	}
	targeted := func(f func(*actor, whose)) func(*actor) {
		return func(a *actor) { f(a, whose(r.rng.IntN(3))) }
	}
	table := []op{
		{agentplanev1.TaskService_StartTask_FullMethodName, 12, r.startTask},
		{agentplanev1.TaskService_GetTask_FullMethodName, 8, targeted(r.getTask)},
		{agentplanev1.TaskService_ListTasks_FullMethodName, 5, r.listTasks},
		{agentplanev1.TaskService_CancelTask_FullMethodName, 4, targeted(r.cancelTask)},
		{agentplanev1.TaskService_ContinueTask_FullMethodName, 4, targeted(r.continueTask)},
		{agentplanev1.TaskService_WatchTask_FullMethodName, 4, targeted(r.watchTask)},
		{agentplanev1.TaskService_ListVerdicts_FullMethodName, 3, targeted(r.listVerdicts)},
		{agentplanev1.TaskService_ListObligations_FullMethodName, 3, targeted(r.listObligations)},
		{agentplanev1.TaskService_ListTaskEvents_FullMethodName, 3, targeted(r.listTaskEvents)},
		{agentplanev1.RuntimeService_LeaseTasks_FullMethodName, 10, r.leaseTasks},
		{agentplanev1.RuntimeService_ReportEvents_FullMethodName, 6, targeted(r.reportEvents)},
		{agentplanev1.RuntimeService_CheckToolCall_FullMethodName, 10, targeted(r.checkToolCall)},
		{agentplanev1.RuntimeService_PauseTask_FullMethodName, 3, targeted(r.pauseTask)},
		{agentplanev1.RuntimeService_CompleteTask_FullMethodName, 4, targeted(r.completeTask)},
		{agentplanev1.RuntimeService_Heartbeat_FullMethodName, 3, targeted(r.heartbeat)},
		{agentplanev1.RuntimeService_SuspendTask_FullMethodName, 3, targeted(r.suspendTask)},
		{agentplanev1.RuntimeService_FailTask_FullMethodName, 2, targeted(r.failTask)},
		{agentplanev1.RuntimeService_ReadTaskHistory_FullMethodName, 3, targeted(r.readTaskHistory)},
		{agentplanev1.RuntimeService_PublishDeltas_FullMethodName, 2, targeted(r.publishDeltas)},
		{agentplanev1.RuntimeService_RecordVerdict_FullMethodName, 2, targeted(r.recordVerdict)},
		{agentplanev1.RuntimeService_AwaitDecision_FullMethodName, 3, targeted(r.awaitDecision)},
		{agentplanev1.HitlService_ListInterrupts_FullMethodName, 5, targeted(r.listInterrupts)},
		{agentplanev1.HitlService_GetInterrupt_FullMethodName, 6, targeted(r.getInterrupt)},
		{agentplanev1.HitlService_ResolveInterrupt_FullMethodName, 8, targeted(r.resolveInterrupt)},
	}
	total := 0
	for _, o := range table {
		total += o.weight
	}
	start := time.Now()
	done := 0
	for ; done < ops && time.Since(start) < budget && !t.Failed(); done++ {
		n := r.rng.IntN(total)
		var o op
		for _, o = range table {
			if n < o.weight {
				break
			}
			n -= o.weight
		}
		// Mostly a principal allowed the method, often enough one that is not.
		a := mt.actors[r.rng.IntN(len(mt.actors))]
		if r.rng.IntN(4) != 0 {
			var allowed []*actor
			for _, b := range mt.actors {
				if b.may(o.method) {
					allowed = append(allowed, b)
				}
			}
			a = allowed[r.rng.IntN(len(allowed))]
		}
		o.run(a)
	}
	t.Logf("%d operations (%d calls) in %s", done, r.calls, time.Since(start).Round(time.Millisecond))
	r.checkTotals()
	r.logTally()
	// The run must have exercised what it claims, or it proves nothing.
	for _, want := range []string{
		"GetTask/foreign/NotFound", "GetInterrupt/foreign/NotFound", "ResolveInterrupt/foreign/NotFound",
		"ResolveInterrupt/foreign/PermissionDenied", "CheckToolCall/foreign/FailedPrecondition",
		"LeaseTasks/own/OK", "CheckToolCall/own/OK", "ListTasks/own/OK",
	} {
		if r.tally[want] == 0 && done == ops {
			t.Errorf("the run never checked %s; raise the operation count or the weights", want)
		}
	}
}

// note counts one checked outcome.
func (r *tenancyRun) note(method string, w whose, err error) {
	short := method[strings.LastIndex(method, "/")+1:]
	r.tally[short+"/"+w.String()+"/"+status.Code(err).String()]++
}

func (r *tenancyRun) logTally() {
	keys := make([]string, 0, len(r.tally))
	for k := range r.tally {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-48s %d", k, r.tally[k])
	}
	r.t.Logf("outcomes:%s", b.String())
}

// call gives one RPC a bounded context.
func (r *tenancyRun) call() (context.Context, context.CancelFunc) {
	r.calls++
	return context.WithTimeout(r.ctx, 10*time.Second)
}

// otherTenant picks a tenant other than not (any tenant for the admin).
func (r *tenancyRun) otherTenant(not string) string {
	var others []string
	for _, tenant := range r.mt.tenants {
		if tenant != not {
			others = append(others, tenant)
		}
	}
	return others[r.rng.IntN(len(others))]
}

// absentLike returns an id shaped like id (same length and alphabet) that no tenant has.
func (r *tenancyRun) absentLike(id string) string {
	for {
		b := []byte(id)
		for i := max(0, len(b)-8); i < len(b); i++ {
			b[i] = idAlphabet[r.rng.IntN(len(idAlphabet))]
		}
		cand := string(b)
		if _, ok := r.taskOwner[cand]; ok {
			continue
		}
		if _, ok := r.interruptOwner[cand]; ok {
			continue
		}
		return cand
	}
}

// pick chooses an id of kind w for caller from ids (by tenant), falling back to an
// absent one when there is none of that kind. It returns the id, its kind and owner.
func (r *tenancyRun) pick(caller *actor, w whose, of map[string][]string) (string, whose, string) {
	owner := caller.tenant
	if w == foreign || caller.tenant == auth.AllTenants {
		owner = r.otherTenant(caller.tenant)
		if w == own {
			w = foreign
		}
	}
	if ids := of[owner]; w != absent && len(ids) > 0 {
		return ids[r.rng.IntN(len(ids))], w, owner
	}
	// Any known id gives the shape of an absent one.
	for _, tenant := range r.mt.tenants {
		if ids := of[tenant]; len(ids) > 0 {
			return r.absentLike(ids[0]), absent, ""
		}
	}
	r.t.Fatal("no id of any tenant to shape an absent id after")
	return "", absent, ""
}

// checkScoped checks the answer err of caller's call of method on id (kind w, owned
// by owner). probe repeats the call on another id. It reports whether the call
// succeeded on an own resource (the caller then checks the result).
func (r *tenancyRun) checkScoped(method string, caller *actor, id string, w whose, owner string, err error, probe func(id string) error) bool {
	r.t.Helper()
	r.note(method, w, err)
	switch {
	case !caller.may(method):
		// Permission before existence: the same refusal for own, foreign and absent ids.
		if status.Code(err) != codes.PermissionDenied || reasonOf(err) != apierr.ReasonPermissionDenied {
			r.t.Errorf("%s by %v on a %s id: want PERMISSION_DENIED (%s) before any lookup, got %v",
				method, caller, w, apierr.ReasonPermissionDenied, err)
		}
		return false
	case w == own:
		if status.Code(err) == codes.NotFound || status.Code(err) == codes.PermissionDenied {
			r.t.Errorf("%s by %v on its own %s: %v", method, caller, id, err)
		}
		return err == nil
	}
	if status.Code(err) != codes.NotFound {
		r.t.Errorf("%s by %v on a %s id %s (owner %q): want NOT_FOUND, got %v", method, caller, w, id, owner, err)
		return false
	}
	probeID := r.absentLike(id)
	if diff := sameFailure(err, id, probe(probeID), probeID); diff != "" {
		r.t.Errorf("%s by %v on a %s id differs from an absent id: %s", method, caller, w, diff)
	}
	r.checkNoLeak(method, caller, owner, err, id)
	return false
}

// checkNoLeak fails when an error answered to caller names owner, another tenant.
func (r *tenancyRun) checkNoLeak(method string, caller *actor, owner string, err error, ids ...string) {
	r.t.Helper()
	if owner == "" || owner == caller.tenant || strings.Contains(caller.tenant, owner) {
		return
	}
	msg := status.Convert(err).Message()
	for _, id := range ids {
		msg = strings.ReplaceAll(msg, id, "<id>")
	}
	if strings.Contains(msg, owner) {
		r.t.Errorf("%s by %v: the error names tenant %q: %q", method, caller, owner, msg)
	}
	for k, v := range reasons.Info(err).GetMetadata() {
		if strings.Contains(k+"="+v, owner) {
			r.t.Errorf("%s by %v: ErrorInfo metadata names tenant %q: %s=%s", method, caller, owner, k, v)
		}
	}
}

func (r *tenancyRun) record(tenant, taskID string) {
	if prev, ok := r.taskOwner[taskID]; ok {
		if prev != tenant {
			r.t.Fatalf("task %s of %s was returned to %s", taskID, prev, tenant)
		}
		return
	}
	r.taskOwner[taskID] = tenant
	r.tasksOf[tenant] = append(r.tasksOf[tenant], taskID)
}

func (r *tenancyRun) recordInterrupt(caller *actor, in *agentplanev1.Interrupt) {
	id := in.GetInterruptId()
	if in.GetTenant() != caller.tenant || r.taskOwner[in.GetTaskId()] != caller.tenant {
		r.t.Errorf("interrupt %s answered to %v belongs to tenant %q, task %s of %q",
			id, caller, in.GetTenant(), in.GetTaskId(), r.taskOwner[in.GetTaskId()])
		return
	}
	if prev, ok := r.interruptOwner[id]; ok {
		if prev != caller.tenant {
			r.t.Errorf("interrupt %s of %s was answered to %v", id, prev, caller)
		}
		return
	}
	r.interruptOwner[id] = caller.tenant
	r.interruptsOf[caller.tenant] = append(r.interruptsOf[caller.tenant], id)
}

// ownerView reads a task as its owner's user sees it, to prove a foreign write changed nothing.
func (r *tenancyRun) ownerView(tenant, taskID string) *agentplanev1.Task {
	ctx, cancel := r.call()
	defer cancel()
	resp, err := r.mt.by[tenant][auth.RoleUser].c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		r.t.Fatalf("owner %s reading task %s: %v", tenant, taskID, err)
	}
	return resp.GetTask()
}

// --- TaskService ---

func (r *tenancyRun) startTask(a *actor) {
	// Request ids come from a small pool shared by every tenant: a tenant reusing
	// another's id must get its own task, a retry in the same tenant the same task.
	reqID := ""
	if r.rng.IntN(2) == 0 {
		reqID = fmt.Sprintf("req-%d", r.rng.IntN(12))
	}
	ctx, cancel := r.call()
	defer cancel()
	resp, err := a.c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		RequestId:       reqID,
		Source:          &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())},
		Input:           client.UserText("input of " + reqID), // the same request for the same id
		InterruptPolicy: gatedPolicy(),
	})
	r.note(agentplanev1.TaskService_StartTask_FullMethodName, own, err)
	if !a.may(agentplanev1.TaskService_StartTask_FullMethodName) {
		if status.Code(err) != codes.PermissionDenied {
			r.t.Errorf("StartTask by %v: want PERMISSION_DENIED, got %v", a, err)
		}
		return
	}
	if err != nil {
		r.t.Errorf("StartTask by %v: %v", a, err)
		return
	}
	task := resp.GetTask()
	if task.GetTenant() != a.tenant || task.GetCreatedBy() != a.name {
		r.t.Errorf("StartTask by %v made a task of tenant %q by %q", a, task.GetTenant(), task.GetCreatedBy())
	}
	if reqID != "" {
		prev, retried := r.requests[a.tenant][reqID]
		switch {
		case retried && (resp.GetCreated() || task.GetTaskId() != prev):
			r.t.Errorf("StartTask retry of %q by %v: created=%v task %s, want the tenant's task %s",
				reqID, a, resp.GetCreated(), task.GetTaskId(), prev)
		case !retried && !resp.GetCreated():
			r.t.Errorf("StartTask by %v with request id %q, new in its tenant, returned existing task %s (of %q)",
				a, reqID, task.GetTaskId(), r.taskOwner[task.GetTaskId()])
		}
		if r.requests[a.tenant] == nil {
			r.requests[a.tenant] = map[string]string{}
		}
		r.requests[a.tenant][reqID] = task.GetTaskId()
	}
	r.record(a.tenant, task.GetTaskId())
}

func (r *tenancyRun) getTask(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.tasksOf)
	get := func(id string) (*agentplanev1.GetTaskResponse, error) {
		ctx, cancel := r.call()
		defer cancel()
		return a.c.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
	}
	resp, err := get(id)
	if r.checkScoped(agentplanev1.TaskService_GetTask_FullMethodName, a, id, w, owner, err, func(id string) error { _, err := get(id); return err }) {
		if resp.GetTask().GetTaskId() != id || resp.GetTask().GetTenant() != a.tenant {
			r.t.Errorf("GetTask %s by %v returned task %s of %q", id, a, resp.GetTask().GetTaskId(), resp.GetTask().GetTenant())
		}
	}
}

// listAllTasks pages through a's tasks with a random page size.
func (r *tenancyRun) listAllTasks(a *actor) ([]*agentplanev1.Task, string, error) {
	var out []*agentplanev1.Task
	size := int32(1 + r.rng.IntN(40))
	token, firstNext := "", ""
	for page := 0; ; page++ {
		ctx, cancel := r.call()
		resp, err := a.c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: size, PageToken: token})
		cancel()
		if err != nil {
			return out, firstNext, err
		}
		out = append(out, resp.GetTasks()...)
		if page == 0 {
			firstNext = resp.GetNextPageToken()
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out, firstNext, nil
		}
	}
}

func (r *tenancyRun) listTasks(a *actor) {
	const method = agentplanev1.TaskService_ListTasks_FullMethodName
	list, next, err := r.listAllTasks(a)
	r.note(method, own, err)
	if !a.may(method) {
		if status.Code(err) != codes.PermissionDenied {
			r.t.Errorf("ListTasks by %v: want PERMISSION_DENIED, got %v", a, err)
		}
		return
	}
	if err != nil {
		r.t.Errorf("ListTasks by %v: %v", a, err)
		return
	}
	var got []string
	for _, task := range list {
		if task.GetTenant() != a.tenant || r.taskOwner[task.GetTaskId()] != a.tenant {
			r.t.Errorf("ListTasks by %v lists task %s of tenant %q (owner %q)", a, task.GetTaskId(), task.GetTenant(), r.taskOwner[task.GetTaskId()])
		}
		got = append(got, task.GetTaskId())
	}
	want := slices.Clone(r.tasksOf[a.tenant])
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		r.t.Errorf("ListTasks by %v: %d tasks, the tenant has %d\n got %v\nwant %v", a, len(got), len(want), got, want)
	}
	// A page token names a position in one tenant's listing: another tenant's reader
	// presenting it learns nothing.
	if next == "" {
		return
	}
	other := r.mt.by[r.otherTenant(a.tenant)][tenantRoles[r.rng.IntN(2)]] // a user or an approver
	ctx, cancel := r.call()
	defer cancel()
	resp, err := other.c.Tasks.ListTasks(ctx, &agentplanev1.ListTasksRequest{PageSize: 1, PageToken: next})
	r.note(method+"#foreign-token", foreign, err)
	if status.Code(err) != codes.InvalidArgument || reasonOf(err) != apierr.ReasonPageTokenInvalid {
		r.t.Errorf("ListTasks by %v with a page token issued to %v: want INVALID_ARGUMENT %s, got %v (%d tasks)",
			other, a, apierr.ReasonPageTokenInvalid, err, len(resp.GetTasks()))
	}
	for _, task := range resp.GetTasks() {
		if task.GetTenant() != other.tenant {
			r.t.Errorf("a foreign page token showed %v task %s of %q", other, task.GetTaskId(), task.GetTenant())
		}
	}
}

func (r *tenancyRun) cancelTask(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.tasksOf)
	var before *agentplanev1.Task
	if w == foreign {
		before = r.ownerView(owner, id)
	}
	cancelTask := func(id string) error {
		ctx, cancel := r.call()
		defer cancel()
		_, err := a.c.Tasks.CancelTask(ctx, &agentplanev1.CancelTaskRequest{TaskId: id, Reason: "random"})
		return err
	}
	err := cancelTask(id)
	r.checkScoped(agentplanev1.TaskService_CancelTask_FullMethodName, a, id, w, owner, err, cancelTask)
	if before != nil {
		r.checkUnchanged("CancelTask", a, owner, before)
	}
}

// checkUnchanged fails when the foreign task before changed under a foreign call.
func (r *tenancyRun) checkUnchanged(method string, a *actor, owner string, before *agentplanev1.Task) {
	r.t.Helper()
	after := r.ownerView(owner, before.GetTaskId())
	if after.GetLastSequence() != before.GetLastSequence() || after.GetState() != before.GetState() {
		r.t.Errorf("%s by %v changed task %s of %s: %v seq %d -> %v seq %d", method, a, before.GetTaskId(), owner,
			before.GetState(), before.GetLastSequence(), after.GetState(), after.GetLastSequence())
	}
}

func (r *tenancyRun) continueTask(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.tasksOf)
	var before *agentplanev1.Task
	if w == foreign {
		before = r.ownerView(owner, id)
	}
	cont := func(id string) error {
		ctx, cancel := r.call()
		defer cancel()
		_, err := a.c.Tasks.ContinueTask(ctx, &agentplanev1.ContinueTaskRequest{TaskId: id, Input: &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("go on")}})
		return err
	}
	err := cont(id)
	r.checkScoped(agentplanev1.TaskService_ContinueTask_FullMethodName, a, id, w, owner, err, cont)
	if before != nil {
		r.checkUnchanged("ContinueTask", a, owner, before)
	}
}

func (r *tenancyRun) watchTask(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.tasksOf)
	// The first answer of the stream: an event of the task, or its error. A live task's
	// stream does not end, so it is closed after the first event.
	watch := func(id string) (*agentplanev1.TaskEvent, error) {
		ctx, cancel := r.call()
		defer cancel()
		stream, err := a.c.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
		if err != nil {
			return nil, err
		}
		resp, err := stream.Recv()
		return resp.GetEvent(), err
	}
	ev, err := watch(id)
	if r.checkScoped(agentplanev1.TaskService_WatchTask_FullMethodName, a, id, w, owner, err, func(id string) error { _, err := watch(id); return err }) {
		if ev.GetTaskId() != id || ev.GetSequence() != 1 || ev.GetSubmitted() == nil {
			r.t.Errorf("WatchTask %s by %v: first event %v", id, a, ev)
		}
	}
}

func (r *tenancyRun) listVerdicts(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.tasksOf)
	list := func(id string) error {
		ctx, cancel := r.call()
		defer cancel()
		_, err := a.c.Tasks.ListVerdicts(ctx, &agentplanev1.ListVerdictsRequest{TaskId: id})
		return err
	}
	err := list(id)
	r.checkScoped(agentplanev1.TaskService_ListVerdicts_FullMethodName, a, id, w, owner, err, list)
}

func (r *tenancyRun) listObligations(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.tasksOf)
	list := func(id string) error {
		ctx, cancel := r.call()
		defer cancel()
		_, err := a.c.Tasks.ListObligations(ctx, &agentplanev1.ListObligationsRequest{TaskId: id})
		return err
	}
	err := list(id)
	r.checkScoped(agentplanev1.TaskService_ListObligations_FullMethodName, a, id, w, owner, err, list)
}

func (r *tenancyRun) listTaskEvents(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.tasksOf)
	list := func(id string) error {
		ctx, cancel := r.call()
		defer cancel()
		_, err := a.c.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: id})
		return err
	}
	err := list(id)
	r.checkScoped(agentplanev1.TaskService_ListTaskEvents_FullMethodName, a, id, w, owner, err, list)
}

// --- RuntimeService ---

func (r *tenancyRun) leaseTasks(a *actor) {
	const method = agentplanev1.RuntimeService_LeaseTasks_FullMethodName
	ctx, cancel := r.call()
	defer cancel()
	resp, err := a.c.Runtime.LeaseTasks(ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: a.name, MaxTasks: int32(1 + r.rng.IntN(3))})
	r.note(method, own, err)
	if !a.may(method) {
		if status.Code(err) != codes.PermissionDenied {
			r.t.Errorf("LeaseTasks by %v: want PERMISSION_DENIED, got %v", a, err)
		}
		return
	}
	if err != nil {
		r.t.Errorf("LeaseTasks by %v: %v", a, err)
		return
	}
	for _, l := range resp.GetLeases() {
		task := l.GetTask()
		leaseTenant, _ := tasks.LeaseTenant(l.GetLeaseId())
		if task.GetTenant() != a.tenant || r.taskOwner[task.GetTaskId()] != a.tenant || leaseTenant != a.tenant {
			r.t.Errorf("runtime %v leased task %s of tenant %q (owner %q, lease of %q)",
				a, task.GetTaskId(), task.GetTenant(), r.taskOwner[task.GetTaskId()], leaseTenant)
			continue
		}
		r.leases = append(r.leases, heldLease{tenant: a.tenant, ref: &agentplanev1.LeaseRef{
			TaskId: task.GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch(),
		}})
	}
}

// pickLease chooses a lease of kind w for a runtime call by a: one it holds, one a
// runtime of another tenant holds, or a well-formed lease of a's own tenant that was
// never issued. It returns the lease, its kind and its owner.
func (r *tenancyRun) pickLease(a *actor, w whose) (*agentplanev1.LeaseRef, whose, string) {
	var pool []heldLease
	for _, l := range r.leases {
		if (w == own) == (l.tenant == a.tenant) {
			pool = append(pool, l)
		}
	}
	if w != absent && len(pool) > 0 {
		l := pool[r.rng.IntN(len(pool))]
		if l.tenant != a.tenant {
			w = foreign
		}
		return l.ref, w, l.tenant
	}
	return r.forgedLease(a), absent, ""
}

// forgedLease is a lease id routed to a's tenant that was never issued, on a task id
// no tenant has.
func (r *tenancyRun) forgedLease(a *actor) *agentplanev1.LeaseRef {
	taskID, _, _ := r.pick(a, absent, r.tasksOf)
	tenant := a.tenant
	if tenant == auth.AllTenants {
		tenant = r.mt.tenants[0]
	}
	suffix := make([]byte, 26)
	for i := range suffix {
		suffix[i] = idAlphabet[r.rng.IntN(len(idAlphabet))]
	}
	return &agentplanev1.LeaseRef{TaskId: taskID, LeaseId: base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "." + string(suffix), Epoch: 1}
}

// checkLeased checks the answer err of a runtime write by a under ref (kind w of
// owner), whose task before the call was before (nil unless foreign). It reports
// whether the call succeeded under an own lease.
func (r *tenancyRun) checkLeased(method string, a *actor, ref *agentplanev1.LeaseRef, w whose, owner string, before *agentplanev1.Task, err error, ownOK []codes.Code) bool {
	r.t.Helper()
	r.note(method, w, err)
	if before != nil {
		r.checkUnchanged(method, a, owner, before)
	}
	switch {
	case !a.may(method):
		if status.Code(err) != codes.PermissionDenied || reasonOf(err) != apierr.ReasonPermissionDenied {
			r.t.Errorf("%s by %v under a %s lease: want PERMISSION_DENIED, got %v", method, a, w, err)
		}
		return false
	case w == own:
		// An own lease may have been lost since (the task canceled, completed, paused).
		if err != nil && status.Code(err) != codes.FailedPrecondition && !slices.Contains(ownOK, status.Code(err)) {
			r.t.Errorf("%s by %v under its own lease: %v", method, a, err)
		}
		return err == nil
	}
	if status.Code(err) != codes.FailedPrecondition || reasonOf(err) != apierr.ReasonLeaseLost {
		r.t.Errorf("%s by %v under a %s lease of task %s (owner %q): want FAILED_PRECONDITION %s, got %v",
			method, a, w, ref.GetTaskId(), owner, apierr.ReasonLeaseLost, err)
	}
	r.checkNoLeak(method, a, owner, err, ref.GetTaskId(), ref.GetLeaseId())
	return false
}

// leased runs one runtime write: it picks the lease, snapshots a foreign task, calls
// do and checks the answer.
// ownOK are codes other than FAILED_PRECONDITION an own lease may answer.
func (r *tenancyRun) leased(method string, a *actor, w whose, do func(context.Context, *agentplanev1.LeaseRef) error, ownOK ...codes.Code) (*agentplanev1.LeaseRef, bool) {
	ref, w, owner := r.pickLease(a, w)
	var before *agentplanev1.Task
	if w == foreign {
		before = r.ownerView(owner, ref.GetTaskId())
	}
	ctx, cancel := r.call()
	defer cancel()
	err := do(ctx, ref)
	return ref, r.checkLeased(method, a, ref, w, owner, before, err, ownOK)
}

func (r *tenancyRun) reportEvents(a *actor, w whose) {
	r.leased(agentplanev1.RuntimeService_ReportEvents_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		_, err := a.c.Runtime.ReportEvents(ctx, &agentplanev1.ReportEventsRequest{Lease: ref, Events: []*agentplanev1.RuntimeEvent{
			{Payload: &agentplanev1.RuntimeEvent_Note{Note: &agentplanev1.RuntimeNote{Text: "thinking"}}},
		}})
		return err
	})
}

func (r *tenancyRun) readTaskHistory(a *actor, w whose) {
	r.leased(agentplanev1.RuntimeService_ReadTaskHistory_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		_, err := a.c.Runtime.ReadTaskHistory(ctx, &agentplanev1.ReadTaskHistoryRequest{Lease: ref})
		return err
	})
}

func (r *tenancyRun) publishDeltas(a *actor, w whose) {
	r.leased(agentplanev1.RuntimeService_PublishDeltas_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		_, err := a.c.Runtime.PublishDeltas(ctx, &agentplanev1.PublishDeltasRequest{Lease: ref, Deltas: []*agentplanev1.MessageDelta{{MessageId: "m", TextDelta: "x"}}})
		return err
	})
}

func (r *tenancyRun) checkToolCall(a *actor, w whose) {
	tool := freeTool
	if r.rng.IntN(3) != 0 {
		tool = gatedTool
	}
	r.checkTool(a, w, tool)
}

func (r *tenancyRun) checkTool(a *actor, w whose, tool string) {
	var resp *agentplanev1.CheckToolCallResponse
	_, ok := r.leased(agentplanev1.RuntimeService_CheckToolCall_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		var err error
		resp, err = a.c.Runtime.CheckToolCall(ctx, &agentplanev1.CheckToolCallRequest{
			Lease: ref, CallId: fmt.Sprintf("call-%d", r.calls), ToolName: tool, AgentName: "teller",
			ArgumentsJson: `{"n":1}`,
		})
		return err
	})
	if !ok {
		return
	}
	switch want := map[string]agentplanev1.GateOutcome{
		gatedTool: agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT, freeTool: agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW,
	}[tool]; {
	case resp.GetOutcome() != want:
		r.t.Errorf("CheckToolCall %s by %v: outcome %v, want %v", tool, a, resp.GetOutcome(), want)
	case want == agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT:
		r.recordInterrupt(a, resp.GetInterrupt())
	}
}

func (r *tenancyRun) pauseTask(a *actor, w whose) {
	var resp *agentplanev1.PauseTaskResponse
	_, ok := r.leased(agentplanev1.RuntimeService_PauseTask_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		var err error
		resp, err = a.c.Runtime.PauseTask(ctx, &agentplanev1.PauseTaskRequest{Lease: ref, Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "your turn"), Node: "teller"})
		return err
	})
	if ok {
		r.recordInterrupt(a, resp.GetInterrupt())
	}
}

func (r *tenancyRun) completeTask(a *actor, w whose) {
	var resp *agentplanev1.CompleteTaskResponse
	ref, ok := r.leased(agentplanev1.RuntimeService_CompleteTask_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		var err error
		resp, err = a.c.Runtime.CompleteTask(ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "done")}})
		return err
	})
	if ok && (resp.GetTask().GetTaskId() != ref.GetTaskId() || resp.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED) {
		r.t.Errorf("CompleteTask by %v: task %s %v", a, resp.GetTask().GetTaskId(), resp.GetTask().GetState())
	}
}

func (r *tenancyRun) heartbeat(a *actor, w whose) {
	r.leased(agentplanev1.RuntimeService_Heartbeat_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		_, err := a.c.Runtime.Heartbeat(ctx, &agentplanev1.HeartbeatRequest{Lease: ref})
		return err
	})
}

func (r *tenancyRun) suspendTask(a *actor, w whose) {
	r.leased(agentplanev1.RuntimeService_SuspendTask_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		_, err := a.c.Runtime.SuspendTask(ctx, &agentplanev1.SuspendTaskRequest{Lease: ref})
		return err
	})
}

func (r *tenancyRun) failTask(a *actor, w whose) {
	retry := r.rng.IntN(2) == 0
	r.leased(agentplanev1.RuntimeService_FailTask_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		_, err := a.c.Runtime.FailTask(ctx, &agentplanev1.FailTaskRequest{Lease: ref, Reason: "runtime.error", Message: "random", Retry: retry})
		return err
	})
}

// recordVerdict sends a well-formed verdict for a node the agent task does not have:
// an own lease is refused for the node, a foreign one for the lease.
func (r *tenancyRun) recordVerdict(a *actor, w whose) {
	r.leased(agentplanev1.RuntimeService_RecordVerdict_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		_, err := a.c.Runtime.RecordVerdict(ctx, &agentplanev1.RecordVerdictRequest{Lease: ref, Node: "critic",
			Result: &agentplanev1.VerdictResult{Verdict: "pass", Confidence: proto.Float64(0.9)}})
		return err
	}, codes.InvalidArgument)
}

// awaitDecision waits on a foreign or absent lease only: under an own lease it would
// wait for a reviewer.
func (r *tenancyRun) awaitDecision(a *actor, w whose) {
	if w == own {
		w = foreign
	}
	id, _, _ := r.pick(a, foreign, r.interruptsOf)
	r.leased(agentplanev1.RuntimeService_AwaitDecision_FullMethodName, a, w, func(ctx context.Context, ref *agentplanev1.LeaseRef) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		stream, err := a.c.Runtime.AwaitDecision(ctx, &agentplanev1.AwaitDecisionRequest{Lease: ref, InterruptId: id})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	})
}

// --- HitlService ---

// listAllInterrupts pages through a's pending interrupts of every kind (tool approvals
// and chat-mode turn ends), optionally of one task.
func listAllInterrupts(ctx context.Context, a *actor, taskID string) ([]*agentplanev1.Interrupt, error) {
	var out []*agentplanev1.Interrupt
	token := ""
	for {
		resp, err := a.c.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: taskID, PageSize: 7, PageToken: token,
			Kinds: []agentplanev1.InterruptKind{agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE}})
		if err != nil {
			return out, err
		}
		out = append(out, resp.GetInterrupts()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

func (r *tenancyRun) listInterrupts(a *actor, w whose) {
	const method = agentplanev1.HitlService_ListInterrupts_FullMethodName
	// Half the time the whole inbox, half the time filtered by an own, foreign or absent task.
	taskID, owner := "", ""
	if r.rng.IntN(2) == 0 {
		taskID, w, owner = r.pick(a, w, r.tasksOf)
	} else {
		w = own
	}
	ctx, cancel := r.call()
	defer cancel()
	list, err := listAllInterrupts(ctx, a, taskID)
	r.note(method, w, err)
	switch {
	case !a.may(method):
		if status.Code(err) != codes.PermissionDenied {
			r.t.Errorf("ListInterrupts by %v: want PERMISSION_DENIED, got %v", a, err)
		}
		return
	case err != nil:
		r.t.Errorf("ListInterrupts by %v (task %q, %s): %v", a, taskID, w, err)
		return
	case w != own && len(list) > 0:
		r.t.Errorf("ListInterrupts by %v filtered by a %s task %s of %q lists %d interrupts, an absent task lists none",
			a, w, taskID, owner, len(list))
	}
	for _, in := range list {
		if in.GetTenant() != a.tenant || r.interruptOwner[in.GetInterruptId()] != a.tenant || r.taskOwner[in.GetTaskId()] != a.tenant {
			r.t.Errorf("ListInterrupts by %v lists interrupt %s of tenant %q (task %s of %q)",
				a, in.GetInterruptId(), in.GetTenant(), in.GetTaskId(), r.taskOwner[in.GetTaskId()])
		}
		if taskID != "" && in.GetTaskId() != taskID {
			r.t.Errorf("ListInterrupts by %v for task %s lists interrupt %s of task %s", a, taskID, in.GetInterruptId(), in.GetTaskId())
		}
	}
}

func (r *tenancyRun) getInterrupt(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.interruptsOf)
	get := func(id string) (*agentplanev1.GetInterruptResponse, error) {
		ctx, cancel := r.call()
		defer cancel()
		return a.c.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: id})
	}
	resp, err := get(id)
	if r.checkScoped(agentplanev1.HitlService_GetInterrupt_FullMethodName, a, id, w, owner, err, func(id string) error { _, err := get(id); return err }) {
		if in := resp.GetInterrupt(); in.GetInterruptId() != id || in.GetTenant() != a.tenant {
			r.t.Errorf("GetInterrupt %s by %v returned %s of %q", id, a, in.GetInterruptId(), in.GetTenant())
		}
	}
}

func (r *tenancyRun) resolveInterrupt(a *actor, w whose) {
	id, w, owner := r.pick(a, w, r.interruptsOf)
	var before *agentplanev1.Interrupt
	if w == foreign {
		ctx, cancel := r.call()
		resp, err := r.mt.by[owner][auth.RoleApprover].c.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: id})
		cancel()
		if err != nil {
			r.t.Fatalf("owner reading interrupt %s: %v", id, err)
		}
		before = resp.GetInterrupt()
	}
	resolve := func(id string) error {
		ctx, cancel := r.call()
		defer cancel()
		_, err := a.c.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
			InterruptId: id, Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
		})
		return err
	}
	err := resolve(id)
	r.checkScoped(agentplanev1.HitlService_ResolveInterrupt_FullMethodName, a, id, w, owner, err, resolve)
	if before != nil {
		ctx, cancel := r.call()
		defer cancel()
		resp, err := r.mt.by[owner][auth.RoleApprover].c.Hitl.GetInterrupt(ctx, &agentplanev1.GetInterruptRequest{InterruptId: id})
		if err != nil || !proto.Equal(resp.GetInterrupt(), before) {
			r.t.Errorf("ResolveInterrupt by %v changed interrupt %s of %s: %v -> %v (%v)", a, id, owner, before, resp.GetInterrupt(), err)
		}
	}
}

// checkTotals compares what each tenant sees with the admin's deployment-wide stats,
// and each tenant's listings with the model.
func (r *tenancyRun) checkTotals() {
	t := r.t
	t.Helper()
	byState := map[string]int64{}
	var events, leases, pending int64
	for _, tenant := range r.mt.tenants {
		list, _, err := r.listAllTasks(r.mt.by[tenant][auth.RoleUser])
		if err != nil {
			t.Fatalf("ListTasks of %s: %v", tenant, err)
		}
		if len(list) != len(r.tasksOf[tenant]) {
			t.Errorf("tenant %s lists %d tasks, started %d", tenant, len(list), len(r.tasksOf[tenant]))
		}
		for _, task := range list {
			byState[task.GetState().String()]++
			events += task.GetLastSequence()
			if task.GetRuntimeId() != "" {
				leases++
			}
		}
		ctx, cancel := r.call()
		inbox, err := listAllInterrupts(ctx, r.mt.by[tenant][auth.RoleApprover], "")
		cancel()
		if err != nil {
			t.Fatalf("ListInterrupts of %s: %v", tenant, err)
		}
		pending += int64(len(inbox))
	}
	ctx, cancel := r.call()
	defer cancel()
	resp, err := r.mt.admin.c.Admin.GetStats(ctx, &agentplanev1.GetStatsRequest{})
	if err != nil {
		t.Fatalf("GetStats by the admin: %v", err)
	}
	stats := map[string]int64{}
	for state, n := range resp.GetTasksByState() {
		if n != 0 {
			stats[state] = n
		}
	}
	if !maps.Equal(stats, byState) {
		t.Errorf("admin stats count tasks by state %v; the tenants see %v", stats, byState)
	}
	if resp.GetEvents() != events {
		t.Errorf("admin stats count %d events; the tenants' tasks hold %d", resp.GetEvents(), events)
	}
	if resp.GetActiveLeases() != leases {
		t.Errorf("admin stats count %d active leases; the tenants see %d leased tasks", resp.GetActiveLeases(), leases)
	}
	if resp.GetPendingInterrupts() != pending {
		t.Errorf("admin stats count %d pending interrupts; the tenants' inboxes hold %d", resp.GetPendingInterrupts(), pending)
	}
	t.Logf("stats: tasks %v, events %d, active leases %d, pending interrupts %d", stats, events, leases, pending)
}

// --- No RPC without credentials ---

// invokeAs calls full with an empty request over conn, with ctx's metadata, and
// returns the first failure. A stream's success is its first message (streams that
// follow live state, such as health watches, do not end by themselves).
func invokeAs(ctx context.Context, conn *grpc.ClientConn, full string, serverStream bool) error {
	if !serverStream {
		return conn.Invoke(ctx, full, &emptyMsg{}, &emptyMsg{}, grpc.ForceCodecV2(rawCodec{}))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, full, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&emptyMsg{}); err != nil && err != io.EOF {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if err := stream.RecvMsg(&emptyMsg{}); err != io.EOF {
		return err
	}
	return nil
}

// registeredMethods lists every method the server registers, by full name.
func registeredMethods(in *servertest.Instance) map[string]bool {
	out := map[string]bool{}
	for name, info := range in.Server.ServiceInfo() {
		for _, m := range info.Methods {
			out["/"+name+"/"+m.Name] = m.IsServerStream
		}
	}
	return out
}

// TestNoRPCWithoutCredentials enumerates every method the multi-tenant server
// registers and calls each without credentials, with an unknown token, with a
// malformed authorization header and with two of them: all are UNAUTHENTICATED
// except the public health service. Then each principal calls each method: a role
// outside the method's is PERMISSION_DENIED, a role inside it is let through.
func TestNoRPCWithoutCredentials(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme"}, nil)
	methods := registeredMethods(mt.in)
	for full := range methods {
		if _, ok := rpcRoles[full]; !ok && !slices.Contains(publicRPCs, full) {
			t.Errorf("the server registers %s, which this test has no expectation for: add it to rpcRoles or publicRPCs", full)
		}
	}
	for full := range rpcRoles {
		if _, ok := methods[full]; !ok {
			t.Errorf("%s is expected but not registered", full)
		}
	}
	bogus, err := client.Dial(context.Background(), mt.in.GRPCAddr, client.WithToken(auth.TokenPrefix+"not-a-configured-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer bogus.Close()
	anonymous := mt.in.Client.Conn() // servertest's client sends no credentials
	valid := mt.by["acme"][auth.RoleUser].token
	credentials := []struct {
		name string
		conn *grpc.ClientConn
		md   metadata.MD
	}{
		{"none", anonymous, nil},
		{"unknown token", bogus.Conn(), nil},
		{"basic scheme", anonymous, metadata.Pairs("authorization", "Basic YWxpY2U6c2VjcmV0")},
		{"empty bearer", anonymous, metadata.Pairs("authorization", "Bearer ")},
		{"two headers", anonymous, metadata.Pairs("authorization", "Bearer "+valid, "authorization", "Bearer "+valid)},
	}
	for full, serverStream := range methods {
		t.Run(strings.TrimPrefix(full, "/"), func(t *testing.T) {
			for _, cred := range credentials {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if cred.md != nil {
					ctx = metadata.NewOutgoingContext(ctx, cred.md)
				}
				err := invokeAs(ctx, cred.conn, full, serverStream)
				cancel()
				public := slices.Contains(publicRPCs, full)
				switch unauth := status.Code(err) == codes.Unauthenticated && reasonOf(err) == apierr.ReasonUnauthenticated; {
				case public && status.Code(err) == codes.Unauthenticated:
					t.Errorf("credentials %q: the public %s refused: %v", cred.name, full, err)
				case !public && !unauth:
					t.Errorf("credentials %q: want UNAUTHENTICATED (%s), got %v", cred.name, apierr.ReasonUnauthenticated, err)
				}
			}
			if slices.Contains(publicRPCs, full) {
				return
			}
			for _, a := range mt.actors {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := invokeAs(ctx, a.c.Conn(), full, serverStream)
				cancel()
				denied := status.Code(err) == codes.PermissionDenied
				switch {
				case a.may(full) && (denied || status.Code(err) == codes.Unauthenticated):
					t.Errorf("%v may call %s but got %v", a, full, err)
				case !a.may(full) && (!denied || reasonOf(err) != apierr.ReasonPermissionDenied):
					t.Errorf("%v may not call %s: want PERMISSION_DENIED, got %v", a, full, err)
				}
			}
		})
	}
}

// httpRule is one HTTP binding of the gateway.
type httpRule struct {
	Selector string `yaml:"selector"`
	Get      string `yaml:"get"`
	Post     string `yaml:"post"`
}

// gatewayRoutes reads every HTTP binding from the API's HTTP mapping, so that the test
// covers each route the gateway serves rather than a sample.
func gatewayRoutes(t *testing.T) []httpRule {
	t.Helper()
	raw, err := os.ReadFile("../proto/agentplane/v1/agentplane_http.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		HTTP struct {
			Rules []httpRule `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.HTTP.Rules) == 0 {
		t.Fatal("no HTTP rules found")
	}
	return doc.HTTP.Rules
}

// fillPath replaces each {param} of a route template with a value.
func fillPath(template string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(template, '{')
		if i < 0 {
			return b.String() + template
		}
		j := strings.IndexByte(template[i:], '}')
		b.WriteString(template[:i] + "x1")
		template = template[i+j+1:]
	}
}

// TestHTTPRequiresCredentials sends every gateway route of a multi-tenant server
// without an Authorization header, with an unknown token and with another scheme:
// each is 401 carrying AUTH_UNAUTHENTICATED. With a valid token a user reads its
// capabilities, and another tenant's task is a 404 exactly like an absent one.
func TestHTTPRequiresCredentials(t *testing.T) {
	mt := startMultiTenant(t, []string{"acme", "globex"}, nil)
	base := "http://" + mt.in.HTTPAddr
	do := func(method, path, authz string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("{}")
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if authz != "" {
			req.Header.Set("Authorization", authz)
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
	for _, rule := range gatewayRoutes(t) {
		method, tmpl := http.MethodGet, rule.Get
		if rule.Post != "" {
			method, tmpl = http.MethodPost, rule.Post
		}
		path := fillPath(tmpl)
		for _, authz := range []string{"", "Bearer " + auth.TokenPrefix + "unknown", "Basic YWxpY2U6c2VjcmV0"} {
			code, body := do(method, path, authz)
			if code != http.StatusUnauthorized || !strings.Contains(body, reasons.Wire(apierr.ReasonUnauthenticated)) {
				t.Errorf("%s %s (%s) with Authorization %q: %d %s, want 401 with %s",
					method, path, rule.Selector, authz, code, body, apierr.ReasonUnauthenticated)
			}
		}
	}
	for _, path := range []string{"/healthz"} {
		if code, body := do(http.MethodGet, path, ""); code != http.StatusOK {
			t.Errorf("GET %s without credentials: %d %s; health probes are public", path, code, body)
		}
	}

	user := mt.by["acme"][auth.RoleUser]
	code, body := do(http.MethodGet, "/v1/capabilities", "Bearer "+user.token)
	var caps agentplanev1.GetCapabilitiesResponse
	if code != http.StatusOK {
		t.Fatalf("GET /v1/capabilities with a valid token: %d %s", code, body)
	}
	if err := protojson.Unmarshal([]byte(body), &caps); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if p := caps.GetCapabilities().GetPrincipal(); p.GetTenant() != "acme" || p.GetSubject() != user.name || !caps.GetCapabilities().GetRequirePrincipal() {
		t.Errorf("capabilities over HTTP: principal %v, require_principal %v", p, caps.GetCapabilities().GetRequirePrincipal())
	}

	// Another tenant's task over HTTP: the same 404 as an absent id.
	ctx := context.Background()
	started, err := mt.by["globex"][auth.RoleUser].c.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("globex's secret"),
	})
	if err != nil {
		t.Fatal(err)
	}
	foreignID := started.GetTask().GetTaskId()
	absentID := foreignID[:len(foreignID)-6] + "222222"
	fCode, fBody := do(http.MethodGet, "/v1/tasks/"+foreignID, "Bearer "+user.token)
	aCode, aBody := do(http.MethodGet, "/v1/tasks/"+absentID, "Bearer "+user.token)
	if fCode != http.StatusNotFound || fCode != aCode ||
		strings.ReplaceAll(fBody, foreignID, "<id>") != strings.ReplaceAll(aBody, absentID, "<id>") {
		t.Errorf("GET another tenant's task: %d %s\nGET an absent task: %d %s", fCode, fBody, aCode, aBody)
	}
	if strings.Contains(fBody, "globex") {
		t.Errorf("the 404 names the owning tenant: %s", fBody)
	}
}

// TestTenantIDTheStoreCannotKeyStopsTheBoot: a principal whose tenant id the store
// cannot key (longer than 255 bytes) can never do anything, so the configuration
// holding it must stop the boot rather than serve INVALID_ARGUMENT on every call.
func TestTenantIDTheStoreCannotKeyStopsTheBoot(t *testing.T) {
	_, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	cfg := servertest.Config(t)
	cfg.HTTPAddr = "off"
	cfg.Auth.RequirePrincipal = true
	cfg.Auth.Tokens = []config.Token{{Name: "long", SHA256: hash, Tenant: strings.Repeat("t", 256), Roles: []string{"user"}}}

	srv, err := server.New(cfg)
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = srv.Serve(ctx) // shuts down at once, releasing the store
		t.Fatal("server.New accepted a tenant id of 256 bytes, which no store key can hold")
	}
}

// TestMetricsDoNotBypassAdminScope: in a multi-tenant deployment GetStats is admin-only,
// so the same deployment-wide figures (tasks by state, pending interrupts, leases) must
// not be served without credentials on the API's HTTP address either.
func TestMetricsDoNotBypassAdminScope(t *testing.T) {

	mt := startMultiTenant(t, []string{"acme"}, nil)
	if _, err := mt.by["acme"][auth.RoleUser].c.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("counted"),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := mt.by["acme"][auth.RoleUser].c.Admin.GetStats(context.Background(), &agentplanev1.GetStatsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("GetStats by a user: want PERMISSION_DENIED, got %v", err)
	}
	resp, err := http.Get("http://" + mt.in.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, series := range []string{"agentplane_tasks{", "agentplane_pending_interrupts", "agentplane_active_leases", "agentplane_task_events"} {
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), series) {
			t.Errorf("GET /metrics without credentials serves %s, which GetStats keeps to admins", series)
		}
	}
	// A user's token is not enough; the admin's is, and then the series are there.
	for _, c := range []struct {
		token string
		want  int
	}{{mt.by["acme"][auth.RoleUser].token, http.StatusForbidden}, {mt.admin.token, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+mt.in.HTTPAddr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("GET /metrics: status %d, want %d", resp.StatusCode, c.want)
		}
		if c.want == http.StatusOK && !strings.Contains(string(body), "agentplane_tasks{") {
			t.Fatalf("the admin's scrape lacks agentplane_tasks")
		}
	}
}

// testPKI is a throwaway CA with the server's certificate and one client certificate.
type testPKI struct {
	caFile, certFile, keyFile string // the CA, and the server's pair
	client                    tls.Certificate
	pool                      *x509.CertPool
}

// newTestPKI writes a CA, a server certificate for 127.0.0.1 and a client certificate
// with common name clientCN into dir.
func newTestPKI(t *testing.T, dir, clientCN string) testPKI {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		key, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(cryptorand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(cryptorand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	srvCert, srvKey := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := issue(3, clientCN, x509.ExtKeyUsageClientAuth)
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return testPKI{
		caFile: write("ca.pem", caPEM), certFile: write("server.pem", srvCert), keyFile: write("server.key", srvKey),
		client: pair, pool: pool,
	}
}

// TestHTTPOverTLS: with TLS configured, the HTTP/JSON gateway serves the API over
// HTTPS to the same principals as gRPC: a bearer token, and a client certificate
// (which the HTTP server verifies against the same client CA).
func TestHTTPOverTLS(t *testing.T) {
	pki := newTestPKI(t, t.TempDir(), "acme-bot")
	token, hash, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, func(c *config.Config) {
		c.Auth.RequirePrincipal = true
		c.Auth.Tokens = []config.Token{{Name: "acme-user", SHA256: hash, Tenant: "acme", Roles: []string{"user"}}}
		c.Auth.ClientCerts = []config.ClientCert{{CommonName: "acme-bot", Tenant: "acme", Roles: []string{"user"}}}
		c.TLS = config.TLS{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: pki.caFile}
	})
	tlsCfg := &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12}
	ctx := context.Background()
	c, err := client.Dial(ctx, in.GRPCAddr, client.WithTLS(tlsCfg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Capabilities.GetCapabilities(ctx, &agentplanev1.GetCapabilitiesRequest{})
	if err != nil || resp.GetCapabilities().GetPrincipal().GetSubject() != "acme-bot" {
		t.Fatalf("gRPC with the client certificate: %v %v", err, resp.GetCapabilities().GetPrincipal())
	}
	if !resp.GetCapabilities().GetFeatures().GetHttpJson() {
		t.Fatal("features.http_json is false, yet HTTP is on")
	}

	// capabilitiesOver GETs /v1/capabilities over HTTPS and returns the principal.
	capabilitiesOver := func(t *testing.T, cfg *tls.Config, authz string) *agentplanev1.Principal {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodGet, "https://"+in.HTTPAddr+"/v1/capabilities", nil)
		if err != nil {
			t.Fatal(err)
		}
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		hresp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer hresp.Body.Close()
		body, _ := io.ReadAll(hresp.Body)
		var caps agentplanev1.GetCapabilitiesResponse
		if hresp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/capabilities over HTTPS: %d %s (features.http_json says the route works)", hresp.StatusCode, body)
		}
		if err := protojson.Unmarshal(body, &caps); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return caps.GetCapabilities().GetPrincipal()
	}
	t.Run("bearer token", func(t *testing.T) {

		if p := capabilitiesOver(t, &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}, "Bearer "+token); p.GetSubject() != "acme-user" {
			t.Errorf("principal %v, want acme-user", p)
		}
	})
	t.Run("client certificate", func(t *testing.T) {

		if p := capabilitiesOver(t, tlsCfg, ""); p.GetSubject() != "acme-bot" {
			t.Errorf("principal %v, want acme-bot", p)
		}
	})
}
