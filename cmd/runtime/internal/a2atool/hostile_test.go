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
