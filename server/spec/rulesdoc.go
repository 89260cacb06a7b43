package spec

import (
	"bytes"
	"fmt"
	"strings"
)

// RulesMarkdown renders the catalogue as the Markdown page docs/rules.md.
func RulesMarkdown() []byte {
	var b bytes.Buffer
	b.WriteString("<!-- Generated from server/spec/rules.go; do not edit.\n")
	b.WriteString("     Regenerate: go test ./server/spec -run TestRulesDoc -update -->\n\n")
	b.WriteString("# qar/v1 spec rules\n\n")
	b.WriteString("Every violation the validator reports names one of these rules, with an RFC 6901 JSON pointer\n")
	b.WriteString("into the spec and a message. Errors invalidate a spec; warnings do not. `ctl spec explain RULE_ID`\n")
	b.WriteString("prints one entry; `SpecService.ListRules` serves them all.\n\n")
	b.WriteString("Families: `D10` agent, `D11` graph topology (and verdicts), `D13` limits and nesting, `DOC` document syntax.\n")
	b.WriteString("The failing examples assume a deployment with a platform nesting cap of 3, one static agent\n")
	b.WriteString("`reviewer`, a 4 KiB document limit and a nesting limit of 32.\n\n")
	b.WriteString("| id | severity | scope | summary |\n| --- | --- | --- | --- |\n")
	for _, r := range catalogue {
		fmt.Fprintf(&b, "| [%s](#%s) | %s | %s | %s |\n", r.id, strings.ToLower(r.id), severityName(r.warning), r.scope, escapeTable(r.summary))
	}
	for _, r := range catalogue {
		fmt.Fprintf(&b, "\n## %s\n\n**%s** (%s, %s)\n\n%s\n\nFailing example:\n\n```%s\n%s\n```\n",
			r.id, r.summary, severityName(r.warning), r.scope, r.description, exampleLang(r.example), strings.TrimRight(r.example, "\n"))
	}
	return b.Bytes()
}

func severityName(warning bool) string {
	if warning {
		return "warning"
	}
	return "error"
}

func exampleLang(ex string) string {
	if strings.HasPrefix(ex, "{") {
		return "json"
	}
	return "yaml"
}

func escapeTable(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
