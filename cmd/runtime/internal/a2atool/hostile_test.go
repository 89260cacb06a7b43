package a2atool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/cmd/runtime/internal/agent"
	"github.com/agentplane/agentplane/cmd/runtime/internal/agenttest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// hostilePeer serves, by hand, an A2A peer that lies: under /ok a card with odd and
// clashing skill ids, a 100 KiB description and more skills than MaxSkills, whose
// "flood" skill answers 400 MiB; under /big a card of 2 MiB.
func hostilePeer(t *testing.T) string {
	var hs *httptest.Server
	hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/big/.well-known/agent-card.json":
			writeRepeated(w, fmt.Sprintf(`{"name":"big","url":%q,"description":"`, hs.URL+"/big/rpc"), 'x', 2<<20, `"}`)
		case strings.HasSuffix(r.URL.Path, "/.well-known/agent-card.json"):
			skills := []map[string]any{
				{"id": "ask", "name": "Ask", "description": strings.Repeat("d", 100<<10)},
				{"id": "flood", "name": "Flood"},
				{"id": "bad id\n", "name": "Bad"}, {"id": "x.y", "name": "X"}, {"id": "x_y", "name": "X"},
			}
			for i := len(skills); i < 100; i++ {
				skills = append(skills, map[string]any{"id": fmt.Sprintf("s%d", i), "name": "S"})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "hostile", "url": hs.URL + "/ok/rpc", "preferredTransport": "JSONRPC", "skills": skills})
		default:
			var req struct {
				ID     any `json:"id"`
				Params struct {
					Metadata map[string]any `json:"metadata"`
				} `json:"params"`
			}
			_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
			id, _ := json.Marshal(req.ID)
			prefix := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"kind":"message","messageId":"m1","role":"agent","parts":[{"kind":"text","text":"`, id)
			n := 4
			if req.Params.Metadata["skill"] == "flood" {
				n = 400 << 20
			}
			writeRepeated(w, prefix, 'y', n, `"}]}}`)
		}
	}))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return hs.URL
}

// writeRepeated writes prefix, n bytes of c, then suffix, holding a chunk at most.
func writeRepeated(w io.Writer, prefix string, c byte, n int, suffix string) {
	_, _ = io.WriteString(w, prefix)
	chunk := bytes.Repeat([]byte{c}, 64<<10)
	for n > 0 {
		b := chunk[:min(n, len(chunk))]
		if _, err := w.Write(b); err != nil {
			return
		}
		n -= len(b)
	}
	_, _ = io.WriteString(w, suffix)
}

// TestHostilePeer: a card over 1 MiB skips its peer; of a card's skills, the first
// MaxSkills with valid, unique ids are offered (descriptions cut) and the rest named
// in a note; a 400 MiB answer fails its call with a tool error, and the peer's next
// call works.
func TestHostilePeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := hostilePeer(t)
	var rec agenttest.Notes
	tools, release, err := (&Provider{}).MountPeers(ctx, []*agentplanev1.A2APeer{{Name: "big", Url: base + "/big"}, {Name: "evil", Url: base + "/ok"}}, quiet, rec.Note)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := map[string]*agent.RemoteTool{}
	for _, rt := range tools {
		m[rt.GateName] = rt
	}
	if len(tools) != MaxSkills-3 || m["a2a__evil__ask"] == nil || m["a2a__evil__flood"] == nil || m["a2a__evil__x.y"] != nil {
		t.Errorf("mounted %d skills, want %d: the first %d less the bad and the clashing ids", len(tools), MaxSkills-3, MaxSkills)
	}
	if d := m["a2a__evil__ask"].Description; len(d) > maxDescriptionBytes+200 || !strings.Contains(d, "[description truncated at 4096 bytes]") {
		t.Errorf("ask's description is %d bytes, want cut and marked", len(d))
	}
	if len(rec.Texts) != 2 || !strings.Contains(rec.Texts[0], "A2A peer big unavailable") || !strings.Contains(rec.Texts[0], "larger than 1048576 bytes") ||
		!strings.Contains(rec.Texts[1], "4 listed tools not offered") || !strings.Contains(rec.Texts[1], `"a2a__evil__bad id\n"`) || !strings.Contains(rec.Texts[1], "only the first 64") {
		t.Errorf("notes %q", rec.Texts)
	}
	res, isErr := m["a2a__evil__flood"].Run(ctx, `{"message":"go"}`)
	if want := "its answer is larger than 196608 bytes"; !isErr || !strings.Contains(res, want) {
		t.Errorf("flood answered %.200q (error %v), want a tool error saying %q", res, isErr, want)
	}
	if res, isErr := m["a2a__evil__ask"].Run(ctx, `{"message":"go"}`); isErr || res != "yyyy" {
		t.Errorf("ask answered %.200q (error %v)", res, isErr)
	}
}

// hostileV10Peer serves, by hand, an A2A v1.0 peer (its card lists only 1.0's
// supportedInterfaces) whose skills each misbehave in one way; it fails the test on a
// call without A2A-Version: 1.0.
func hostileV10Peer(t *testing.T) string {
	var hs *httptest.Server
	hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/.well-known/agent-card.json") {
			var skills []map[string]any
			for _, id := range []string{"ok", "flood", "pollflood", "garbage", "wrongid", "longid", "noresult", "error", "forever", "failed", "swap"} {
				skills = append(skills, map[string]any{"id": id, "name": id})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "hostile", "skills": skills,
				"supportedInterfaces": []map[string]any{{"url": hs.URL + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}})
			return
		}
		if v := r.Header.Get("A2A-Version"); v != "1.0" {
			t.Errorf("%s: A2A-Version %q, want 1.0", r.URL.Path, v)
		}
		var req struct {
			ID     int64  `json:"id"`
			Method string `json:"method"`
			Params struct {
				ID       string         `json:"id"`
				Metadata map[string]any `json:"metadata"`
			} `json:"params"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
		skill, _ := req.Params.Metadata["skill"].(string)
		if req.Method == "GetTask" {
			skill = strings.TrimPrefix(req.Params.ID, "t-")
		}
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, req.ID)
		task := func(id, state string) string {
			return head + fmt.Sprintf(`"result":{"task":{"id":%q,"contextId":"c","status":{"state":%q}}}}`, id, state)
		}
		switch {
		case req.Method == "GetTask" && skill == "pollflood":
			writeRepeated(w, head+`"result":{"id":"t-pollflood","status":{"state":"TASK_STATE_WORKING"},"artifacts":[{"parts":[{"text":"`, 'y', 400<<20, `"}]}]}}`)
		case req.Method == "GetTask" && skill == "forever":
			_, _ = io.WriteString(w, head+`"result":{"id":"t-forever","status":{"state":"TASK_STATE_WORKING"}}}`)
		case req.Method == "GetTask":
			_, _ = io.WriteString(w, head+`"result":{"id":"t-other","status":{"state":"TASK_STATE_COMPLETED"}}}`)
		case skill == "ok":
			_, _ = io.WriteString(w, head+`"result":{"task":{"id":"t-ok","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a","parts":[{"text":"fine"},{"data":{"n": 1}}]}]}}}`)
		case skill == "flood":
			writeRepeated(w, head+`"result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"`, 'y', 400<<20, `"}]}}}`)
		case skill == "pollflood", skill == "forever", skill == "swap":
			_, _ = io.WriteString(w, task("t-"+skill, "TASK_STATE_WORKING"))
		case skill == "garbage":
			writeRepeated(w, "", 0xff, 1000, "")
		case skill == "wrongid":
			_, _ = io.WriteString(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"message":{"parts":[{"text":"not yours"}]}}}`, req.ID+7))
		case skill == "longid":
			_, _ = io.WriteString(w, task(strings.Repeat("i", 10<<10), "TASK_STATE_WORKING"))
		case skill == "noresult":
			_, _ = io.WriteString(w, head+`"result":null}`)
		case skill == "error":
			w.WriteHeader(http.StatusInternalServerError)
			writeRepeated(w, head+`"error":{"code":-32603,"message":"`, 'e', 100<<10, `"}}`)
		case skill == "failed":
			_, _ = io.WriteString(w, head+`"result":{"task":{"id":"t-failed","status":{"state":"TASK_STATE_FAILED","message":{"role":"ROLE_AGENT","parts":[{"text":"no such order"}]}}}}}`)
		}
	}))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return hs.URL
}

// TestHostileV10Peer: every misbehaviour of a v1.0 peer is a tool error the model
// reads, bounded: 400 MiB answers (to SendMessage, and to a later GetTask poll) are
// cut at the read limit, malformed and mismatched answers are refused, a huge error
// message is cut, a task that never ends times out; a sane call still works.
func TestHostileV10Peer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tools, release, err := (&Provider{CallTimeout: 3 * time.Second}).MountPeers(ctx, []*agentplanev1.A2APeer{{Name: "evil", Url: hostileV10Peer(t)}}, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := map[string]*agent.RemoteTool{}
	for _, rt := range tools {
		m[strings.TrimPrefix(rt.GateName, "a2a__evil__")] = rt
	}
	for skill, want := range map[string]string{
		"flood":     "its answer is larger than 196608 bytes",
		"pollflood": "its answer is larger than 196608 bytes",
		"garbage":   "SendMessage: the peer's answer is not a JSON-RPC 2.0 response",
		"wrongid":   "SendMessage: the peer answered another request",
		"longid":    "the peer answered a task whose id (10240 bytes)",
		"noresult":  "SendMessage: the peer's answer has no result",
		"error":     "[message truncated at 1024 bytes]",
		"forever":   "timed out after 3s (a2a.call_timeout)",
		"failed":    "the remote task t-failed ended failed. no such order",
		"swap":      "GetTask answered another task",
	} {
		if m[skill] == nil {
			t.Fatalf("skill %s not mounted (%d tools)", skill, len(tools))
		}
		res, isErr := m[skill].Run(ctx, `{"message":"go"}`)
		if !isErr || !strings.Contains(res, want) || len(res) > 4<<10 {
			t.Errorf("%s answered %.300q (%d bytes, error %v), want a short tool error saying %q", skill, res, len(res), isErr, want)
		}
	}
	if res, isErr := m["ok"].Run(ctx, `{"message":"go"}`); isErr || res != "fine\n{\"n\":1}" {
		t.Errorf("ok answered %.200q (error %v)", res, isErr)
	}
}
