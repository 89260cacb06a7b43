package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// LoadStaticAgents reads the deployment's static agent table: files maps an agent id
// to a file holding an AgentSpec document (JSON or YAML, by extension or content),
// relative to baseDir unless absolute. Every file is decoded and validated against
// the table itself (a static agent may spawn another by agent_id), and a spawn cycle
// among static agents is refused because its resolved spec would be infinite. All
// problems are reported together, each as "file:line:col: RULE path: message".
func LoadStaticAgents(files map[string]string, baseDir string) (map[string]*agentplanev1.AgentSpec, error) {
	table := make(map[string]*agentplanev1.AgentSpec, len(files))
	docs := make(map[string][]byte, len(files))
	names := make(map[string]string, len(files))
	var errs []error
	ids := mapKeys(files)
	for _, id := range ids {
		name := files[id]
		if !filepath.IsAbs(name) {
			name = filepath.Join(baseDir, name)
		}
		names[id] = name
		data, err := os.ReadFile(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("static agent %q: %w", id, err))
			continue
		}
		doc := Decode(data, formatOf(name, data), Limits{})
		if doc.Kind != KindAgent {
			msg := "is not an AgentSpec document"
			if vs := doc.Violations(); doc.Kind == "" && len(vs) > 0 {
				msg = FormatViolation(name, vs[0])
			}
			errs = append(errs, fmt.Errorf("static agent %q: %s", id, msg))
			continue
		}
		table[id], docs[id] = doc.Agent, data
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	v := NewValidator(Deployment{StaticAgents: table})
	for _, id := range ids {
		res, err := v.Validate(Input{Document: docs[id], Format: formatOf(names[id], docs[id])})
		if err != nil {
			return nil, err
		}
		if !res.Valid() {
			lines := make([]string, len(res.Errors))
			for i, e := range res.Errors {
				lines[i] = FormatViolation(names[id], e)
			}
			errs = append(errs, fmt.Errorf("static agent %q is invalid:\n%s", id, strings.Join(lines, "\n")))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, spawnCycles(table)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return table, nil
}

func formatOf(name string, data []byte) agentplanev1.DocumentFormat {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return agentplanev1.DocumentFormat_DOCUMENT_FORMAT_JSON
	case ".yaml", ".yml":
		return agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML
	}
	return DetectFormat(data)
}

// spawnCycles finds static agents that spawn themselves through agent_id references.
func spawnCycles(table map[string]*agentplanev1.AgentSpec) []error {
	var errs []error
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(id string)
	visit = func(id string) {
		state[id] = active
		stack = append(stack, id)
		for _, next := range spawnIDs(table[id]) {
			switch state[next] {
			case active:
				cycle := append(slices.Clone(stack[slices.Index(stack, next):]), next)
				errs = append(errs, fmt.Errorf("static agents spawn each other in a cycle (%s); a runtime cannot be handed an infinite spec", strings.Join(cycle, " -> ")))
			case unvisited:
				if _, ok := table[next]; ok {
					visit(next)
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = done
	}
	for _, id := range mapKeys(table) {
		if state[id] == unvisited {
			visit(id)
		}
	}
	return errs
}

// spawnIDs lists the static ids a spec spawns, including through inline spawnables.
func spawnIDs(a *agentplanev1.AgentSpec) []string {
	var out []string
	for _, s := range a.GetSpawnableAgents() {
		if s != nil && s.AgentId != nil {
			out = append(out, s.GetAgentId())
		}
		out = append(out, spawnIDs(s.GetSpec())...)
	}
	return out
}
