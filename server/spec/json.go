package spec

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// parseJSON parses an RFC 8259 document into a tree.
//
// Why not encoding/json: Unmarshal into maps loses key order, duplicate keys and
// positions, and the Token API allocates per token and reports no positions for keys.
// This scanner is a single pass over the input that keeps all three, refuses nesting
// deeper than maxDepth before it recurses further (so work and stack are bounded), and
// shares string memory with one copy of the input. Its acceptance is checked against
// encoding/json by a differential fuzz test (FuzzJSONParser), and string escapes are
// decoded by encoding/json itself.
func parseJSON(data []byte, maxDepth, maxValues int) (*node, *parseError) {
	nodes, members, items := countJSON(data)
	if nodes > maxValues {
		return nil, tooManyValues(nodes, maxValues)
	}
	p := &jsonParser{src: string(data), line: 1, col: 1, maxDepth: maxDepth}
	p.slab = make([]node, 0, nodes)
	p.mslab = make([]member, 0, members)
	p.islab = make([]*node, 0, items)
	if len(p.src) >= 3 && p.src[:3] == "\xef\xbb\xbf" {
		p.i, p.colOff = 3, 3
	}
	p.skipSpace()
	if p.i == len(p.src) {
		return nil, &parseError{rule: RuleDocSyntax, pos: p.pos(), msg: "the document is empty; expected a JSON object"}
	}
	root, err := p.value(1)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i != len(p.src) {
		return nil, p.errorf("unexpected %s after the end of the top-level value", p.describe())
	}
	return root, nil
}

// countJSON bounds the numbers of values, object members and array items of a
// document from its structural characters outside strings, so that the parser's
// slabs are allocated once at the right size and a document over the value budget
// is refused before anything is built. On malformed input the counts are only a
// guess, but never below what the parser builds before it stops at the error (both
// end a string at the same quote); the slabs then grow as usual.
func countJSON(data []byte) (nodes, members, items int) {
	var open []bool // true for an array
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case ':':
			members++
		case ',':
			if len(open) > 0 && open[len(open)-1] {
				items++
			}
		case '[':
			items++ // the first element, if any
			open = append(open, true)
		case '{':
			open = append(open, false)
		case ']', '}':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
	}
	return 1 + members + items, members, items
}

// parseError is a document error that stops decoding: a syntax error or a limit.
type parseError struct {
	rule string
	pos  pos
	msg  string
}

// tooManyValues refuses a document over the value budget (Limits.MaxValues).
func tooManyValues(n, limit int) *parseError {
	return &parseError{rule: RuleDocTooLarge, pos: pos{1, 1},
		msg: fmt.Sprintf("the document holds about %d values, over this deployment's limit of %d values per document (derived from its size limit); shrink its lists and objects", n, limit)}
}

type jsonParser struct {
	src      string
	i        int
	line     int32
	colOff   int // byte offset whose column is col (positions are asked for in order)
	col      int32
	maxDepth int

	// Nodes, members and items come from slabs: a document is a few allocations
	// instead of one per value. A full slab is replaced, never grown, so slices
	// already handed out stay valid.
	slab   []node
	mslab  []member
	islab  []*node
	mstack []member
	istack []*node
}

func (p *jsonParser) members(src []member) []member {
	if cap(p.mslab)-len(p.mslab) < len(src) {
		p.mslab = make([]member, 0, max(128, len(src)))
	}
	start := len(p.mslab)
	p.mslab = append(p.mslab, src...)
	return p.mslab[start:len(p.mslab):len(p.mslab)]
}

func (p *jsonParser) items(src []*node) []*node {
	if cap(p.islab)-len(p.islab) < len(src) {
		p.islab = make([]*node, 0, max(128, len(src)))
	}
	start := len(p.islab)
	p.islab = append(p.islab, src...)
	return p.islab[start:len(p.islab):len(p.islab)]
}

func (p *jsonParser) pos() pos {
	for p.colOff < p.i {
		if p.src[p.colOff]&0xC0 != 0x80 {
			p.col++
		}
		p.colOff++
	}
	return pos{line: p.line, col: p.col}
}

func (p *jsonParser) errorf(format string, args ...any) *parseError {
	return &parseError{rule: RuleDocSyntax, pos: p.pos(), msg: fmt.Sprintf(format, args...)}
}

func (p *jsonParser) describe() string {
	if p.i >= len(p.src) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.i:])
	return fmt.Sprintf("character %q", r)
}

func (p *jsonParser) newNode(k valueKind, at pos) *node {
	if len(p.slab) == cap(p.slab) {
		// A fresh slab, never a grown one: nodes already handed out keep their address.
		p.slab = make([]node, 0, 128)
	}
	p.slab = append(p.slab, node{kind: k, pos: at})
	return &p.slab[len(p.slab)-1]
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\r':
			p.i++
		case '\n':
			p.i++
			p.line++
			p.colOff, p.col = p.i, 1
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (*node, *parseError) {
	if p.i >= len(p.src) {
		return nil, p.errorf("unexpected end of input; expected a value")
	}
	switch c := p.src[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		at := p.pos()
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		n := p.newNode(kindString, at)
		n.str = s
		return n, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", kindBool, true)
	case c == 'f':
		return p.literal("false", kindBool, false)
	case c == 'n':
		return p.literal("null", kindNull, false)
	}
	return nil, p.errorf("unexpected %s; expected a value", p.describe())
}

func (p *jsonParser) literal(word string, k valueKind, b bool) (*node, *parseError) {
	if len(p.src)-p.i < len(word) || p.src[p.i:p.i+len(word)] != word {
		return nil, p.errorf("unexpected %s; expected a value", p.describe())
	}
	n := p.newNode(k, p.pos())
	n.b = b
	p.i += len(word)
	return n, nil
}

func (p *jsonParser) tooDeep(depth int) *parseError {
	if depth <= p.maxDepth {
		return nil
	}
	return &parseError{rule: RuleDocTooDeep, pos: p.pos(),
		msg: fmt.Sprintf("the document nests deeper than %d levels; flatten it", p.maxDepth)}
}

func (p *jsonParser) object(depth int) (*node, *parseError) {
	if err := p.tooDeep(depth); err != nil {
		return nil, err
	}
	n := p.newNode(kindObject, p.pos())
	p.i++ // '{'
	base := len(p.mstack)
	p.skipSpace()
	if p.i < len(p.src) && p.src[p.i] == '}' {
		p.i++
		return n, nil
	}
	for {
		p.skipSpace()
		if p.i >= len(p.src) || p.src[p.i] != '"' {
			return nil, p.errorf("unexpected %s; expected a string key", p.describe())
		}
		keyPos := p.pos()
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.src) || p.src[p.i] != ':' {
			return nil, p.errorf("unexpected %s; expected ':' after the key", p.describe())
		}
		p.i++
		p.skipSpace()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.mstack = append(p.mstack, member{key: key, keyPos: keyPos, val: v})
		p.skipSpace()
		if p.i < len(p.src) && p.src[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.src) && p.src[p.i] == '}' {
			p.i++
			break
		}
		return nil, p.errorf("unexpected %s; expected ',' or '}'", p.describe())
	}
	n.members = p.members(p.mstack[base:])
	p.mstack = p.mstack[:base]
	markDuplicates(n.members)
	return n, nil
}

func (p *jsonParser) array(depth int) (*node, *parseError) {
	if err := p.tooDeep(depth); err != nil {
		return nil, err
	}
	n := p.newNode(kindArray, p.pos())
	p.i++ // '['
	base := len(p.istack)
	p.skipSpace()
	if p.i < len(p.src) && p.src[p.i] == ']' {
		p.i++
		return n, nil
	}
	for {
		p.skipSpace()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.istack = append(p.istack, v)
		p.skipSpace()
		if p.i < len(p.src) && p.src[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.src) && p.src[p.i] == ']' {
			p.i++
			break
		}
		return nil, p.errorf("unexpected %s; expected ',' or ']'", p.describe())
	}
	n.items = p.items(p.istack[base:])
	clear(p.istack[base:])
	p.istack = p.istack[:base]
	return n, nil
}

// string scans a string starting at the opening quote and returns its value. Strings
// without escapes share memory with the input.
func (p *jsonParser) string() (string, *parseError) {
	start := p.i
	p.i++
	escaped := false
	for {
		if p.i >= len(p.src) {
			return "", p.errorf("unterminated string")
		}
		c := p.src[p.i]
		switch {
		case c == '"':
			p.i++
			if !escaped {
				return p.src[start+1 : p.i-1], nil
			}
			var s string
			if err := json.Unmarshal([]byte(p.src[start:p.i]), &s); err != nil {
				return "", p.errorf("invalid string: %v", err)
			}
			return s, nil
		case c == '\\':
			escaped = true
			if p.i+1 >= len(p.src) {
				return "", p.errorf("unterminated string")
			}
			switch p.src[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.src) || !isHex4(p.src[p.i+2:p.i+6]) {
					p.i++
					return "", p.errorf("invalid \\u escape in string")
				}
				p.i += 6
			default:
				p.i++
				return "", p.errorf("invalid escape %s in string", p.describe())
			}
		case c < 0x20:
			return "", p.errorf("control character %q in string; escape it", rune(c))
		default:
			p.i++
		}
	}
}

func isHex4(s string) bool {
	for i := 0; i < 4; i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (p *jsonParser) number() (*node, *parseError) {
	at := p.pos()
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.src[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.src) && p.src[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.errorf("invalid number: expected a digit")
	}
	if p.i < len(p.src) && p.src[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errorf("invalid number: expected a digit after '.'")
		}
	}
	if p.i < len(p.src) && (p.src[p.i] == 'e' || p.src[p.i] == 'E') {
		p.i++
		if p.i < len(p.src) && (p.src[p.i] == '+' || p.src[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errorf("invalid number: expected a digit in the exponent")
		}
	}
	n := p.newNode(kindNumber, at)
	n.str = p.src[start:p.i]
	return n, nil
}
