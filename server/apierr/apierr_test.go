package apierr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/api/reasons"
)

func TestToStatusKeepsCodeReasonAndDetails(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", NotFound(ReasonTaskNotFound, "task %q not found", "t1").WithMetadata("task_id", "t1"))
	st, known := ToStatus(err)
	if !known || st.Code() != codes.NotFound || st.Message() != `task "t1" not found` {
		t.Fatalf("got %v %v", st, known)
	}
	info := reasons.Info(st.Err())
	if info.GetDomain() != Domain || info.GetReason() != "TASK_NOT_FOUND" || info.GetMetadata()["task_id"] != "t1" {
		t.Fatalf("ErrorInfo = %v", info)
	}
}

func TestToStatusMasksUnknownErrors(t *testing.T) {
	st, known := ToStatus(errors.New("open /var/lib/secret: permission denied"))
	if known || st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("internal detail must not reach the client: %v %v", st, known)
	}
	if reasons.Of(st.Err()) != ReasonInternal {
		t.Fatalf("reason = %v", reasons.Info(st.Err()))
	}
}

func TestToStatusContextAndStatusErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		code codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{status.Error(codes.Unauthenticated, "no token"), codes.Unauthenticated},
	} {
		st, known := ToStatus(c.err)
		if !known || st.Code() != c.code {
			t.Errorf("%v: got %v (%v)", c.err, st.Code(), known)
		}
	}
}

func TestIsMatchesByReason(t *testing.T) {
	err := fmt.Errorf("ctx: %w", FailedPrecondition(ReasonLeaseLost, "stale"))
	if !errors.Is(err, New(codes.Unknown, ReasonLeaseLost, "")) || !HasReason(err, ReasonLeaseLost) || ReasonOf(err) != ReasonLeaseLost {
		t.Fatal("reason matching failed")
	}
	if HasReason(err, ReasonTaskNotFound) || ReasonOf(errors.New("x")) != 0 {
		t.Fatal("matched the wrong reason")
	}
}
