package spec

import "strconv"

// The document decoders (JSON and YAML) both produce this small tree: the JSON data
// model plus the source position of every value and key, and the key order and
// duplicate keys that plain unmarshalling into maps would hide. Binding the tree to the
// typed model and looking up positions by JSON pointer both work on it, so the two
// syntaxes share every rule after parsing.

type valueKind uint8

const (
	kindNull valueKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
	// kindInvalid marks a value the parser already reported (for example a YAML .inf);
	// binding skips it silently.
	kindInvalid
)

func (k valueKind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	case kindObject:
		return "object"
	}
	return "invalid value"
}

// pos is a 1-based line and column (columns count characters, not bytes).
type pos struct{ line, col int32 }

type node struct {
	kind valueKind
	pos  pos
	// b is the value of a boolean.
	b bool
	// str is a string's value or a number's source text (JSON syntax).
	str     string
	members []member // objects, in document order
	items   []*node  // arrays
}

type member struct {
	key    string
	keyPos pos
	val    *node
	// dup marks a key that already occurred earlier in the same object. The first
	// occurrence wins; later ones are reported and ignored.
	dup bool
}

// lookup returns the position of the value at ptr, or of its nearest ancestor that
// exists in the document. An object member is located at its key, which is where a
// reader looks for it; an array element at the element itself.
func (n *node) lookup(ptr string) (pos, bool) {
	if n == nil {
		return pos{}, false
	}
	segs, ok := splitPointer(ptr)
	if !ok {
		return pos{}, false
	}
	at := n.pos
	cur := n
	for _, s := range segs {
		switch cur.kind {
		case kindObject:
			m := cur.member(s)
			if m == nil {
				return at, true
			}
			at, cur = m.keyPos, m.val
		case kindArray:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(cur.items) || strconv.Itoa(i) != s {
				return at, true
			}
			cur = cur.items[i]
			at = cur.pos
		default:
			return at, true
		}
	}
	return at, true
}

// member returns the first member named key, or nil.
func (n *node) member(key string) *member {
	for i := range n.members {
		if n.members[i].key == key && !n.members[i].dup {
			return &n.members[i]
		}
	}
	return nil
}

// markDuplicates sets dup on every member whose key occurred earlier in the object.
// Small objects (the common case) are checked pairwise without allocating.
func markDuplicates(ms []member) {
	if len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := 0; j < i; j++ {
				if ms[j].key == ms[i].key {
					ms[i].dup = true
					break
				}
			}
		}
		return
	}
	seen := make(map[string]struct{}, len(ms))
	for i := range ms {
		if _, ok := seen[ms[i].key]; ok {
			ms[i].dup = true
			continue
		}
		seen[ms[i].key] = struct{}{}
	}
}
