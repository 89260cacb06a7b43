package spec

import (
	"strconv"
	"strings"
)

// Path is a location in a spec, built from the root down the way Kubernetes builds a
// field.Path: validators take the path they are at and hand children to the functions
// they call, so a violation knows where it is without any lookup. A nil *Path is the
// root (the empty JSON pointer).
//
// Paths are immutable and cheap to extend; String renders them as RFC 6901 pointers.
type Path struct {
	parent *Path
	// seg is the already-escaped pointer segment (without the leading '/').
	seg string
}

// NewPath returns the path of the RFC 6901 pointer ptr, which must be "" or start
// with '/'. It is used by callers that validate a value embedded somewhere else,
// such as a verdict inside a tool call's arguments.
func NewPath(ptr string) *Path {
	if ptr == "" {
		return nil
	}
	// The pointer is kept as one pre-escaped segment: String only concatenates.
	return &Path{seg: strings.TrimPrefix(ptr, "/")}
}

// Child returns the path of the object member name.
func (p *Path) Child(name string) *Path {
	return &Path{parent: p, seg: escapeSegment(name)}
}

// Index returns the path of the array element i.
func (p *Path) Index(i int) *Path {
	return &Path{parent: p, seg: strconv.Itoa(i)}
}

// String renders the path as an RFC 6901 JSON pointer: "" for the root, otherwise
// "/seg/seg" with '~' written as "~0" and '/' as "~1".
func (p *Path) String() string {
	if p == nil {
		return ""
	}
	n := 0
	for q := p; q != nil; q = q.parent {
		n += 1 + len(q.seg)
	}
	b := make([]byte, n)
	for q := p; q != nil; q = q.parent {
		n -= len(q.seg)
		copy(b[n:], q.seg)
		n--
		b[n] = '/'
	}
	return string(b)
}

func escapeSegment(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// splitPointer splits an RFC 6901 pointer into unescaped segments. It reports false
// for a string that is not a pointer ("x" or a bad "~" escape).
func splitPointer(ptr string) ([]string, bool) {
	if ptr == "" {
		return nil, true
	}
	if ptr[0] != '/' {
		return nil, false
	}
	parts := strings.Split(ptr[1:], "/")
	for i, s := range parts {
		if !strings.Contains(s, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			if s[j] != '~' {
				b.WriteByte(s[j])
				continue
			}
			if j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1') {
				return nil, false
			}
			if s[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return parts, true
}
