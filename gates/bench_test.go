package gates

import (
	"fmt"
	"testing"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// BenchmarkResolveStartTask measures the gates' work for a full request: 32 MCP
// servers and 32 A2A peers, each with two headers, over a baseline of 4 each.
func BenchmarkResolveStartTask(b *testing.B) {
	cfg := Config{}
	req := &agentplanev1.StartTaskRequest{McpServers: &agentplanev1.McpServerList{}, A2APeers: &agentplanev1.A2APeerList{}}
	hdr := map[string]string{"Authorization": "Bearer x", "X-Tenant": "acme"}
	for i := 0; i < 4; i++ {
		cfg.McpServers = append(cfg.McpServers, &agentplanev1.McpServer{Name: fmt.Sprintf("base%d", i), Url: "https://mcp.corp.example/"})
		cfg.A2aPeers = append(cfg.A2aPeers, &agentplanev1.A2APeer{Name: fmt.Sprintf("base%d", i), Url: "https://a2a.corp.example/"})
	}
	for i := 0; i < MaxCallerPeers; i++ {
		req.McpServers.Servers = append(req.McpServers.Servers, &agentplanev1.McpServer{Name: fmt.Sprintf("s%d", i), Url: fmt.Sprintf("https://s%d.example.com/mcp", i), Headers: hdr})
		req.A2APeers.Peers = append(req.A2APeers.Peers, &agentplanev1.A2APeer{Name: fmt.Sprintf("p%d", i), Url: fmt.Sprintf("https://[2001:4860::%x]/", i+1), Headers: hdr})
	}
	policy, err := NewPolicy(cfg)
	if err != nil {
		b.Fatal(err)
	}
	d := policy.For("default")
	b.ReportAllocs()
	for b.Loop() {
		st, err := ResolveStartTask(d, req)
		if err != nil || len(st.Mcp.Effective) != 4+MaxCallerPeers {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckURL(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := CheckURL("https://mcp.example.com:8443/v1/sse?x=1", MultiTenant); !ok {
			b.Fatal("refused")
		}
	}
}
