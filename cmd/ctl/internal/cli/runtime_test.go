package cli

import (
	"strings"
	"testing"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/client/worker/workertest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

func TestRuntimeRunOncePlaysTheScript(t *testing.T) {
	f := workertest.New(t)
	f.Enqueue("t1", func(l *agentplanev1.Lease) { l.Task.Input = client.UserText("weather in Paris?") })
	code, out, errOut := runCtl(t, f.Addr(), "runtime", "run", "--script", "../../../../examples/runtime/hello.yaml", "--once", "--runtime-id", "rt-test")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"runtime rt-test: playing hello.yaml (4 steps)",
		`t1: say "Hello! You asked: weather in Paris?"`,
		"t1: tool get_weather allowed; reporting its result",
		"t1: completed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var s workertest.State
	f.Do(func(st *workertest.State) { s = *st })
	if s.Ends["t1"] != workertest.Completed || len(s.Events["t1"]) != 4 || client.MessageText(s.Outputs["t1"].GetMessage()) != "It is 21°C and clear in Paris." {
		t.Fatalf("end %q events %d output %v", s.Ends["t1"], len(s.Events["t1"]), s.Outputs["t1"])
	}
}

func TestRuntimeRunRefusesABadScript(t *testing.T) {
	bad := writeFile(t, "bad.yaml", "steps:\n  - say: hi\n  - tool: {args: {}}\n")
	code, _, errOut := runCtl(t, "127.0.0.1:1", "runtime", "run", "--script", bad)
	for _, want := range []string{"bad.yaml:3: step 2: tool needs a name", "the last step must be complete or fail"} {
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut)
		}
	}
	if code, _, _ := runCtl(t, "127.0.0.1:1", "runtime", "run"); code != exitUsage {
		t.Errorf("run without --script: exit %d", code)
	}
}
