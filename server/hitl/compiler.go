package hitl

import (
	"container/list"
	"sync"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// DefaultCompilerCacheSize is the number of compiled policies a Compiler keeps.
const DefaultCompilerCacheSize = 4096

// Compiler compiles interrupt policies and keeps the most recently used ones, keyed
// by the SHA-256 of their deterministic encoding. A task's policy never changes, and
// many tasks share one, so the gate on the hot path pays for an encoding and a hash
// (about a microsecond) instead of a CEL compilation. Safe for concurrent use.
type Compiler struct {
	size int

	mu    sync.Mutex
	ll    *list.List // of *cacheEntry, most recent first
	items map[policyKey]*list.Element
}

type cacheEntry struct {
	key    policyKey
	policy *Policy
}

// NewCompiler returns a Compiler keeping up to size policies (DefaultCompilerCacheSize
// when size <= 0).
func NewCompiler(size int) *Compiler {
	if size <= 0 {
		size = DefaultCompilerCacheSize
	}
	return &Compiler{size: size, ll: list.New(), items: make(map[policyKey]*list.Element)}
}

// Compile returns the compiled policy, from the cache when it holds it. Errors are as
// CompilePolicy's and are not cached: an invalid policy never becomes a task, so a
// failure here is rare and worth repeating.
func (c *Compiler) Compile(p *agentplanev1.InterruptPolicy) (*Policy, error) {
	if p == nil {
		return &Policy{}, nil
	}
	key, err := keyOf(p)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		pol := el.Value.(*cacheEntry).policy
		c.mu.Unlock()
		return pol, nil
	}
	c.mu.Unlock()

	// Compiled outside the lock: two goroutines may compile the same policy at once,
	// which is harmless (same result) and better than serialising every compilation.
	pol, err := CompilePolicy(p)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*cacheEntry).policy, nil
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, policy: pol})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).key)
	}
	return pol, nil
}

// Len returns the number of cached policies.
func (c *Compiler) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
