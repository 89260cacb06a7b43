package reasons

import (
	"errors"
	"fmt"
	"regexp"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// errorInfoReason is the form google.rpc.ErrorInfo gives a reason.
var errorInfoReason = regexp.MustCompile(`^[A-Z][A-Z0-9_]+[A-Z0-9]$`)

// TestDeclarations: every value but UNSPECIFIED is declared with a wire string that
// parses back to it and at least one code; the wire string is the enum name without
// ERROR_REASON_ (ERROR_REASON_TASK_NOT_FOUND <-> TASK_NOT_FOUND) and has the form
// google.rpc.ErrorInfo requires of a reason (UPPER_SNAKE_CASE, at most 63 characters).
func TestDeclarations(t *testing.T) {
	if len(All()) != len(agentplanev1.ErrorReason_name)-1 {
		t.Fatalf("%d declared reasons, the enum has %d values", len(All()), len(agentplanev1.ErrorReason_name))
	}
	for _, r := range All() {
		w := Wire(r)
		if w == "" || Parse(w) != r || len(Codes(r)) == 0 {
			t.Errorf("%s: wire %q, parses to %s, codes %v", r, w, Parse(w), Codes(r))
		}
		if want := "ERROR_REASON_" + w; r.String() != want {
			t.Errorf("%s is sent as %q: name it %s", r, w, want)
		}
		if !errorInfoReason.MatchString(w) || len(w) > 63 {
			t.Errorf("%s is sent as %q, not an UPPER_SNAKE_CASE reason of at most 63 characters", r, w)
		}
	}
	if Parse("NO_SUCH_REASON") != agentplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED || Wire(agentplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED) != "" {
		t.Error("an undeclared reason must parse to UNSPECIFIED and have no wire string")
	}
}

// TestStatusSaysWhetherToRetry: a retryable reason carries RetryInfo, others do not;
// the ErrorInfo names the wire string; Of and RetryAfter read them back through
// wrapping.
func TestStatusSaysWhetherToRetry(t *testing.T) {
	for _, r := range All() {
		err := fmt.Errorf("call: %w", Status(Codes(r)[0], r, "m", map[string]string{"k": "v"}).Err())
		if Of(err) != r || Info(err).GetMetadata()["k"] != "v" || Info(err).GetReason() != Wire(r) {
			t.Errorf("%s: read back as %s (%v)", r, Of(err), Info(err))
		}
		delay, retry := RetryAfter(err)
		if retry != Retryable(r) || (retry && delay != RetryDelay) {
			t.Errorf("%s: RetryInfo %v %v, declared retryable %v", r, delay, retry, Retryable(r))
		}
	}
	if !Retryable(agentplanev1.ErrorReason_ERROR_REASON_LIMIT_CONCURRENCY) || Retryable(agentplanev1.ErrorReason_ERROR_REASON_LIMIT_EXCEEDED) {
		t.Error("LIMIT_CONCURRENCY is retryable, LIMIT_EXCEEDED is not")
	}
}

func TestInfoIgnoresOtherDomainsAndPlainErrors(t *testing.T) {
	st, _ := status.New(codes.NotFound, "x").WithDetails(&errdetails.ErrorInfo{Domain: "googleapis.com", Reason: "TASK_NOT_FOUND"})
	if Info(st.Err()) != nil || Of(st.Err()) != agentplanev1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		t.Error("an ErrorInfo of another domain was read as agentplane's")
	}
	if Info(errors.New("plain")) != nil || Info(nil) != nil {
		t.Error("a plain error has no ErrorInfo")
	}
	if _, retry := RetryAfter(status.Error(codes.Unavailable, "transport")); retry {
		t.Error("RetryInfo found where there is none")
	}
}

func TestStatusRefusesUndeclaredReasons(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Status built an error with an undeclared reason")
		}
	}()
	Status(codes.Internal, agentplanev1.ErrorReason(9999), "m", nil)
}
