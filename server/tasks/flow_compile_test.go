package tasks

import (
	"strings"
	"testing"

	"github.com/agentplane/agentplane/server/config"
)

// TestCompileFlowRefuses: what server/config cannot check without CEL and the store's
// schema (ctl links config) is refused when the task manager compiles the flow section
// at boot, with the key's path.
func TestCompileFlowRefuses(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"flow: {queues: {default: {concurrency: {key: 'labels[', limit: 1}}}}", "flow.queues.default.concurrency.key: 1:"},
		{"flow: {queues: {default: {concurrency: {key: 'size(labels)', limit: 1}}}}", "must be string"},
		{"flow: {queues: {default: {rate: {on: start, per_second: 1, key: 'labels['}}}}", "flow.queues.default.rate.key: 1:"},
		{"flow: {queues: {'bad queue': {rate: {on: start, per_second: 1}}}}", "is not a queue name"},
	} {
		cfg := config.Default()
		if err := config.Parse([]byte(c.yaml), &cfg); err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: config refused it already (%v): move the row back to server/config", c.yaml, err)
		}
		_, err := compileFlow(cfg.Flow)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: compileFlow = %v; want an error with %q", c.yaml, err, c.want)
		}
	}
}
