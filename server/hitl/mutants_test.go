package hitl

// Tests that pin behaviour a mutation run found unguarded. Each names, in its
// comment, the plausible bug (the mutant) it fails on.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// Edited arguments must be a JSON object also for a tool the spec declares without a
// parameter schema: there no validator runs, and the object check is the only one.
//
// Mutant: checkEdit without its object check (a schema's validator catches it
// otherwise, so TestDecideResolve's case with a schema does not).
func TestEditOfAToolWithoutASchemaMustBeAnObject(t *testing.T) {
	in := pendingInterrupt(t, `{"path":"/a"}`)
	p := ResolveParams{Principal: "alice", Now: t0.Add(time.Second), Reason: ReasonPolicy{Trusted: true}}
	for name, args := range map[string]string{
		"string": `"/b"`,
		"list":   `["/b"]`,
		"number": `3`,
		"null":   `null`,
	} {
		t.Run(name, func(t *testing.T) {
			d, err := DecideResolve(in, editReq(args), p)
			if err == nil {
				t.Fatalf("an edit to a %s was accepted: %v", name, d)
			}
			if e := asAPIErr(t, err); e.Code != codes.InvalidArgument || e.Reason != apierr.ReasonEditInvalid {
				t.Fatalf("error %v, want INVALID_ARGUMENT %s", err, apierr.ReasonEditInvalid)
			}
		})
	}
}

// A list policy's limits hold exactly: at the limit it compiles, one past it does not.
//
// Mutants: the comparisons of MaxPolicyTools and MaxTagBytes moved across their
// boundary.
func TestListPolicyLimitsAreExact(t *testing.T) {
	tools := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("tool.%04d", i)
		}
		return out
	}
	tag := func(n int) map[string][]string { return map[string][]string{"tool.0000": {strings.Repeat("t", n)}} }
	for _, tc := range []struct {
		name string
		p    *agentplanev1.InterruptPolicy
		ok   bool
	}{
		{"MaxPolicyTools tools", allowlist(tools(MaxPolicyTools), nil), true},
		{"one tool more", allowlist(tools(MaxPolicyTools+1), nil), false},
		{"a tag of MaxTagBytes", allowlist(tools(1), tag(MaxTagBytes)), true},
		{"a tag one byte longer", allowlist(tools(1), tag(MaxTagBytes+1)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompilePolicy(tc.p)
			if (err == nil) != tc.ok {
				t.Fatalf("CompilePolicy = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
