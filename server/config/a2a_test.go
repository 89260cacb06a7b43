package config

import (
	"strings"
	"testing"
	"time"
)

// TestValidateA2A: every a2a key a deployment could get wrong stops the boot and is
// named.
func TestValidateA2A(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"defaults", func(*Config) {}, ""},
		{"public_url not http", func(c *Config) { c.A2A.PublicURL = "ftp://agents.example.com" }, "a2a.public_url"},
		{"public_url with query", func(c *Config) { c.A2A.PublicURL = "https://agents.example.com/?x=1" }, "a2a.public_url"},
		{"public_url fine", func(c *Config) { c.A2A.PublicURL = "https://agents.example.com/prefix" }, ""},
		{"default_agent unknown", func(c *Config) { c.A2A.DefaultAgent = "nobody" }, `a2a.default_agent "nobody"`},
		{"agents key unknown", func(c *Config) { c.A2A.Agents = map[string]A2AAgent{"nobody": {}} }, "a2a.agents.nobody"},
		{"agents queue", func(c *Config) { c.A2A.Agents = map[string]A2AAgent{"triager": {Queue: "-bad"}} }, "a2a.agents.triager.queue"},
		{"max_streams", func(c *Config) { c.A2A.MaxStreams = 0 }, "a2a.max_streams"},
		{"blocking_timeout", func(c *Config) { c.A2A.BlockingTimeout = Duration(time.Hour) }, "a2a.blocking_timeout"},
		{"webhook named like the push endpoint", func(c *Config) {
			c.Notifications.Webhooks = []Webhook{{Name: A2APushEndpoint, URL: "https://hooks.example.com/x", Events: []string{EventTaskEnded}, Format: FormatSlack}}
		}, "reserved for A2A push notifications"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			cfg.Spec.StaticAgents = map[string]string{"triager": "triager.yaml"}
			c.mutate(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error naming %s", err, c.want)
			}
		})
	}
	cfg := Default()
	if cfg.A2ADefaultAgent() != "" {
		t.Fatal("no static agent, yet a default agent")
	}
	cfg.Spec.StaticAgents = map[string]string{"triager": "t.yaml"}
	if cfg.A2ADefaultAgent() != "triager" {
		t.Fatal("the only static agent is not the default")
	}
	cfg.Spec.StaticAgents["reviewer"] = "r.yaml"
	if cfg.A2ADefaultAgent() != "" {
		t.Fatal("two static agents, none named, yet a default")
	}
}
