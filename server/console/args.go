package console

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"
)

// The arguments of a call are the model's JSON text, and a decision binds the digest
// of a text, so the console never re-encodes them: it reads a top-level object's
// members as spans of that text and, for an edit, splices the edited values in, the
// rest staying byte for byte what the model wrote (escapes, spacing, key order,
// numbers beyond 2^53, duplicate keys).

// member is one top-level member of a JSON object text: its key, decoded, and where
// its key and value lie in the text.
type member struct {
	Key              string
	keyStart         int // the opening quote of the key
	valStart, valEnd int
}

// objectText is a JSON object text split into its top-level members.
type objectText struct {
	text    string
	members []member
	closing int  // offset of the closing brace
	dup     bool // some key occurs twice
}

// parseObject splits text into its members; ok is false when text is not one JSON
// object (with nothing but whitespace around it).
func parseObject(text string) (o objectText, ok bool) {
	if !json.Valid([]byte(text)) {
		return o, false
	}
	dec := json.NewDecoder(strings.NewReader(text))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return o, false
	}
	o.text = text
	seen := map[string]bool{}
	for dec.More() {
		prev := int(dec.InputOffset())
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey {
			return objectText{}, false
		}
		m := member{Key: key, keyStart: prev + strings.IndexByte(text[prev:], '"')}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return objectText{}, false
		}
		m.valEnd = int(dec.InputOffset())
		m.valStart = m.valEnd - len(raw)
		if seen[key] {
			o.dup = true
		}
		seen[key] = true
		o.members = append(o.members, m)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return objectText{}, false
	}
	o.closing = int(dec.InputOffset()) - 1
	if _, err := dec.Token(); err != io.EOF {
		return objectText{}, false
	}
	return o, true
}

// raw is a member's value text, exactly as written.
func (o *objectText) raw(m member) string { return o.text[m.valStart:m.valEnd] }

// lookup returns the (last, as a JSON decoder takes it) member named key.
func (o *objectText) lookup(key string) (member, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].Key == key {
			return o.members[i], true
		}
	}
	return member{}, false
}

// change is an edit of one member: a new value text, or its removal.
type change struct {
	value  string
	remove bool
}

// splice returns the object's text with the changes applied: a changed member keeps
// its key and everything around its value as written, a removed one goes with the
// separator before it, a new one is appended (in the order of added). Members
// without a change are copied byte for byte.
func (o *objectText) splice(changes map[string]change, added []string) string {
	var b strings.Builder
	if len(o.members) == 0 {
		b.WriteString(o.text[:o.closing])
	} else {
		b.WriteString(o.text[:o.members[0].keyStart])
	}
	wrote := false
	for i, m := range o.members {
		c, changed := changes[m.Key]
		if changed && c.remove {
			continue
		}
		if wrote {
			b.WriteString(o.text[o.members[i-1].valEnd:m.keyStart]) // the separator as written
		}
		b.WriteString(o.text[m.keyStart:m.valStart])
		if changed {
			b.WriteString(c.value)
		} else {
			b.WriteString(o.raw(m))
		}
		wrote = true
	}
	for _, k := range added {
		if wrote {
			b.WriteByte(',')
		}
		b.WriteString(jsonText(k))
		b.WriteByte(':')
		b.WriteString(changes[k].value)
		wrote = true
	}
	if len(o.members) == 0 {
		b.WriteString(o.text[o.closing:])
	} else {
		b.WriteString(o.text[o.members[len(o.members)-1].valEnd:])
	}
	return b.String()
}

// jsonText encodes v as JSON without HTML escaping (a "<" stays "<").
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// formText is how a browser hands back a text it was given in a form control: line
// breaks normalized (a textarea posts CRLF, the HTML parser reads CR and CRLF as LF)
// and NUL replaced. Two texts with the same formText are the same to the approver.
func formText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// longText is a string too long or too many lines for a one-line input.
func longText(s string) bool {
	return strings.ContainsAny(s, "\r\n") || utf8.RuneCountInString(s) > 60
}

// decodedString is raw's value when raw is a JSON string.
func decodedString(raw string) (string, bool) {
	var s string
	if !strings.HasPrefix(raw, `"`) || json.Unmarshal([]byte(raw), &s) != nil {
		return "", false
	}
	return s, true
}
