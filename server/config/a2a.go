package config

import (
	"encoding/json"
	"net/url"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// A2A configures the A2A face: every static agent reachable as an A2A v1.0 agent
// (with the 0.3 JSON-RPC method names) under /a2a/AGENT_ID on the HTTP listener
// (docs/a2a.md).
type A2A struct {
	// Disabled turns the face off (no /a2a/, no /.well-known/agent-card.json).
	Disabled bool `yaml:"disabled"`
	// PublicURL is the base URL the agent cards name (scheme://host[:port][/path]),
	// for a control plane behind a proxy; empty takes the request's scheme and Host.
	PublicURL string `yaml:"public_url"`
	// DefaultAgent is the static agent /.well-known/agent-card.json describes; empty
	// means the only static agent when there is exactly one, else none.
	DefaultAgent string `yaml:"default_agent"`
	// Agents refine what a card says of an agent, and where its tasks run. Every key is
	// a static agent id; agents not listed are served with defaults.
	Agents map[string]A2AAgent `yaml:"agents"`
	// MaxStreams bounds the A2A server-sent-event streams open at once on this server
	// (each principal is bounded by limits.max_watches_per_principal as well).
	MaxStreams int `yaml:"max_streams"`
	// BlockingTimeout bounds how long a blocking SendMessage waits for the task to end
	// or to need input; then it answers with the task as it is.
	BlockingTimeout Duration `yaml:"blocking_timeout"`
	// DisablePush turns A2A push notifications off (the cards say so).
	DisablePush bool `yaml:"disable_push"`
}

// A2AAgent is what an agent card says of one agent.
type A2AAgent struct {
	// Name and Description of the agent (defaults: the spec's name, then the id; a
	// generic sentence).
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Queue is the run queue the agent's A2A tasks start on (default: "default").
	Queue string `yaml:"queue"`
	// InterruptPolicy is the interrupt policy the agent's A2A tasks start with, the
	// API's InterruptPolicy in its JSON shape ({allowlist: {tools: [send_email]}}),
	// unless the SendMessage's metadata sets one (agentplane.interruptPolicy). Unset,
	// such a task has none (every A2A skill call of it is rejected; see docs/hitl.md).
	InterruptPolicy map[string]any `yaml:"interrupt_policy"`
}

// Policy is the agent's interrupt policy as the API's message, nil when unset.
func (a A2AAgent) Policy() (*agentplanev1.InterruptPolicy, error) {
	if a.InterruptPolicy == nil {
		return nil, nil
	}
	return DecodeInterruptPolicy(a.InterruptPolicy)
}

// DecodeInterruptPolicy reads an interrupt policy in the API's JSON shape from a
// decoded JSON or YAML value ({allowlist: {tools: [send_email]}}): the one decoder of
// a2a.agents.<id>.interrupt_policy and of an A2A message's
// metadata.agentplane.interruptPolicy.
func DecodeInterruptPolicy(raw any) (*agentplanev1.InterruptPolicy, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	p := &agentplanev1.InterruptPolicy{}
	if err := protojson.Unmarshal(b, p); err != nil {
		return nil, err
	}
	return p, nil
}

// A2APushEndpoint is the endpoint name of the outbox's A2A push notifications (their
// destination is the task's push config, not a configured webhook).
const A2APushEndpoint = "a2a-push"

// DefaultA2A is the face's defaults.
func DefaultA2A() A2A {
	return A2A{MaxStreams: 256, BlockingTimeout: Duration(30 * time.Second)}
}

// A2ADefaultAgent resolves a2a.default_agent.
func (c *Config) A2ADefaultAgent() string {
	if c.A2A.DefaultAgent != "" {
		return c.A2A.DefaultAgent
	}
	if len(c.Spec.StaticAgents) == 1 {
		for id := range c.Spec.StaticAgents {
			return id
		}
	}
	return ""
}

func (c *Config) validateA2A(bad func(string, ...any)) {
	a := c.A2A
	if a.PublicURL != "" {
		u, err := url.Parse(a.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad("a2a.public_url %q: want http(s)://host[:port][/path]", a.PublicURL)
		}
	}
	if a.DefaultAgent != "" {
		if _, ok := c.Spec.StaticAgents[a.DefaultAgent]; !ok {
			bad("a2a.default_agent %q: not a static agent (spec.static_agents)", a.DefaultAgent)
		}
	}
	ids := make([]string, 0, len(a.Agents))
	for id := range a.Agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ok := c.Spec.StaticAgents[id]; !ok {
			bad("a2a.agents.%s: not a static agent (spec.static_agents)", id)
		}
		if q := a.Agents[id].Queue; q != "" && !validQueue(q) {
			bad("a2a.agents.%s.queue %q: 1 to 64 letters, digits, '.', '_' and '-', starting with a letter or digit", id, q)
		}
		if p, err := a.Agents[id].Policy(); err != nil {
			bad("a2a.agents.%s.interrupt_policy: %v", id, err)
		} else if p != nil && p.GetPolicy() == nil {
			bad("a2a.agents.%s.interrupt_policy: want one of allowlist, denylist, predicate", id)
		}
	}
	if a.MaxStreams < 1 {
		bad("a2a.max_streams must be at least 1")
	}
	if d := a.BlockingTimeout.D(); d <= 0 || d > 10*time.Minute {
		bad("a2a.blocking_timeout must be between 1ns and 10m")
	}
}

func validQueue(q string) bool {
	if len(q) < 1 || len(q) > 64 {
		return false
	}
	for i, r := range q {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '.' && r != '_' && r != '-')) {
			return false
		}
	}
	return true
}
