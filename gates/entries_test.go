package gates

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func peer(name, url string) *agentplanev1.A2APeer { return &agentplanev1.A2APeer{Name: name, Url: url} }

func peers(n int) []*agentplanev1.A2APeer {
	out := make([]*agentplanev1.A2APeer, n)
	for i := range out {
		out[i] = peer(fmt.Sprintf("p%d", i), fmt.Sprintf("https://p%d.example.com/", i))
	}
	return out
}

type dropped = map[string]Reason

func dropMap(ds []*agentplanev1.DroppedEntry) dropped {
	out := dropped{}
	for _, d := range ds {
		out[d.GetName()] = Reason(d.GetReason())
	}
	return out
}

func TestValidateEntries(t *testing.T) {
	tests := []struct {
		name     string
		mode     Mode
		entries  []*agentplanev1.A2APeer
		wantKept []string
		wantDrop dropped
	}{
		{"all good", SingleUser, peers(3), []string{"p0", "p1", "p2"}, dropped{}},
		{"32 honoured", SingleUser, peers(32), names(peers(32)), dropped{}},
		{"33 becomes 32 and one named drop", SingleUser, peers(33), names(peers(32)), dropped{"p32": DropOverLimit}},
		{"over-limit dropped even when malformed", SingleUser, append(peers(32), peer("", "x")), names(peers(32)), dropped{"#32": DropOverLimit}},
		{"empty name", SingleUser, []*agentplanev1.A2APeer{peer("", "https://a.example.com/")}, nil, dropped{"#0": DropNameInvalid}},
		{"nil entry", SingleUser, []*agentplanev1.A2APeer{nil, peer("ok", "https://a.example.com/")}, []string{"ok"}, dropped{"#0": DropNameInvalid}},
		{"name with dot is not a tool segment", SingleUser, []*agentplanev1.A2APeer{peer("a.b", "https://a.example.com/")}, nil, dropped{"#0": DropNameInvalid}},
		{"double underscore", SingleUser, []*agentplanev1.A2APeer{peer("a__b", "https://a.example.com/")}, nil, dropped{"#0": DropNameInvalid}},
		{"duplicate, case-insensitive", SingleUser, []*agentplanev1.A2APeer{peer("GitHub", "https://a.example.com/"), peer("github", "https://b.example.com/")}, []string{"GitHub"}, dropped{"github": DropNameDuplicate}},
		{"malformed does not claim its name", SingleUser, []*agentplanev1.A2APeer{peer("x", "file:///etc/passwd"), peer("x", "https://b.example.com/")}, []string{"x"}, dropped{"x": DropURLScheme}},
		{"metadata", SingleUser, []*agentplanev1.A2APeer{peer("m", "http://169.254.169.254/")}, nil, dropped{"m": DropURLForbiddenHost}},
		{"loopback http single-user", SingleUser, []*agentplanev1.A2APeer{peer("l", "http://127.0.0.1:9/")}, []string{"l"}, dropped{}},
		{"loopback http multi-tenant", MultiTenant, []*agentplanev1.A2APeer{peer("l", "http://127.0.0.1:9/")}, nil, dropped{"l": DropURLPrivateHost}},
		{"credentials", SingleUser, []*agentplanev1.A2APeer{peer("c", "https://user:pass@example.com/")}, nil, dropped{"c": DropURLCredentials}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, drops := ValidateEntries(tt.mode, tt.entries)
			if got := names(kept); !slices.Equal(got, tt.wantKept) {
				t.Errorf("kept %v, want %v", got, tt.wantKept)
			}
			if got := dropMap(drops); fmt.Sprint(got) != fmt.Sprint(tt.wantDrop) || len(drops) != len(tt.wantDrop) {
				t.Errorf("dropped %v, want %v", got, tt.wantDrop)
			}
		})
	}
}

func TestOverLimitReportIsBounded(t *testing.T) {
	const n = 10000
	kept, drops := ValidateEntries(SingleUser, peers(n))
	if len(kept) != MaxCallerPeers {
		t.Fatalf("kept %d, want %d", len(kept), MaxCallerPeers)
	}
	if want := maxNamedOverLimit + 1; len(drops) != want {
		t.Fatalf("%d drop entries, want %d", len(drops), want)
	}
	last := drops[len(drops)-1]
	if want := fmt.Sprintf("#%d..#%d", MaxCallerPeers+maxNamedOverLimit, n-1); last.GetName() != want || last.GetReason() != string(DropOverLimit) {
		t.Fatalf("summary = %v, want %s over_limit", last, want)
	}
	if got := labels(peers(n)); len(got) != MaxCallerPeers+1 || got[MaxCallerPeers] != fmt.Sprintf("#%d..#%d", MaxCallerPeers, n-1) {
		t.Fatalf("ignored labels not bounded: %d, last %q", len(got), got[len(got)-1])
	}
}

func TestHeaders(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= MaxHeaders; i++ {
		many[fmt.Sprintf("X-H%d", i)] = "v"
	}
	atMax := map[string]string{}
	for i := 0; i < MaxHeaders; i++ {
		atMax[fmt.Sprintf("X-H%d", i)] = "v"
	}
	bigTotal := map[string]string{}
	for i := 0; i < 3; i++ {
		bigTotal[fmt.Sprintf("X-H%d", i)] = strings.Repeat("v", MaxHeaderValueBytes)
	}
	tests := []struct {
		name    string
		headers map[string]string
		want    Reason
	}{
		{"none", nil, ""},
		{"bearer", map[string]string{"Authorization": "Bearer abc"}, ""},
		{"at max count", atMax, ""},
		{"too many", many, DropHeadersTooMany},
		{"value at bound", map[string]string{"X-A": strings.Repeat("v", MaxHeaderValueBytes)}, ""},
		{"value too long", map[string]string{"X-A": strings.Repeat("v", MaxHeaderValueBytes+1)}, DropHeadersTooLarge},
		{"name too long", map[string]string{strings.Repeat("n", MaxHeaderNameBytes+1): "v"}, DropHeadersTooLarge},
		{"total too large", bigTotal, DropHeadersTooLarge},
		{"CRLF injection", map[string]string{"X-A": "v\r\nHost: evil"}, DropHeaderInvalid},
		{"NUL", map[string]string{"X-A": "v\x00"}, DropHeaderInvalid},
		{"bad name", map[string]string{"X A": "v"}, DropHeaderInvalid},
		{"empty name", map[string]string{"": "v"}, DropHeaderInvalid},
		{"host", map[string]string{"host": "169.254.169.254"}, DropHeaderReserved},
		{"proxy", map[string]string{"Proxy-Foo": "x"}, DropHeaderReserved},
		{"transfer-encoding", map[string]string{"Transfer-Encoding": "chunked"}, DropHeaderReserved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &agentplanev1.McpServer{Name: "s", Url: "https://s.example.com/", Headers: tt.headers}
			kept, drops := ValidateEntries(SingleUser, []*agentplanev1.McpServer{e})
			if tt.want == "" {
				if len(kept) != 1 || len(drops) != 0 {
					t.Fatalf("want kept, got drops %v", drops)
				}
				return
			}
			if len(drops) != 1 || drops[0].GetReason() != string(tt.want) {
				t.Fatalf("drops %v, want one %s", drops, tt.want)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"github": true, "My-Server_2": true, "a": true, "9": true, strings.Repeat("a", MaxNameBytes): true,
		"": false, strings.Repeat("a", MaxNameBytes+1): false, "a.b": false, "a__b": false, "_a": false,
		"a_": false, "-a": false, "a-": false, "a b": false, "é": false, "a/b": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestMergeBaselineWins(t *testing.T) {
	baseline := []*agentplanev1.A2APeer{peer("search", "https://search.corp.example/"), peer("crm", "https://crm.corp.example/")}
	tests := []struct {
		name       string
		gated      []*agentplanev1.A2APeer
		wantURLs   []string
		wantShadow []string
	}{
		{"nothing to add", nil, []string{"https://search.corp.example/", "https://crm.corp.example/"}, nil},
		{"add", []*agentplanev1.A2APeer{peer("mine", "https://mine.example/")},
			[]string{"https://search.corp.example/", "https://crm.corp.example/", "https://mine.example/"}, nil},
		{"shadow exact", []*agentplanev1.A2APeer{peer("search", "https://evil.example/")},
			[]string{"https://search.corp.example/", "https://crm.corp.example/"}, []string{"search"}},
		{"shadow by case", []*agentplanev1.A2APeer{peer("CRM", "https://evil.example/"), peer("mine", "https://mine.example/")},
			[]string{"https://search.corp.example/", "https://crm.corp.example/", "https://mine.example/"}, []string{"CRM"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(baseline)
			merged, drops := Merge(baseline, tt.gated)
			var urls []string
			for _, m := range merged {
				urls = append(urls, m.GetUrl())
			}
			if !slices.Equal(urls, tt.wantURLs) {
				t.Errorf("merged %v, want %v", urls, tt.wantURLs)
			}
			var shadow []string
			for _, d := range drops {
				if d.GetReason() != string(DropShadowsBaseline) {
					t.Errorf("drop %v, want reason %s", d, DropShadowsBaseline)
				}
				shadow = append(shadow, d.GetName())
			}
			if !slices.Equal(shadow, tt.wantShadow) {
				t.Errorf("shadow drops %v, want %v", shadow, tt.wantShadow)
			}
			if !slices.Equal(baseline, before) {
				t.Errorf("baseline modified")
			}
		})
	}
}

// TestResolveReportsShadowingAndDrops runs the request path end to end in
// single-user mode: malformed entries, a shadowing attempt and the cap all show up
// in one entries_dropped event for the right protocol.
func TestResolveReportsShadowingAndDrops(t *testing.T) {
	policy, err := NewPolicy(Config{A2aPeers: []*agentplanev1.A2APeer{peer("search", "https://search.corp.example/")}})
	if err != nil {
		t.Fatal(err)
	}
	list := append([]*agentplanev1.A2APeer{peer("search", "https://evil.example/"), peer("meta", "http://169.254.169.254/")}, peers(31)...)
	st, err := ResolveStartTask(policy.For("default"), &agentplanev1.StartTaskRequest{A2APeers: &agentplanev1.A2APeerList{Peers: list}})
	if err != nil {
		t.Fatal(err)
	}
	got := names(st.A2a.Effective)
	if want := append([]string{"search"}, names(peers(30))...); !slices.Equal(got, want) {
		t.Fatalf("effective %v, want %v", got, want)
	}
	if st.A2a.Effective[0].GetUrl() != "https://search.corp.example/" {
		t.Fatalf("baseline shadowed: %v", st.A2a.Effective[0])
	}
	if len(st.Events) != 1 || st.Events[0].GetEntriesDropped().GetProtocol() != ProtocolA2a {
		t.Fatalf("events %v, want one a2a entries_dropped", st.Events)
	}
	want := dropped{"meta": DropURLForbiddenHost, "p30": DropOverLimit, "search": DropShadowsBaseline}
	if got := dropMap(st.Events[0].GetEntriesDropped().GetEntries()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dropped %v, want %v", got, want)
	}
}
