package spec

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// parseYAML parses a YAML 1.2 document into the same tree parseJSON builds, using
// goccy/go-yaml's AST for positions. Only the JSON data model is accepted: constructs
// outside it (merge keys, complex keys, custom tags, .inf/.nan, several documents in
// one file) are reported as DOC-YAML and the value is dropped.
//
// Work is bounded by maxValues before the lexer runs: the lexer and parser cost a few
// hundred bytes per token (a 1 MiB flow list of one-letter scalars took 575 MB), so
// yamlTokenBound counts, in one pass over the bytes, an upper bound on the tokens, and
// a document that may hold more than yamlScanSlack*yamlTokensPerValue*maxValues is
// refused there. The lexer's real count must then be within
// yamlTokensPerValue*maxValues before the parser runs. Aliases are expanded by
// sharing the anchored subtree, and expanded values count against maxValues too, so
// an alias bomb is a DOC-TOO-LARGE finding rather than unbounded work.
func parseYAML(data []byte, maxDepth, maxValues int) (root *node, found []*violation, perr *parseError) {
	defer func() {
		// The parser runs on untrusted input; if it ever panics, that is a document we
		// cannot read, not a crashed control plane.
		if r := recover(); r != nil {
			root, found = nil, nil
			perr = &parseError{rule: RuleDocSyntax, pos: pos{1, 1}, msg: fmt.Sprintf("the YAML parser could not read this document (%v)", r)}
		}
	}()
	tokenBudget := yamlTokensPerValue * maxValues
	if n := yamlTokenBound(data); n > yamlScanSlack*tokenBudget {
		return nil, nil, tooManyValues(n/(yamlScanSlack*yamlTokensPerValue), maxValues)
	}
	tokens := lexer.Tokenize(string(data))
	if len(tokens) > tokenBudget {
		return nil, nil, tooManyValues(len(tokens)/yamlTokensPerValue, maxValues)
	}
	// The parser recurses once per nesting level. Estimate the depth from the tokens
	// first so that a pathological input ("[[[[..." or "- - - - ...") never reaches it;
	// the exact limit is applied to the tree below.
	if at, ok := yamlDepthExceeds(tokens, 2*maxDepth+8); ok {
		return nil, nil, &parseError{rule: RuleDocTooDeep, pos: at,
			msg: fmt.Sprintf("the document nests deeper than %d levels; flatten it", maxDepth)}
	}
	f, err := parser.Parse(tokens, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, nil, yamlSyntaxError(err)
	}
	var body ast.Node
	bodies := 0
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		bodies++
		if bodies == 1 {
			body = d.Body
			continue
		}
		at := tokenPos(d.Body.GetToken())
		if m, ok := d.Body.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 0 {
			at = tokenPos(m.Values[0].Key.GetToken())
		}
		return nil, nil, &parseError{rule: RuleDocYAML, pos: at,
			msg: "the file holds more than one YAML document; a spec file holds exactly one"}
	}
	if body == nil {
		return nil, nil, &parseError{rule: RuleDocSyntax, pos: pos{1, 1}, msg: "the document is empty; expected a mapping"}
	}
	c := &yamlConv{maxDepth: maxDepth, maxNodes: maxValues, anchors: map[string]anchor{}}
	n, _, perr := c.convert(body, nil, 1)
	if perr != nil {
		return nil, nil, perr
	}
	return n, c.found, nil
}

func yamlSyntaxError(err error) *parseError {
	var se *yaml.SyntaxError
	if errors.As(err, &se) && se.GetToken() != nil {
		return &parseError{rule: RuleDocSyntax, pos: tokenPos(se.GetToken()), msg: se.GetMessage()}
	}
	return &parseError{rule: RuleDocSyntax, pos: pos{1, 1}, msg: err.Error()}
}

func tokenPos(tk *token.Token) pos {
	if tk == nil || tk.Position == nil {
		return pos{1, 1}
	}
	return pos{line: int32(tk.Position.Line), col: int32(tk.Position.Column)}
}

// yamlDepthExceeds estimates the nesting depth of a token stream: flow brackets
// count exactly, block collections by the columns of their '-' and key ':' tokens.
func yamlDepthExceeds(tokens token.Tokens, limit int) (pos, bool) {
	type level struct {
		col int
		seq bool
	}
	var block []level
	flow := 0
	for _, tk := range tokens {
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			if flow > 0 {
				flow--
			}
		case token.DocumentHeaderType:
			block, flow = block[:0], 0
		case token.SequenceEntryType, token.MappingValueType:
			if flow > 0 || tk.Position == nil {
				continue
			}
			col := tk.Position.Column
			seq := tk.Type == token.SequenceEntryType
			if !seq && tk.Prev != nil && tk.Prev.Position != nil {
				col = tk.Prev.Position.Column // a mapping sits at its key's column
			}
			for len(block) > 0 && block[len(block)-1].col > col {
				block = block[:len(block)-1]
			}
			if len(block) == 0 || block[len(block)-1].col != col || block[len(block)-1].seq != seq {
				block = append(block, level{col, seq})
			}
		default:
			continue
		}
		if len(block)+flow > limit {
			return tokenPos(tk), true
		}
	}
	return pos{}, false
}

// yamlTokensPerValue is how many tokens the token budget allows per value: a block
// mapping entry is a key, ':' and its value, and list items add '-' or ','.
const yamlTokensPerValue = 4

// yamlScanSlack is how far over the token budget yamlTokenBound may go before the
// lexer runs: the bound counts the commas, colons, dashes and line breaks of prose in
// quoted and block scalars, which the lexer does not split, so a 1 MiB document that
// is mostly instructions text bounds to about one token per 16 to 35 bytes. The
// lexer's exact count then holds the token budget before parsing; the slack only
// bounds the lexer's own work.
const yamlScanSlack = 2

// yamlTokenBound returns an upper bound on the number of tokens goccy/go-yaml's lexer
// makes of data, without tokenizing: every token is either an indicator or a scalar,
// and scalars are delimited by indicators or line breaks (spaces never split a plain
// scalar), so counting the characters that can be indicators or line breaks, wherever
// they are, and doubling bounds the tokens. Quoting is ignored on purpose: prose in a
// quoted or block scalar counts only its commas, colons, dashes and line breaks (about
// one per 30 to 40 bytes), and a scan that tried to follow YAML's quoting rules could
// be led to skip what the lexer tokenizes.
func yamlTokenBound(data []byte) int {
	n := 0
	directive := false // on a line that starts with '%', spaces separate tokens
	for i, c := range data {
		lineStart := i == 0 || data[i-1] == '\n' || data[i-1] == '\r'
		switch c {
		case ',', '[', ']', '{', '}', ':', '-', '?', '#', '&', '*', '!', '|', '>', '"', '\'', '@', '`':
			n++
		case '\n', '\r':
			n++
			directive = false
		case '%':
			n++
			directive = directive || lineStart
		case '.': // a document end marker "..." starts a line
			if lineStart {
				n++
			}
		case ' ', '\t':
			if directive {
				n++
			}
		}
	}
	return 2*n + 1
}

type anchor struct {
	n      *node
	size   int
	height int
}

type yamlConv struct {
	maxDepth int
	maxNodes int
	nodes    int
	anchors  map[string]anchor
	found    []*violation
}

func (c *yamlConv) report(rule string, p *Path, at pos, format string, args ...any) *node {
	c.found = append(c.found, &violation{rule: rule, path: p.String(), msg: fmt.Sprintf(format, args...), pos: at})
	return &node{kind: kindInvalid, pos: at}
}

// yamlCoreNumber is the YAML 1.2 core schema's float (and decimal int) pattern. The
// AST leaves some of these plain scalars as strings (for example 2e3).
var yamlCoreNumber = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// convert returns the tree of n with its size (values, for the alias budget) and
// height (levels, for the depth limit).
func (c *yamlConv) convert(n ast.Node, p *Path, depth int) (*node, [2]int, *parseError) {
	at := tokenPos(n.GetToken())
	c.nodes++
	if c.nodes > c.maxNodes {
		return nil, [2]int{}, &parseError{rule: RuleDocTooLarge, pos: at,
			msg: fmt.Sprintf("the document expands to more than %d values (through aliases), over this deployment's limit of values per document; write it out or shrink it", c.maxNodes)}
	}
	switch v := n.(type) {
	case *ast.MappingNode:
		if !v.IsFlowStyle && len(v.Values) > 0 {
			at = tokenPos(v.Values[0].Key.GetToken())
		}
		return c.mapping(v.Values, at, p, depth)
	case *ast.MappingValueNode:
		return c.mapping([]*ast.MappingValueNode{v}, tokenPos(v.Key.GetToken()), p, depth)
	case *ast.SequenceNode:
		if depth > c.maxDepth {
			return nil, [2]int{}, tooDeep(at, c.maxDepth)
		}
		out := &node{kind: kindArray, pos: at, items: make([]*node, 0, len(v.Values))}
		size, height := 1, 1
		for i, item := range v.Values {
			cn, sh, err := c.convert(item, p.Index(i), depth+1)
			if err != nil {
				return nil, sh, err
			}
			out.items = append(out.items, cn)
			size += sh[0]
			height = max(height, sh[1]+1)
		}
		return out, [2]int{size, height}, nil
	case *ast.StringNode:
		if v.Token.Type == token.StringType && yamlCoreNumber.MatchString(v.Value) {
			return c.number(v.Value, at, p)
		}
		return &node{kind: kindString, pos: at, str: v.Value}, [2]int{1, 1}, nil
	case *ast.LiteralNode:
		s := ""
		if v.Value != nil {
			s = v.Value.Value
		}
		return &node{kind: kindString, pos: at, str: s}, [2]int{1, 1}, nil
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return &node{kind: kindNumber, pos: at, str: strconv.FormatInt(x, 10)}, [2]int{1, 1}, nil
		case uint64:
			return &node{kind: kindNumber, pos: at, str: strconv.FormatUint(x, 10)}, [2]int{1, 1}, nil
		}
		return c.number(v.Token.Value, at, p)
	case *ast.FloatNode:
		if math.IsInf(v.Value, 0) || math.IsNaN(v.Value) {
			break
		}
		return &node{kind: kindNumber, pos: at, str: strconv.FormatFloat(v.Value, 'g', -1, 64)}, [2]int{1, 1}, nil
	case *ast.BoolNode:
		return &node{kind: kindBool, pos: at, b: v.Value}, [2]int{1, 1}, nil
	case *ast.NullNode:
		return &node{kind: kindNull, pos: at}, [2]int{1, 1}, nil
	case *ast.InfinityNode, *ast.NanNode:
		return c.report(RuleDocYAML, p, at, "%s is not a JSON number; use a finite number", n.GetToken().Value), [2]int{1, 1}, nil
	case *ast.TagNode:
		tag := v.Start.Value
		switch tag {
		case "!!str":
			if s, ok := v.Value.(ast.ScalarNode); ok {
				if str, ok := s.GetValue().(string); ok {
					return &node{kind: kindString, pos: at, str: str}, [2]int{1, 1}, nil
				}
				return &node{kind: kindString, pos: at, str: v.Value.GetToken().Value}, [2]int{1, 1}, nil
			}
		case "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
			c.nodes--
			return c.convert(v.Value, p, depth)
		}
		return c.report(RuleDocYAML, p, at, "YAML tag %s is not supported in a spec document; remove it", tag), [2]int{1, 1}, nil
	case *ast.AnchorNode:
		c.nodes--
		name := v.Name.GetToken().Value
		cn, sh, err := c.convert(v.Value, p, depth)
		if err != nil {
			return nil, sh, err
		}
		c.anchors[name] = anchor{n: cn, size: sh[0], height: sh[1]}
		return cn, sh, nil
	case *ast.AliasNode:
		name := v.Value.GetToken().Value
		a, ok := c.anchors[name]
		if !ok {
			return c.report(RuleDocYAML, p, at, "alias *%s names no anchor defined before it", name), [2]int{1, 1}, nil
		}
		c.nodes += a.size - 1
		if c.nodes > c.maxNodes {
			return nil, [2]int{}, &parseError{rule: RuleDocTooLarge, pos: at,
				msg: fmt.Sprintf("the document expands to more than %d values (through aliases), over this deployment's limit of values per document; write it out or shrink it", c.maxNodes)}
		}
		if depth+a.height-1 > c.maxDepth {
			return nil, [2]int{}, tooDeep(at, c.maxDepth)
		}
		return a.n, [2]int{a.size, a.height}, nil
	}
	return c.report(RuleDocYAML, p, at, "this YAML construct (%s) is not part of the JSON data model", n.Type()), [2]int{1, 1}, nil
}

func tooDeep(at pos, limit int) *parseError {
	return &parseError{rule: RuleDocTooDeep, pos: at, msg: fmt.Sprintf("the document nests deeper than %d levels; flatten it", limit)}
}

// number turns a plain scalar in YAML number syntax into JSON number text.
func (c *yamlConv) number(text string, at pos, p *Path) (*node, [2]int, *parseError) {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return c.report(RuleDocYAML, p, at, "%q is not a number JSON can represent", text), [2]int{1, 1}, nil
	}
	if math.IsInf(f, 0) {
		return c.report(RuleDocYAML, p, at, "%s is out of the range of a JSON number", text), [2]int{1, 1}, nil
	}
	if isJSONNumber(text) {
		return &node{kind: kindNumber, pos: at, str: text}, [2]int{1, 1}, nil
	}
	return &node{kind: kindNumber, pos: at, str: strconv.FormatFloat(f, 'g', -1, 64)}, [2]int{1, 1}, nil
}

func (c *yamlConv) mapping(values []*ast.MappingValueNode, at pos, p *Path, depth int) (*node, [2]int, *parseError) {
	if depth > c.maxDepth {
		return nil, [2]int{}, tooDeep(at, c.maxDepth)
	}
	out := &node{kind: kindObject, pos: at, members: make([]member, 0, len(values))}
	size, height := 1, 1
	for _, mv := range values {
		keyPos := tokenPos(mv.Key.GetToken())
		key, ok := yamlKey(mv.Key)
		if !ok {
			// Reported at a child path so that the rest of the object is still checked.
			if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
				c.report(RuleDocYAML, p.Child("<<"), keyPos, "merge keys (<<) are not supported; write the keys out")
			} else {
				c.report(RuleDocYAML, p.Child(mv.Key.GetToken().Value), keyPos, "complex keys are not supported; use a plain string key")
			}
			continue
		}
		cn, sh, err := c.convert(mv.Value, p.Child(key), depth+1)
		if err != nil {
			return nil, sh, err
		}
		out.members = append(out.members, member{key: key, keyPos: keyPos, val: cn})
		size += sh[0]
		height = max(height, sh[1]+1)
	}
	markDuplicates(out.members)
	return out, [2]int{size, height}, nil
}

// yamlKey returns the text of a scalar key as JSON sees it: `1: x` is the key "1".
func yamlKey(k ast.Node) (string, bool) {
	switch v := k.(type) {
	case *ast.MappingKeyNode:
		return yamlKey(v.Value)
	case *ast.TagNode:
		if v.Start.Value != "!!str" {
			return "", false
		}
		return yamlKey(v.Value)
	case *ast.StringNode:
		return v.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode:
		return v.GetToken().Value, true
	}
	return "", false
}

// isJSONNumber reports whether s is in RFC 8259 number syntax.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
