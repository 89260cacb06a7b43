// Command errdoc writes the reason table of docs/errors.md from the declaration of
// agentplane.v1.ErrorReason (proto/agentplane/v1/errors.proto): each value's wire
// string, codes and retry class (its error_reason option) and its comment. It reads a
// buf image with source info on stdin and rewrites, in the Markdown file named by its
// argument, the part between the BEGIN and END GENERATED markers:
//
//	go tool -modfile=tools/buf/go.mod buf build proto -o - | go run ./tools/errdoc docs/errors.md
//
// .ci/run runs it and fails when the file changes.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

const (
	protoFile = "agentplane/v1/errors.proto"
	enumName  = "ErrorReason"
	begin     = "<!-- BEGIN GENERATED: reasons (tools/errdoc, from proto/agentplane/v1/errors.proto; do not edit) -->"
	end       = "<!-- END GENERATED: reasons -->"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: buf build proto -o - | errdoc docs/errors.md")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "errdoc:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, path string) error {
	raw, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	// A buf image is a FileDescriptorSet with extra fields; the error_reason option
	// resolves through the generated package.
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return fmt.Errorf("reading the image: %w", err)
	}
	table, err := render(&set)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, begin, end)
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), "\n"+table...), doc[j:]...)
	return os.WriteFile(path, out, 0o644)
}

func render(set *descriptorpb.FileDescriptorSet) (string, error) {
	for _, f := range set.GetFile() {
		if f.GetName() != protoFile {
			continue
		}
		comments := map[string]string{}
		for _, loc := range f.GetSourceCodeInfo().GetLocation() {
			comments[fmt.Sprint(loc.GetPath())] = loc.GetLeadingComments()
		}
		for ei, e := range f.GetEnumType() {
			if e.GetName() != enumName {
				continue
			}
			var b strings.Builder
			b.WriteString("| reason | enum value | code | retryable | when |\n| --- | --- | --- | --- | --- |\n")
			for vi, v := range e.GetValue() {
				if v.GetNumber() == 0 {
					continue
				}
				opts, _ := proto.GetExtension(v.GetOptions(), agentplanev1.E_ErrorReason).(*agentplanev1.ErrorReasonOptions)
				if opts.GetWire() == "" {
					return "", fmt.Errorf("%s has no error_reason option", v.GetName())
				}
				// Path of the value: enum_type (5), index, value (2), index.
				when := oneLine(comments[fmt.Sprint([]int32{5, int32(ei), 2, int32(vi)})])
				if when == "" {
					return "", fmt.Errorf("%s has no comment", v.GetName())
				}
				retry := "no"
				if opts.GetRetryable() {
					retry = "**yes**"
				}
				fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", opts.GetWire(), v.GetName(),
					strings.Join(opts.GetCodes(), ", "), retry, when)
			}
			return b.String(), nil
		}
	}
	return "", fmt.Errorf("no enum %s in %s in the image (was it built from proto/ with source info?)", enumName, protoFile)
}

// oneLine joins a proto comment into one Markdown table cell.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
