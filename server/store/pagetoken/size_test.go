package pagetoken

import (
	"testing"

	"github.com/agentplane/agentplane/server/apierr"
)

// TestPageSize: the sizes every List RPC shares.
func TestPageSize(t *testing.T) {
	for in, want := range map[int32]int{0: DefaultPageSize, 1: 1, 50: 50, 499: 499, 500: MaxPageSize, 501: MaxPageSize, 1 << 30: MaxPageSize} {
		if got, err := PageSize(in); err != nil || got != want {
			t.Errorf("PageSize(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := PageSize(-1); !apierr.HasReason(err, apierr.ReasonInvalidArgument) {
		t.Errorf("PageSize(-1) = %v, want REQUEST_INVALID", err)
	}
}
