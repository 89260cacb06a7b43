// Package printer renders ctl output in one of three formats: a human table, JSON
// (protojson, one document per message), or YAML. Every command prints through it so
// that -o behaves the same everywhere.
package printer

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Format is an output format.
type Format string

// Formats.
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// ParseFormat validates a -o value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Table, JSON, YAML:
		return f, nil
	}
	return "", fmt.Errorf("unknown output format %q: want table, json or yaml", s)
}

// Printer writes to Out in Format.
type Printer struct {
	Format Format
	Out    io.Writer
}

var jsonOpts = protojson.MarshalOptions{Multiline: true, Indent: "  "}

// Message prints m as JSON or YAML, or calls table for the table format.
func (p *Printer) Message(m proto.Message, table func(t *Tab)) error {
	switch p.Format {
	case JSON:
		b, err := jsonOpts.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.Out, "%s\n", b)
		return err
	case YAML:
		b, err := protojson.Marshal(m)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = p.Out.Write(y)
		return err
	default:
		t := NewTab(p.Out)
		table(t)
		return t.Flush()
	}
}

// Line prints one compact JSON line per message (for streams with -o json).
func (p *Printer) Line(m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.Out, "%s\n", b)
	return err
}

// Tab is an aligned table.
type Tab struct {
	w *tabwriter.Writer
}

// NewTab starts a table on w.
func NewTab(w io.Writer) *Tab { return &Tab{w: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

// Row writes one row; cells are printed with %v and tabs/newlines in them replaced.
func (t *Tab) Row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(fmt.Sprint(c))
	}
	fmt.Fprintln(t.w, strings.Join(parts, "\t"))
}

// Flush writes the table.
func (t *Tab) Flush() error { return t.w.Flush() }
