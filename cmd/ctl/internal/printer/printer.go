// Package printer renders ctl output in one of three formats: a human table, JSON
// (protojson, one document per message), or YAML. Every command prints through it so
// that -o behaves the same everywhere. Text and Block escape what a terminal would
// obey (control characters, bidi overrides) in text meant for people.
package printer

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

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

// Message prints m as JSON or YAML, or calls table for the table format. JSON and
// YAML carry the data exactly, and are terminal-safe too: JSON escapes what a terminal
// would obey (jsonEscape), and YAML whose strings hold such characters is printed in
// its JSON form, which is YAML as well.
func (p *Printer) Message(m proto.Message, table func(t *Tab)) error {
	switch p.Format {
	case JSON:
		b, err := jsonOpts.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.Out, "%s\n", jsonEscape(b))
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
		if strings.IndexFunc(string(y), func(r rune) bool { return unsafeRune(r, true) }) >= 0 {
			// The YAML encoder writes such characters raw in plain scalars.
			if b, err = jsonOpts.Marshal(m); err != nil {
				return err
			}
			y = append(jsonEscape(b), '\n')
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
	_, err = fmt.Fprintf(p.Out, "%s\n", jsonEscape(b))
	return err
}

// jsonEscape rewrites what protojson leaves raw and a terminal would obey (DEL, C1,
// bidi controls, line separators: they can only occur inside strings) as \u escapes,
// which JSON reads back as the same characters.
func jsonEscape(b []byte) []byte {
	s := string(b)
	if strings.IndexFunc(s, func(r rune) bool { return unsafeRune(r, true) }) < 0 {
		return b
	}
	var out strings.Builder
	for _, r := range s {
		if unsafeRune(r, true) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}

// Tab is an aligned table.
type Tab struct {
	w *tabwriter.Writer
}

// NewTab starts a table on w.
func NewTab(w io.Writer) *Tab { return &Tab{w: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

// Row writes one row; cells are printed with %v, tabs and newlines in them replaced by
// spaces and every other character a terminal would obey escaped (Text).
func (t *Tab) Row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = Text(strings.NewReplacer("\t", " ", "\n", " ").Replace(fmt.Sprint(c)))
	}
	fmt.Fprintln(t.w, strings.Join(parts, "\t"))
}

// Flush writes the table.
func (t *Tab) Flush() error { return t.w.Flush() }

// Text makes s safe to print to a terminal on one line: control characters (C0
// including newline and tab, DEL, C1), bidirectional overrides and isolates, line and
// paragraph separators, and bytes that are not UTF-8 are written as Go escapes
// (\x1b, \r, \u202e, ...), so caller-controlled text can neither move the cursor,
// recolour, retitle or clear the screen, nor reorder what is shown around it. Every
// human-readable line ctl prints that carries text it did not write goes through Text
// or Block.
func Text(s string) string { return escape(s, false) }

// Block is Text for text laid out on several lines: newlines and tabs are kept,
// everything else Text escapes is escaped.
func Block(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || unsafeRune(r, keepLines) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case !unsafeRune(r, keepLines):
			b.WriteString(s[:n])
		case r == '\a':
			b.WriteString(`\a`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\v':
			b.WriteString(`\v`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		s = s[n:]
	}
	return b.String()
}

// unsafeRune reports whether a terminal would act on r rather than show it.
func unsafeRune(r rune, keepLines bool) bool {
	switch {
	case keepLines && (r == '\n' || r == '\t'):
		return false
	case unicode.IsControl(r): // C0, DEL, C1 (U+0080-U+009F: 8-bit CSI, OSC, ...)
		return true
	}
	switch r {
	case '\u061c', '\u200e', '\u200f', // Arabic letter mark, LRM, RLM
		'\u202a', '\u202b', '\u202c', '\u202d', '\u202e', // LRE, RLE, PDF, LRO, RLO
		'\u2066', '\u2067', '\u2068', '\u2069', // LRI, RLI, FSI, PDI
		'\u2028', '\u2029': // line and paragraph separators
		return true
	}
	return false
}

// Lines wraps w for code that prints one line per Write (the scripted runtime's
// progress log): each Write reaches w through Text, its final newline kept.
func Lines(w io.Writer) io.Writer { return lineWriter{w} }

type lineWriter struct{ w io.Writer }

func (l lineWriter) Write(p []byte) (int, error) {
	s := string(p)
	nl := strings.HasSuffix(s, "\n")
	s = Text(strings.TrimSuffix(s, "\n"))
	if nl {
		s += "\n"
	}
	if _, err := io.WriteString(l.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}
