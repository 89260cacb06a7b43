package a2atool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/telemetry"
)

// The protocol versions the runtime speaks to a peer.
const (
	version03 = "0.3"
	version10 = "1.0"
)

// maxTaskIDBytes bounds the task id a peer answers (it is sent back to the peer when
// polling, and shown to the model).
const maxTaskIDBytes = 256

// The interval between polls of a remote task that is still working after the
// peer's blocking SendMessage returned (a peer that bounds how long it blocks, as
// agentplane's own face does): it starts at pollMin and doubles up to pollMax.
var (
	pollMin = 250 * time.Millisecond
	pollMax = 2 * time.Second
)

// maxPollErrors is how many polls in a row may fail (a dropped connection) before
// the call fails.
const maxPollErrors = 3

// endpoint is the JSON-RPC endpoint picked from a card, and the version it speaks.
type endpoint struct{ url, version string }

// pickEndpoint picks the card's JSON-RPC endpoint: a 1.0 one when the card lists one
// (supportedInterfaces), else a 0.3 one (url with preferredTransport,
// additionalInterfaces, supportedInterfaces of protocolVersion 0.3). It must be on
// the origin the card was read from: the control plane's gates approved that origin,
// and the peer's headers (credentials) go nowhere else.
func pickEndpoint(card *agentCard, cardURL *url.URL) (endpoint, error) {
	var v10, v03 []string
	for _, in := range card.SupportedInterfaces {
		if !strings.EqualFold(in.ProtocolBinding, string(a2a.TransportProtocolJSONRPC)) {
			continue
		}
		switch majorMinor(in.ProtocolVersion) {
		case "", "1":
			v10 = append(v10, in.URL)
		case version03:
			v03 = append(v03, in.URL)
		}
	}
	if card.PreferredTransport == "" || strings.EqualFold(card.PreferredTransport, string(a2a.TransportProtocolJSONRPC)) {
		v03 = append(v03, card.URL)
	}
	for _, in := range card.AdditionalInterfaces {
		if strings.EqualFold(in.Transport, string(a2a.TransportProtocolJSONRPC)) {
			v03 = append(v03, in.URL)
		}
	}
	var offsite string
	for _, c := range []struct {
		version string
		urls    []string
	}{{version10, v10}, {version03, v03}} {
		for _, raw := range c.urls {
			if raw == "" {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil {
				continue
			}
			if u.Scheme != cardURL.Scheme || u.Host != cardURL.Host {
				if offsite == "" {
					offsite = raw
				}
				continue
			}
			return endpoint{url: raw, version: c.version}, nil
		}
	}
	if offsite != "" {
		return endpoint{}, fmt.Errorf("the agent card's JSON-RPC endpoint %q is not on the peer's origin %s://%s", agent.TruncateAs(offsite, maxNameBytes, "url"), cardURL.Scheme, cardURL.Host)
	}
	return endpoint{}, fmt.Errorf("the agent card offers no JSON-RPC endpoint")
}

// majorMinor is "1" for any 1.x version, "0.3" for 0.3.x, else the version.
func majorMinor(v string) string {
	v = strings.TrimSpace(v)
	switch {
	case v == "1" || strings.HasPrefix(v, "1."):
		return "1"
	case v == "0.3" || strings.HasPrefix(v, "0.3."):
		return version03
	}
	return v
}

// peerResult is a peer's answer in either version: its reply message, or a task.
type peerResult struct {
	task bool
	id   string
	// state is the task's state spelled as 0.3 does (completed, input-required).
	state string
	text  string
}

// taskResult is a task answer of either version, whose differences are its
// arguments: the task's id, its state spelled as 0.3 does, its artifacts (A) and their
// parts (P, read by text), the parts of its status message (none: nil). Its text is
// the artifacts' text, then the status message's, a line each, the empty ones left
// out.
func taskResult[A, P any](id, state string, artifacts []A, parts func(A) P, status P, text func(P) string) peerResult {
	var out []string
	add := func(p P) {
		if s := text(p); s != "" {
			out = append(out, s)
		}
	}
	for _, a := range artifacts {
		add(parts(a))
	}
	add(status)
	return peerResult{task: true, id: id, state: state, text: strings.Join(out, "\n")}
}

// peerClient calls one peer.
type peerClient interface {
	// send sends text to the peer's skill (a blocking SendMessage).
	send(ctx context.Context, skill, text string) (peerResult, error)
	// get reads the task id.
	get(ctx context.Context, id string) (peerResult, error)
	Destroy() error
}

// running: the peer's task has not ended nor waits for its caller.
func running(state string) bool {
	return state == string(a2a.TaskStateSubmitted) || state == string(a2a.TaskStateWorking)
}

// call sends the model's message to the peer, naming the skill in the message's
// metadata, and waits for the answer: a blocking SendMessage, then, while the task it
// answers is still submitted or working (a peer bounds how long it blocks), GetTask
// polls until the task ends or needs input. A completed task's artifacts and status
// message, or the peer's reply message, are the result; a task that failed, was
// rejected or canceled, or waits for input, is a tool error. Every answer read is
// bounded by ResponseLimit(max_result_bytes).
func (p *Provider) call(ctx context.Context, c peerClient, peer, skill, argumentsJSON string) (string, bool) {
	var args struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(argumentsJSON), &args); err != nil || strings.TrimSpace(args.Message) == "" {
		return fmt.Sprintf("A2A skill %s of %s: the arguments must be an object with a non-empty \"message\" string", skill, peer), true
	}
	callCtx, cancel := context.WithTimeout(ctx, agent.OrDefault(p.CallTimeout, DefaultCallTimeout))
	defer cancel()
	limit := agent.OrDefault(p.MaxResultBytes, DefaultMaxResultBytes)
	n := agent.ResponseLimit(limit)
	// bounded runs one request under its own read limit.
	bounded := func(f func(context.Context) (peerResult, error)) (peerResult, *agent.TooLargeError, error) {
		rctx, stop := agent.WithReadLimit(callCtx, agent.ReadLimit{Message: n, Total: n})
		defer stop()
		res, err := f(rctx)
		if err == nil {
			err = checkResult(res)
		}
		return res, agent.TooLarge(rctx), err
	}
	res, tl, err := bounded(func(ctx context.Context) (peerResult, error) { return c.send(ctx, skill, args.Message) })
	for wait, failures := pollMin, 0; tl == nil && err == nil && res.task && running(res.state); {
		select {
		case <-callCtx.Done():
			err = callCtx.Err()
		case <-time.After(wait):
		}
		if err != nil {
			break
		}
		wait = min(2*wait, pollMax)
		id := res.id
		next, gtl, gerr := bounded(func(ctx context.Context) (peerResult, error) { return c.get(ctx, id) })
		if tl = gtl; tl != nil {
			break
		}
		if gerr != nil {
			if failures++; failures < maxPollErrors && callCtx.Err() == nil {
				continue
			}
			err = gerr
			break
		}
		res, failures = next, 0
	}
	if tl != nil {
		telemetry.FromContext(ctx).ToolLimit("a2a", "response_bytes")
		return fmt.Sprintf("A2A peer %s: skill %s failed: its answer is larger than %d bytes, the most this runtime reads for a result of at most %d bytes (a2a.max_result_bytes)", peer, skill, tl.Limit, limit), true
	}
	if err != nil {
		if errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			telemetry.FromContext(ctx).ToolLimit("a2a", "call_timeout")
			return fmt.Sprintf("A2A peer %s: skill %s timed out after %s (a2a.call_timeout)", peer, skill, agent.OrDefault(p.CallTimeout, DefaultCallTimeout)), true
		}
		if ctx.Err() != nil {
			return fmt.Sprintf("A2A peer %s: skill %s was cancelled: %v", peer, skill, err), true
		}
		return agent.Truncate(fmt.Sprintf("A2A peer %s: skill %s failed: %v", peer, skill, err), limit), true
	}
	if !res.task || res.state == string(a2a.TaskStateCompleted) {
		return agent.Truncate(res.text, limit), false
	}
	return agent.Truncate(strings.TrimSpace(fmt.Sprintf("the remote task %s ended %s. %s", res.id, res.state, res.text)), limit), true
}

// checkResult refuses a task answer whose id could not be sent back.
func checkResult(res peerResult) error {
	if res.task && (res.id == "" || len(res.id) > maxTaskIDBytes || strings.ContainsFunc(res.id, func(r rune) bool { return r < 0x21 || r == 0x7f })) {
		return fmt.Errorf("the peer answered a task whose id (%d bytes) is empty, longer than %d bytes or holds spaces or control characters", len(res.id), maxTaskIDBytes)
	}
	return nil
}

// v03Client speaks A2A 0.3 through the A2A project's Go client.
type v03Client struct{ c *a2aclient.Client }

func (v v03Client) send(ctx context.Context, skill, text string) (peerResult, error) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	msg.Metadata = map[string]any{"skill": skill}
	res, err := v.c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg, Metadata: map[string]any{"skill": skill}})
	if err != nil {
		return peerResult{}, err
	}
	switch r := res.(type) {
	case *a2a.Message:
		return peerResult{text: partsText(r.Parts)}, nil
	case *a2a.Task:
		return taskResult03(r), nil
	default:
		return peerResult{}, fmt.Errorf("unexpected A2A answer %T", res)
	}
}

func (v v03Client) get(ctx context.Context, id string) (peerResult, error) {
	zero := 0
	t, err := v.c.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(id), HistoryLength: &zero})
	if err != nil {
		return peerResult{}, err
	}
	return taskResult03(t), nil
}

func (v v03Client) Destroy() error { return v.c.Destroy() }

func taskResult03(t *a2a.Task) peerResult {
	var status a2a.ContentParts
	if m := t.Status.Message; m != nil {
		status = m.Parts
	}
	return taskResult(string(t.ID), string(t.Status.State), t.Artifacts, func(a *a2a.Artifact) a2a.ContentParts { return a.Parts }, status, partsText)
}

// partsText joins the text of parts; data parts as JSON, files by name.
func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case a2a.TextPart:
			out = append(out, p.Text)
		case *a2a.TextPart:
			out = append(out, p.Text)
		case a2a.DataPart:
			if b, err := json.Marshal(p.Data); err == nil {
				out = append(out, string(b))
			}
		case *a2a.DataPart:
			if b, err := json.Marshal(p.Data); err == nil {
				out = append(out, string(b))
			}
		default:
			out = append(out, fmt.Sprintf("[%T part]", p))
		}
	}
	return strings.Join(out, "\n")
}
