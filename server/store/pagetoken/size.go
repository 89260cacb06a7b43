package pagetoken

import "github.com/agentplane/agentplane/server/apierr"

// The page sizes of every List RPC: one default and one maximum, documented on each
// request's page_size and advertised in Capabilities.limits.
const (
	// DefaultPageSize is the page size of a request that gives 0.
	DefaultPageSize = 50
	// MaxPageSize is the largest page size; a larger request is lowered to it.
	MaxPageSize = 500
)

// PageSize returns the page size a List RPC serves for a request's page_size: 0 means
// DefaultPageSize, larger than MaxPageSize means MaxPageSize, negative is
// INVALID_ARGUMENT.
func PageSize(n int32) (int, error) {
	switch {
	case n < 0:
		return 0, apierr.InvalidArgument(apierr.ReasonInvalidArgument, "page_size may not be negative")
	case n == 0:
		return DefaultPageSize, nil
	}
	return min(int(n), MaxPageSize), nil
}
