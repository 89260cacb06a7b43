package printer

import (
	"bytes"
	"strings"
	"testing"
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
