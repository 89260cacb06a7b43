package client_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetFiles are the tests whose regions docs/clients.md shows: each region runs in
// its language's suite (this package's tests, go test ./sdk for TypeScript and Python).
var snippetFiles = []string{
	"client/task_test.go",
	"sdk/typescript/test/helpers.test.ts",
	"sdk/python/tests/test_helpers.py",
}

// helpersSection is the part of docs/clients.md in which every code block must be a
// snippet that a test runs.
const helpersSection = "## Tasks and decisions"

// TestDocSnippets keeps docs/clients.md and the tests it quotes in step: a code block
// after `<!-- snippet: FILE NAME -->` must be exactly the region NAME of FILE (between
// the comments "snippet: NAME" and "end snippet", less their common indentation),
// every region must be in the doc, and every code block of the helpers' section must be
// such a snippet. Edit the test, then paste the region into the doc (or the reverse).
func TestDocSnippets(t *testing.T) {
	doc := read(t, "docs/clients.md")
	regions := map[string]string{} // "FILE NAME" -> text
	for _, f := range snippetFiles {
		for name, text := range parseRegions(t, f, read(t, f)) {
			regions[f+" "+name] = text
		}
	}
	shown := map[string]bool{}
	marker := regexp.MustCompile("(?m)^<!-- snippet: (\\S+ \\S+) -->\n```[a-z]*\n((?s:.*?))```\n")
	for _, m := range marker.FindAllStringSubmatch(doc, -1) {
		want, ok := regions[m[1]]
		if !ok {
			t.Errorf("docs/clients.md shows snippet %q, which no test has", m[1])
			continue
		}
		if m[2] != want {
			t.Errorf("docs/clients.md: snippet %q differs from the test's region; the test has:\n%s", m[1], want)
		}
		shown[m[1]] = true
	}
	for key := range regions {
		if !shown[key] {
			t.Errorf("the test region %q is not in docs/clients.md (after <!-- snippet: %s -->)", key, key)
		}
	}
	start := strings.Index(doc, "\n"+helpersSection+"\n")
	if start < 0 {
		t.Fatalf("docs/clients.md has no %q section", helpersSection)
	}
	section := doc[start+1:]
	if end := strings.Index(section[len(helpersSection):], "\n## "); end >= 0 {
		section = section[:len(helpersSection)+end]
	}
	fences := regexp.MustCompile("(?m)^```[a-z]*$").FindAllStringIndex(section, -1)
	snippetLine := regexp.MustCompile(`(?m)^<!-- snippet: \S+ \S+ -->\n\z`)
	for i := 0; i < len(fences); i += 2 { // opening fences
		if !snippetLine.MatchString(section[:fences[i][0]]) {
			t.Errorf("docs/clients.md %s: a code block that no test runs:\n%s", helpersSection, section[fences[i][0]:min(len(section), fences[i][1]+200)])
		}
	}
	if len(shown) < 9 {
		t.Errorf("docs/clients.md shows %d snippets, want approve, continue and tool outputs in three languages", len(shown))
	}
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parseRegions returns the regions of a test file by name, dedented.
func parseRegions(t *testing.T, file, text string) map[string]string {
	t.Helper()
	begin := regexp.MustCompile(`^\s*(?://|#) snippet: (\S+)$`)
	end := regexp.MustCompile(`^\s*(?://|#) end snippet$`)
	regions := map[string]string{}
	var name string
	var lines []string
	for i, line := range strings.Split(text, "\n") {
		switch m := begin.FindStringSubmatch(line); {
		case m != nil:
			if name != "" {
				t.Fatalf("%s:%d: snippet %q inside %q", file, i+1, m[1], name)
			}
			name, lines = m[1], nil
		case end.MatchString(line):
			if name == "" {
				t.Fatalf("%s:%d: end snippet without a start", file, i+1)
			}
			if _, dup := regions[name]; dup {
				t.Fatalf("%s: two snippets named %q", file, name)
			}
			regions[name] = dedent(lines)
			name = ""
		case name != "":
			lines = append(lines, line)
		}
	}
	if name != "" {
		t.Fatalf("%s: snippet %q has no end", file, name)
	}
	return regions
}

func dedent(lines []string) string {
	prefix, set := "", false
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if !set {
			prefix, set = indent, true
		}
		for !strings.HasPrefix(indent, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimPrefix(l, prefix))
		b.WriteByte('\n')
	}
	return b.String()
}
