package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/server/auth"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

const repoRoot = "../../../.."

// specCorpus is every file in examples/ and testdata/specs/ that a user could hand
// to spec validate: the specs, the runtime scripts and the configuration (which are
// not specs, and must be refused the same way), and the testdata corpus.
func specCorpus(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"examples", "testdata/specs"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "node_modules" { // an example's installed packages
				return filepath.SkipDir
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json":
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 50 {
		t.Fatalf("only %d files in the corpora", len(files))
	}
	return files
}

// TestSpecValidateOfflineMatchesOnline validates every corpus file twice, once through
// a control plane booted on a configuration and once with --offline on the same file,
// and requires the same exit code, output and errors, as a table and as JSON.
func TestSpecValidateOfflineMatchesOnline(t *testing.T) {
	static, err := filepath.Abs(filepath.Join(repoRoot, "examples/with-static-agents/static"))
	if err != nil {
		t.Fatal(err)
	}
	tight := writeFile(t, "tight.yaml", "spec:\n  platform_max_depth: 3\n  static_agents:\n"+
		"    triager: "+filepath.Join(static, "triager.yaml")+"\n    reviewer: "+filepath.Join(static, "reviewer.yaml")+"\n"+
		"limits:\n  max_spec_bytes: 65536\n  max_spec_nesting: 32\ntenants:\n  default:\n    max_depth: 2\n")
	files := specCorpus(t)
	for _, tc := range []struct {
		name, config string
		extra        []string
	}{
		{"defaults", "", nil},
		{"examples config", filepath.Join(repoRoot, "examples/with-static-agents/controlplane.yaml"), nil},
		{"tight caps", tight, []string{"--tenant-max-depth", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			base := servertest.Config(t)
			cfg.DataDir, cfg.GRPCAddr, cfg.HTTPAddr, cfg.Log = base.DataDir, base.GRPCAddr, base.HTTPAddr, base.Log
			in := servertest.StartConfig(t, cfg)
			offline := []string{"--offline"}
			if tc.config != "" {
				offline = append(offline, "--config", tc.config)
			}
			valid, invalid := 0, 0
			for _, file := range files {
				for _, format := range []string{"table", "json"} {
					args := append([]string{"spec", "validate", "-o", format, file}, tc.extra...)
					onCode, onOut, onErr := runCtl(t, in.GRPCAddr, args...)
					offCode, offOut, offErr := runCtl(t, "127.0.0.1:1", append(args, offline...)...)
					if onCode != offCode || onOut != offOut || onErr != offErr {
						t.Errorf("%s -o %s differs\nonline  (exit %d):\n%s%s\noffline (exit %d):\n%s%s",
							file, format, onCode, onOut, onErr, offCode, offOut, offErr)
					}
					if format == "table" && onCode == 0 {
						valid++
					} else if format == "table" {
						invalid++
					}
				}
			}
			if valid == 0 || invalid == 0 {
				t.Fatalf("a corpus with %d valid and %d invalid files compares nothing worth comparing", valid, invalid)
			}
		})
	}
}

func TestSpecValidateOfflineFlags(t *testing.T) {
	if defaultTenant != auth.DefaultTenant {
		t.Fatalf("--tenant defaults to %q, single-user mode's tenant is %q", defaultTenant, auth.DefaultTenant)
	}
	good := writeFile(t, "good.yaml", goodAgent)
	for _, args := range [][]string{
		{"spec", "validate", "--config", "x.yaml", good},
		{"spec", "validate", "--tenant", "acme", good},
		{"spec", "validate", "--offline", "--config", filepath.Join(t.TempDir(), "missing.yaml"), good},
		{"spec", "validate", "--offline", "--config", writeFile(t, "bad.yaml", "spec: {platform_max_depht: 3}\n"), good},
	} {
		code, _, errOut := runCtl(t, "127.0.0.1:1", args...)
		if code != exitUsage || errOut == "" {
			t.Errorf("%q: want a usage error, got exit %d: %s", args, code, errOut)
		}
	}
	// No control plane listens on 127.0.0.1:1: --offline needs none.
	code, out, errOut := runCtl(t, "127.0.0.1:1", "spec", "validate", "--offline", good)
	if code != 0 || !strings.Contains(out, "valid AgentSpec") {
		t.Fatalf("offline: exit %d: %s%s", code, out, errOut)
	}
}

// TestExamplesValidateAsDocumented runs the validations README.md and
// examples/README.md show: the general examples on a control plane on its defaults,
// the static-agent ones with their configuration.
func TestExamplesValidateAsDocumented(t *testing.T) {
	glob := func(pattern string) []string {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: %v", pattern, err)
		}
		return m
	}
	in := servertest.Start(t, nil)
	args := append([]string{"spec", "validate"}, glob("examples/graphs/*.yaml")...)
	if code, out, errOut := runCtl(t, in.GRPCAddr, append(args, glob("examples/agents/*.yaml")...)...); code != 0 {
		t.Errorf("the general examples on a default control plane: exit %d\n%s%s", code, out, errOut)
	}
	args = append([]string{"spec", "validate", "--offline", "--config", filepath.Join(repoRoot, "examples/with-static-agents/controlplane.yaml")},
		glob("examples/with-static-agents/*/*.yaml")...)
	if code, out, errOut := runCtl(t, "127.0.0.1:1", args...); code != 0 {
		t.Errorf("the static-agent examples with their configuration: exit %d\n%s%s", code, out, errOut)
	}
}
