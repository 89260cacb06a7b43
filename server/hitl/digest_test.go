package hitl

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

func TestArgsDigestIsOfTheExactText(t *testing.T) {
	for _, text := range []string{
		`{"n":12345678901234567}`,
		`{"b":1, "a":2}`,
		`{"a":2,"b":1}`,
		`{"a": 1`, // malformed: digested as given
		``,
	} {
		sum := sha256.Sum256([]byte(text))
		if got, want := ArgsDigest(text), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("ArgsDigest(%q) = %s, want %s", text, got, want)
		}
	}
	// Two encodings of the same JSON value are different texts, and a decision
	// binds the text the reviewer saw.
	if ArgsDigest(`{"b":1, "a":2}`) == ArgsDigest(`{"a":2,"b":1}`) {
		t.Error("different texts have the same digest")
	}
}

func TestParseArgs(t *testing.T) {
	if v, ok := ParseArgs(`{"n":12345678901234567,"s":"x"}`); !ok || v.GetStructValue().GetFields()["s"].GetStringValue() != "x" {
		t.Errorf("ParseArgs of valid JSON = %v, %v", v, ok)
	}
	for _, bad := range []string{`{"a": 1`, ``, `nope`, "{\"a\":\"\xff\"}"} {
		if v, ok := ParseArgs(bad); ok || v != nil {
			t.Errorf("ParseArgs(%q) = %v, %v; want nil, false", bad, v, ok)
		}
	}
}

func mustValue(t testing.TB, v any) *structpb.Value {
	t.Helper()
	out, err := structpb.NewValue(v)
	if err != nil {
		t.Fatalf("structpb.NewValue(%v): %v", v, err)
	}
	return out
}
