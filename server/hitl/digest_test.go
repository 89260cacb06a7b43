package hitl

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

func mustValue(t testing.TB, v any) *structpb.Value {
	t.Helper()
	out, err := structpb.NewValue(v)
	if err != nil {
		t.Fatalf("structpb.NewValue(%v): %v", v, err)
	}
	return out
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   *structpb.Value
		want string
	}{
		{"nil is null", nil, `null`},
		{"kindless value is null", &structpb.Value{}, `null`},
		{"null", structpb.NewNullValue(), `null`},
		{"true", structpb.NewBoolValue(true), `true`},
		{"false", structpb.NewBoolValue(false), `false`},
		{"empty object", mustValue(t, map[string]any{}), `{}`},
		{"empty list", mustValue(t, []any{}), `[]`},
		{"keys sorted, no whitespace", mustValue(t, map[string]any{"b": 1, "a": []any{true, nil, "x"}, "c": map[string]any{"z": 1, "y": 2}}),
			`{"a":[true,null,"x"],"b":1,"c":{"y":2,"z":1}}`},
		// RFC 8785 sorts by UTF-16 code units: U+10000 (surrogate D800) before U+E000,
		// although its UTF-8 bytes sort after.
		{"keys in UTF-16 order", mustValue(t, map[string]any{"\uE000": 1, "\U00010000": 2, "a": 3, "\u00e9": 4}),
			"{\"a\":3,\"\u00e9\":4,\"\U00010000\":2,\"\uE000\":1}"},
		{"keys sharing a prefix", mustValue(t, map[string]any{"ab": 1, "a": 2, "a\U00010000": 3, "a\uE000": 4}),
			"{\"a\":2,\"ab\":1,\"a\U00010000\":3,\"a\uE000\":4}"},
		{"string escapes are minimal", structpb.NewStringValue("q\"b\\n\n t\t r\r f\f b\b c\x01 \u007f é € / <>&"),
			`"q\"b\\n\n t\t r\r f\f b\b c\u0001 ` + "\u007f é € / <>&" + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// Number forms from RFC 8785 section 3.2.2.3 and its appendix, which follow
// ECMAScript's Number.prototype.toString.
func TestCanonicalNumbers(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{4.5, "4.5"},
		{0.002, "0.002"},
		{0.000001, "0.000001"},
		{1e-7, "1e-7"},
		{1.2345e-10, "1.2345e-10"},
		{123e18, "123000000000000000000"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{1.5e300, "1.5e+300"},
		{333333333.3333333, "333333333.3333333"},
		{9007199254740992, "9007199254740992"},
		{295147905179352830000, "295147905179352830000"},
		{-5e-324, "-5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{100, "100"},
		{12.75, "12.75"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got, err := CanonicalJSON(structpb.NewNumberValue(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("%v: got %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestArgsDigestErrors(t *testing.T) {
	tests := []struct {
		name string
		in   *structpb.Value
	}{
		{"NaN", structpb.NewNumberValue(math.NaN())},
		{"+Inf", structpb.NewNumberValue(math.Inf(1))},
		{"-Inf nested", &structpb.Value{Kind: &structpb.Value_ListValue{ListValue: &structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(math.Inf(-1))}}}}},
		{"invalid UTF-8 string", structpb.NewStringValue("\xff")},
		{"invalid UTF-8 key", &structpb.Value{Kind: &structpb.Value_StructValue{StructValue: &structpb.Struct{Fields: map[string]*structpb.Value{"\xfe": structpb.NewNullValue()}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d, err := ArgsDigest(tt.in); err == nil {
				t.Errorf("ArgsDigest = %s, want an error", d)
			}
		})
	}
}

func TestArgsDigest(t *testing.T) {
	a := mustValue(t, map[string]any{"path": "/tmp/x", "force": true, "n": 3})
	sum := sha256.Sum256([]byte(`{"force":true,"n":3,"path":"/tmp/x"}`))
	want := hex.EncodeToString(sum[:])
	got, err := ArgsDigest(a)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("ArgsDigest = %s, want %s", got, want)
	}
	// The same value decoded from differently written JSON has the same digest.
	var b structpb.Value
	if err := protojson.Unmarshal([]byte(" { \"path\" : \"\\/tmp\\/x\", \"n\": 3.0, \"force\": true } "), &b); err != nil {
		t.Fatal(err)
	}
	if got2, _ := ArgsDigest(&b); got2 != want {
		t.Errorf("digest of the same value written differently = %s, want %s", got2, want)
	}
	c := mustValue(t, map[string]any{"path": "/tmp/x", "force": true, "n": 4})
	if got3, _ := ArgsDigest(c); got3 == want {
		t.Error("different args have the same digest")
	}
}

// FuzzCanonicalJSON checks that the encoding is valid JSON that decodes to the same
// value, and that it is a fixed point (canonicalising it again changes nothing).
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,2,{"c":null}]}`, `"x\u0000y"`, `[1e21, 1e-7, -0.5]`, `{"\ue000":1,"\ud800\udc00":2}`, `true`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v structpb.Value
		if err := protojson.Unmarshal(data, &v); err != nil {
			return
		}
		out, err := CanonicalJSON(&v)
		if err != nil {
			return // NaN and friends cannot come from JSON, but protojson accepts "NaN" strings for numbers
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q from %q", out, data)
		}
		var back structpb.Value
		if err := protojson.Unmarshal(out, &back); err != nil {
			t.Fatalf("re-decoding %q: %v", out, err)
		}
		again, err := CanonicalJSON(&back)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(out) {
			t.Fatalf("not a fixed point:\n%s\n%s", out, again)
		}
	})
}

func BenchmarkArgsDigest(b *testing.B) {
	v := mustValue(b, map[string]any{
		"path": "/var/data/report.csv", "recursive": true, "limit": 100,
		"filters": []any{map[string]any{"field": "owner", "op": "eq", "value": "alice"}, map[string]any{"field": "size", "op": "gt", "value": 1024.5}},
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ArgsDigest(v); err != nil {
			b.Fatal(err)
		}
	}
}
