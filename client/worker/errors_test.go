package worker

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestIsTransientFollowsTheDeclaredRetryClass: an agentplane error is retried when it
// says so (RetryInfo), whatever its code; an error without agentplane ErrorInfo (the
// transport's) by its code.
func TestIsTransientFollowsTheDeclaredRetryClass(t *testing.T) {
	infoOnly := func(c codes.Code, wire string) error { // ErrorInfo and nothing else
		st, _ := status.New(c, "x").WithDetails(&errdetails.ErrorInfo{Domain: reasons.Domain, Reason: wire})
		return st.Err()
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"LIMIT_EXCEEDED", reasons.Status(codes.ResourceExhausted, agentplanev1.ErrorReason_ERROR_REASON_LIMIT_EXCEEDED, "too big", nil).Err(), false},
		{"LIMIT_EXCEEDED without RetryInfo", infoOnly(codes.ResourceExhausted, "LIMIT_EXCEEDED"), false},
		{"LIMIT_CONCURRENCY", reasons.Status(codes.ResourceExhausted, agentplanev1.ErrorReason_ERROR_REASON_LIMIT_CONCURRENCY, "busy", nil).Err(), true},
		{"STORE_UNAVAILABLE", reasons.Status(codes.Unavailable, agentplanev1.ErrorReason_ERROR_REASON_STORE_UNAVAILABLE, "disk", nil).Err(), true},
		{"internal", reasons.Status(codes.Internal, agentplanev1.ErrorReason_ERROR_REASON_INTERNAL, "bug", nil).Err(), false},
		{"a reason this build does not know, without RetryInfo", infoOnly(codes.Unavailable, "something.new"), false},
		{"transport UNAVAILABLE", status.Error(codes.Unavailable, "connection refused"), true},
		{"grpc-go's message size refusal", status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("%s: IsTransient = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPermanentLimitIsNotRetried against the real server: an input over
// limits.max_input_bytes is RESOURCE_EXHAUSTED LIMIT_EXCEEDED, and not transient.
func TestPermanentLimitIsNotRetried(t *testing.T) {
	in := servertest.Start(t, func(c *config.Config) { c.Limits.MaxInputBytes = 16 })
	_, err := in.Client.Tasks.StartTask(context.Background(), &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(&agentplanev1.AgentSpec{
			ApiVersion: "qar/v1", Kind: "AgentSpec", Name: proto.String("sdk-test"), Model: "m",
			Instructions: &agentplanev1.Instructions{Source: &agentplanev1.Instructions_Text{Text: "Be brief."}},
		})},
		Input: client.UserText(strings.Repeat("x", 17)),
	})
	if status.Code(err) != codes.ResourceExhausted || reasons.Of(err) != agentplanev1.ErrorReason_ERROR_REASON_LIMIT_EXCEEDED {
		t.Fatalf("StartTask = %v, want RESOURCE_EXHAUSTED LIMIT_EXCEEDED", err)
	}
	if _, retry := reasons.RetryAfter(err); retry || IsTransient(err) {
		t.Fatalf("a permanent limit says retry (RetryInfo %v, IsTransient %v)", retry, IsTransient(err))
	}
}
