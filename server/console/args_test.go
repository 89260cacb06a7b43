package console

import (
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// mailArgs is a model's call text with everything a re-encoding would change:
// spacing, key order, escapes (\u00e9, \/, \u003c), raw "<", a multi-line body
// with CRLF and trailing spaces, a number beyond 2^53, nested objects and arrays.
const mailArgs = `{ "to":"ann@example.com",  "subject": "Hello",
  "body": "Dear Ann,\r\n\r\n  the <b>refund</b> is on its way.  \r\n-- \r\nBob  ",
  "name": "  \u00e9l\u00e8ve \/ <x>  ", "ref": 12345678901234567890,
  "meta": {"z": [1, 2.50, {"b": "\u003cy>"}], "a": null}, "tags": ["x" ,"y"],
  "urgent": false, "prio": "low" }`

func mailSchema(t *testing.T) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"to": map[string]any{"type": "string"}, "subject": map[string]any{"type": "string"},
			"body": map[string]any{"type": "string"}, "name": map[string]any{"type": "string"},
			"ref": map[string]any{"type": "integer"}, "meta": map[string]any{"type": "object"},
			"tags": map[string]any{"type": "array"}, "urgent": map[string]any{"type": "boolean"},
			"prio": map[string]any{"type": "string", "enum": []any{"low", "high"}},
			"cc":   map[string]any{"type": "string"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// posted is what a browser posts for the form as rendered: a textarea's text with
// its line breaks as CRLF, an input's value, a checked box, the selected option.
func posted(f *editForm) url.Values {
	v := url.Values{}
	for _, fd := range f.Fields {
		key := "arg:" + fd.Name
		switch fd.Input {
		case "checkbox":
			if fd.Checked {
				v.Set(key, "true")
			}
		case "select":
			for _, o := range fd.Options {
				if o.Selected {
					v.Set(key, o.Value)
				}
			}
		case "textarea", "json":
			v.Set(key, strings.ReplaceAll(formText(fd.Value), "\n", "\r\n"))
		default:
			if strings.ContainsAny(fd.Value, "\r\n") {
				panic("a one-line input was given line breaks: " + fd.Name)
			}
			v.Set(key, fd.Value)
		}
	}
	return v
}

func TestEditFormKeepsWhatWasNotEdited(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(url.Values)
		want string
	}{
		{"nothing edited", func(url.Values) {}, mailArgs},
		{"subject", func(v url.Values) { v.Set("arg:subject", "Hi <there> & \u00e9") },
			strings.Replace(mailArgs, `"Hello"`, `"Hi <there> & é"`, 1)},
		{"body, typed with CRLF as the browser posts it", func(v url.Values) { v.Set("arg:body", "Dear Ann,\r\ndone.") },
			strings.Replace(mailArgs, `"Dear Ann,\r\n\r\n  the <b>refund</b> is on its way.  \r\n-- \r\nBob  "`, `"Dear Ann,\r\ndone."`, 1)},
		{"ref, a number beyond 2^53", func(v url.Values) { v.Set("arg:ref", "98765432109876543210") },
			strings.Replace(mailArgs, `12345678901234567890`, `98765432109876543210`, 1)},
		{"a box", func(v url.Values) { v.Set("arg:urgent", "true") },
			strings.Replace(mailArgs, `"urgent": false`, `"urgent": true`, 1)},
		{"a choice", func(v url.Values) { v.Set("arg:prio", `"high"`) },
			strings.Replace(mailArgs, `"prio": "low"`, `"prio": "high"`, 1)},
		{"nested JSON", func(v url.Values) { v.Set("arg:tags", "[\r\n \"x\"\r\n]") },
			strings.Replace(mailArgs, `["x" ,"y"]`, `["x"]`, 1)},
		{"an absent one added", func(v url.Values) { v.Set("arg:cc", "bob@example.com") },
			strings.Replace(mailArgs, `"prio": "low" }`, `"prio": "low","cc":"bob@example.com" }`, 1)},
		{"one removed", func(v url.Values) { v.Set("arg:meta", "") },
			strings.Replace(mailArgs, `,`+"\n  "+`"meta": {"z": [1, 2.50, {"b": "\u003cy>"}], "a": null}`, ``, 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newEditForm(mailSchema(t), mailArgs)
			if f.Raw {
				t.Fatal("the form fell back to raw JSON")
			}
			v := posted(f)
			c.edit(v)
			if got := f.fill(v); got != c.want {
				t.Errorf("sent\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestEditFormControls(t *testing.T) {
	f := newEditForm(mailSchema(t), mailArgs)
	inputs := map[string]string{}
	for _, fd := range f.Fields {
		inputs[fd.Name] = fd.Input + " " + fd.Value
	}
	for name, want := range map[string]string{
		"body":    "textarea Dear Ann,\r\n\r\n  the <b>refund</b> is on its way.  \r\n-- \r\nBob  ",
		"subject": "text Hello",
		"name":    "text   élève / <x>  ",
		"ref":     "number 12345678901234567890",
		"meta":    "json {\n  \"z\": [\n    1,\n    2.50,\n    {\n      \"b\": \"\\u003cy>\"\n    }\n  ],\n  \"a\": null\n}",
		"prio":    `select "low"`,
	} {
		if inputs[name] != want {
			t.Errorf("%s: %q, want %q", name, inputs[name], want)
		}
	}
	// A value the schema's enum does not list stays selected, not replaced by the first choice.
	f = newEditForm(mailSchema(t), `{"prio":"urgent"}`)
	for _, fd := range f.Fields {
		if fd.Name == "prio" && (len(fd.Options) != 3 || !fd.Options[0].Selected || fd.Options[0].Value != `"urgent"`) {
			t.Errorf("prio options %+v", fd.Options)
		}
	}
	if got := f.fill(posted(f)); got != `{"prio":"urgent"}` {
		t.Errorf("sent %s", got)
	}
	// Duplicate keys: the raw text box, sent as written when untouched.
	dup := `{"to":"a","to":"b"}`
	f = newEditForm(mailSchema(t), dup)
	if !f.Raw {
		t.Fatal("duplicate keys got a field form")
	}
	if got := f.fill(url.Values{"arguments_json": {strings.ReplaceAll(prettyJSON(dup), "\n", "\r\n")}}); got != dup {
		t.Errorf("untouched raw text sent as %q", got)
	}
}

func TestParseObject(t *testing.T) {
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":1} {}`, `{"a":}`, `{"a":1}x`} {
		if _, ok := parseObject(bad); ok {
			t.Errorf("%q parsed as an object", bad)
		}
	}
	o, ok := parseObject(" {} ")
	if !ok || len(o.members) != 0 || o.splice(map[string]change{"k": {value: `"<v>"`}}, []string{"k"}) != ` {"k":"<v>"} ` {
		t.Errorf("empty object: %v %+v", ok, o)
	}
	o, _ = parseObject(`{"a":1, "b":2 ,"c":3}`)
	for _, c := range []struct {
		drop []string
		want string
	}{{[]string{"a"}, `{"b":2 ,"c":3}`}, {[]string{"b"}, `{"a":1 ,"c":3}`}, {[]string{"c"}, `{"a":1, "b":2}`}, {[]string{"a", "b", "c"}, `{}`}} {
		ch := map[string]change{}
		for _, k := range c.drop {
			ch[k] = change{remove: true}
		}
		if got := o.splice(ch, nil); got != c.want {
			t.Errorf("drop %v: %s, want %s", c.drop, got, c.want)
		}
	}
}

func TestViewArgsIsExact(t *testing.T) {
	v := viewArgs(mailArgs)
	if v.Text != mailArgs || !v.Valid || v.Rows[0].Key != "to" || v.Rows[2].Value != "Dear Ann,\r\n\r\n  the <b>refund</b> is on its way.  \r\n-- \r\nBob  " {
		t.Errorf("%+v", v)
	}
	rows, ok := diffArgs(`{"a":1,"b":"x","c":[1]}`, `{"a":1,"b":"y","d":true}`)
	if !ok || len(rows) != 4 || rows[0].Changed || !rows[1].Changed || rows[2].Has || !rows[3].Changed || rows[3].Had {
		t.Errorf("%+v", rows)
	}
}
