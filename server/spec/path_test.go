package spec

import (
	"slices"
	"testing"
)

func TestPathString(t *testing.T) {
	var root *Path
	tests := []struct {
		name string
		p    *Path
		want string
	}{
		{"root", root, ""},
		{"child", root.Child("agents").Child("lead"), "/agents/lead"},
		{"slash is ~1", root.Child("agents").Child("a/b"), "/agents/a~1b"},
		{"tilde is ~0", root.Child("agents").Child("x~y"), "/agents/x~0y"},
		{"tilde then one", root.Child("~1"), "/~01"},
		{"index", root.Child("tools").Index(12).Child("function"), "/tools/12/function"},
		{"empty key", root.Child(""), "/"},
		{"prefix", NewPath("/args/verdict").Child("confidence"), "/args/verdict/confidence"},
		{"empty prefix", NewPath("").Child("x"), "/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.String(); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSplitPointer(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"/", []string{""}, true},
		{"/agents/a~1b/spec", []string{"agents", "a/b", "spec"}, true},
		{"/x~0y", []string{"x~y"}, true},
		{"/~01", []string{"~1"}, true},
		{"agents", nil, false},
		{"/a~2", nil, false},
		{"/a~", nil, false},
	}
	for _, tt := range tests {
		got, ok := splitPointer(tt.in)
		if ok != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("splitPointer(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestPathRoundTrip: a segment survives escaping and unescaping.
func TestPathRoundTrip(t *testing.T) {
	for _, seg := range []string{"plain", "a/b", "~", "~0", "/~1/", "", "ü/ß"} {
		ptr := (*Path)(nil).Child(seg).String()
		got, ok := splitPointer(ptr)
		if !ok || len(got) != 1 || got[0] != seg {
			t.Errorf("segment %q -> %q -> %q", seg, ptr, got)
		}
	}
}
