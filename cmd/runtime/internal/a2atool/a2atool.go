// Package a2atool mounts the skills of a task's effective A2A peers (Lease.a2a_peers)
// for the agent runner: each peer's agent card is read, its skills are mounted as
// "a2a__<peer>__<skill>" and called over JSON-RPC: with A2A v1.0's SendMessage when the
// card offers a v1.0 JSON-RPC interface (its own small client, v10.go), else with 0.3's
// message/send through the A2A project's Go client (github.com/a2aproject/a2a-go). The
// gate always holds A2A calls for approval (gates.AlwaysGated).
package a2atool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/agentplane/agentplane/client/worker"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
	"github.com/agentplane/agentplane/gates"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// Defaults of Provider's limits.
const (
	DefaultCardTimeout    = 10 * time.Second
	DefaultCallTimeout    = 120 * time.Second
	DefaultMaxResultBytes = 64 << 10
	// MaxCardBytes caps the agent card read from a peer.
	MaxCardBytes = 1 << 20
	// MaxSkills caps the skills mounted from one peer.
	MaxSkills = 64
	// maxNameBytes caps the card's and a skill's display names, maxDescriptionBytes a
	// skill's description (cut and marked beyond).
	maxNameBytes        = 256
	maxDescriptionBytes = 4 << 10
	// cardPath is where a peer publishes its card, under its base URL.
	cardPath = "/.well-known/agent-card.json"
)

// Provider is an agent.ToolProvider for A2A peers.
type Provider struct {
	CardTimeout    time.Duration
	CallTimeout    time.Duration
	MaxResultBytes int
}

var _ agent.ToolProvider = (*Provider)(nil)

// skillParameters is the arguments' schema of every skill: the message to the peer.
func skillParameters() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"message": map[string]any{"type": "string", "description": "What to ask the remote agent, in plain language."},
		},
		"required":             []any{"message"},
		"additionalProperties": false,
	}
}

// Mount reads every peer's card and mounts its skills. A peer whose card cannot be
// read or offers no usable endpoint is skipped: logged and noted in the task's log.
func (p *Provider) Mount(ctx context.Context, t *worker.Task, log *slog.Logger) ([]*agent.RemoteTool, func(), error) {
	return p.MountPeers(ctx, t.Lease().GetA2APeers(), log, t.Note)
}

// MountPeers is Mount for a list of peers; note (may be nil) writes a note to the
// task's log.
func (p *Provider) MountPeers(ctx context.Context, peers []*agentplanev1.A2APeer, log *slog.Logger, note agent.Note) ([]*agent.RemoteTool, func(), error) {
	names := make([]string, len(peers))
	for i, peer := range peers {
		names[i] = peer.GetName()
	}
	return agent.MountEach(ctx, log, note, "A2A peer", "a2a_peer", names, func(ctx context.Context, i int) ([]*agent.RemoteTool, func(), error) {
		ts, refused, c, err := p.mountPeer(ctx, peers[i], log)
		if err != nil {
			return nil, nil, err
		}
		agent.ReportRefused(ctx, log, note, "A2A peer", "a2a_peer", peers[i].GetName(), "a2a", refused)
		return ts, func() { _ = c.Destroy() }, nil
	})
}

func (p *Provider) mountPeer(ctx context.Context, peer *agentplanev1.A2APeer, log *slog.Logger) ([]*agent.RemoteTool, []agent.Refusal, peerClient, error) {
	hc := agent.HeaderClient(peer.GetHeaders())
	card, cardURL, err := p.readCard(ctx, hc, peer.GetUrl())
	if err != nil {
		return nil, nil, nil, err
	}
	ep, err := pickEndpoint(card, cardURL)
	if err != nil {
		return nil, nil, nil, err
	}
	log.Debug("A2A peer card read", "a2a_peer", peer.GetName(), "protocol_version", ep.version, "skills", len(card.Skills))
	var c peerClient
	if ep.version == version10 {
		c = &v10Client{hc: hc, endpoint: ep.url, maxBody: agent.ResponseLimit(agent.OrDefault(p.MaxResultBytes, DefaultMaxResultBytes))}
	} else {
		ac, err := a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: ep.url, Transport: a2a.TransportProtocolJSONRPC}},
			a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(hc))
		if err != nil {
			return nil, nil, nil, err
		}
		c = v03Client{ac}
	}
	var (
		tools   []*agent.RemoteTool
		refused []agent.Refusal
	)
	cardName := agent.TruncateAs(card.Name, maxNameBytes, "name")
	for i, sk := range card.Skills {
		if i == MaxSkills {
			refused = append(refused, agent.Refusal{Limit: "max_tools",
				Reason: fmt.Sprintf("the card lists %d skills; only the first %d are offered", len(card.Skills), MaxSkills)})
			break
		}
		if sk.ID == "" {
			continue
		}
		gateName := gates.A2aToolName(peer.GetName(), sk.ID)
		if err := agent.CheckToolName(sk.ID); err != nil {
			refused = append(refused, agent.Refusal{Tool: gateName, Limit: "tool_name", Reason: "the skill id: " + err.Error()})
			continue
		}
		desc := fmt.Sprintf("Ask the remote agent %s (%s) to use its skill %q", peer.GetName(), cardName, agent.TruncateAs(sk.Name, maxNameBytes, "name"))
		if sk.Description != "" {
			if len(sk.Description) > maxDescriptionBytes {
				telemetry.FromContext(ctx).ToolLimit("a2a", "description_bytes")
			}
			desc += ": " + agent.TruncateAs(sk.Description, maxDescriptionBytes, "description")
		}
		skill := sk.ID
		tools = append(tools, &agent.RemoteTool{
			ModelName:   agent.FunctionName(gateName),
			GateName:    gateName,
			Description: desc,
			Parameters:  skillParameters(),
			Run: func(ctx context.Context, argumentsJSON string) (string, bool) {
				return p.call(ctx, c, peer.GetName(), skill, argumentsJSON)
			},
		})
	}
	tools, clashes := agent.UniqueModelNames(tools)
	return tools, append(refused, clashes...), c, nil
}

// agentCard is what the runtime reads of a peer's agent card, in either version: 1.0's
// supportedInterfaces, 0.3's url, preferredTransport and additionalInterfaces.
type agentCard struct {
	Name                string `json:"name"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	URL                  string `json:"url"`
	PreferredTransport   string `json:"preferredTransport"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces"`
	Skills []struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"skills"`
}

// readCard fetches the agent card: the peer's URL itself when it names a .json
// document, else <url>/.well-known/agent-card.json. It returns the URL it read.
func (p *Provider) readCard(ctx context.Context, hc *http.Client, peerURL string) (*agentCard, *url.URL, error) {
	u, err := url.Parse(peerURL)
	if err != nil {
		return nil, nil, err
	}
	if !strings.HasSuffix(u.Path, ".json") {
		u = u.JoinPath(cardPath)
	}
	ctx, cancel := context.WithTimeout(ctx, agent.OrDefault(p.CardTimeout, DefaultCardTimeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, p.cardError(ctx, fmt.Errorf("read agent card: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("read agent card %s: HTTP %d", u.Redacted(), resp.StatusCode)
	}
	body, err := agent.ReadAtMost(resp.Body, MaxCardBytes)
	var tl *agent.TooLargeError
	if errors.As(err, &tl) {
		telemetry.FromContext(ctx).ToolLimit("a2a", "card_bytes")
		return nil, nil, fmt.Errorf("agent card %s is larger than %d bytes", u.Redacted(), MaxCardBytes)
	}
	if err != nil {
		return nil, nil, p.cardError(ctx, fmt.Errorf("read agent card: %w", err))
	}
	var card agentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, nil, fmt.Errorf("agent card %s: %w", u.Redacted(), err)
	}
	return &card, u, nil
}

// cardError is err, or says the card was not read within CardTimeout.
func (p *Provider) cardError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		telemetry.FromContext(ctx).ToolLimit("a2a", "list_timeout")
		return fmt.Errorf("read agent card: no answer within %s (a2a.card_timeout)", agent.OrDefault(p.CardTimeout, DefaultCardTimeout))
	}
	return err
}
