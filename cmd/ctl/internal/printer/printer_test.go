package printer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestTextEscapesWhatATerminalObeys(t *testing.T) {
	for _, tc := range []struct{ in, text, block string }{
		{"plain ünïcödé, \\ and \"quotes\"", "plain ünïcödé, \\ and \"quotes\"", "plain ünïcödé, \\ and \"quotes\""},
		{"\x1b[2J\x1b[HAPPROVED", `\x1b[2J\x1b[HAPPROVED`, `\x1b[2J\x1b[HAPPROVED`},
		{"\x1b]0;title\x07", `\x1b]0;title\a`, `\x1b]0;title\a`},
		{"1000\r1\b\x7f", `1000\r1\b\x7f`, `1000\r1\b\x7f`},
		{"a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"\u009b31m", `\u009b31m`, `\u009b31m`},
		{"RUE \u202eEUR 1\u202c \u2066x\u2069 \u200f\u2028", `RUE \u202eEUR 1\u202c \u2066x\u2069 \u200f\u2028`, `RUE \u202eEUR 1\u202c \u2066x\u2069 \u200f\u2028`},
		{"bad \xff\xfe utf-8, kept \ufffd", `bad \xff\xfe utf-8, kept ` + "\ufffd", `bad \xff\xfe utf-8, kept ` + "\ufffd"},
	} {
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := Block(tc.in); got != tc.block {
			t.Errorf("Block(%q) = %q, want %q", tc.in, got, tc.block)
		}
	}
}

func TestRowEscapesCells(t *testing.T) {
	var b bytes.Buffer
	tab := NewTab(&b)
	tab.Row("k", "v\x1b[31m\nnext\trow\r")
	if err := tab.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "k  v\\x1b[31m next row\\r\n" {
		t.Fatalf("row %q", got)
	}
	if strings.ContainsRune(b.String(), 0x1b) {
		t.Fatal("raw ESC in a table")
	}
}

func TestLinesEscapesEachWrite(t *testing.T) {
	var b bytes.Buffer
	w := Lines(&b)
	for _, line := range []string{"t-1: tool x rejected: \x1b[2Jno\r\n", "t-1: completed\n"} {
		if n, err := w.Write([]byte(line)); err != nil || n != len(line) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := b.String(); got != "t-1: tool x rejected: \\x1b[2Jno\\r\nt-1: completed\n" {
		t.Fatalf("got %q", got)
	}
}

func TestJSONAndYAMLAreTerminalSafeAndExact(t *testing.T) {
	const nasty = "a\x1b[2J\r\b\x7f\u009b\u202eb\nc"
	msg := structpb.NewStringValue(nasty)
	for _, f := range []Format{JSON, YAML} {
		var b bytes.Buffer
		if err := (&Printer{Format: f, Out: &b}).Message(msg, nil); err != nil {
			t.Fatal(err)
		}
		if i := strings.IndexFunc(b.String(), func(r rune) bool { return unsafeRune(r, true) }); i >= 0 {
			t.Errorf("%s: raw %q in %q", f, b.String()[i:], b.String())
		}
		var back any
		if err := yaml.Unmarshal(b.Bytes(), &back); err != nil || back != nasty {
			t.Errorf("%s: %q reads back as %q (%v)", f, b.String(), back, err)
		}
	}
	var b bytes.Buffer
	if err := (&Printer{Format: YAML, Out: &b}).Message(structpb.NewStringValue("plain"), nil); err != nil || b.String() != "plain\n" {
		t.Errorf("plain YAML stays YAML: %q %v", b.String(), err)
	}
}
