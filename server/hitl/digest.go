package hitl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// ArgsDigest returns the SHA-256 (lower-case hex) of the canonical JSON of v.
//
// Decisions bind the arguments a reviewer ruled on by this digest, so two encodings
// of the same JSON value must give the same digest and different values different
// ones. The encoding is RFC 8785 (JSON Canonicalization Scheme): object members
// sorted by their UTF-16 code units, no insignificant whitespace, numbers in the
// ECMAScript shortest form, strings escaped minimally. A nil v (or a Value with no
// kind) is JSON null. NaN, infinities and invalid UTF-8 have no JSON form and are
// an error, which callers report as a bad request.
func ArgsDigest(v *structpb.Value) (string, error) {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	b, err := appendCanonical((*buf)[:0], v)
	*buf = b
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON returns the RFC 8785 encoding of v that ArgsDigest hashes.
func CanonicalJSON(v *structpb.Value) ([]byte, error) {
	return appendCanonical(nil, v)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func appendCanonical(b []byte, v *structpb.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return append(b, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		return appendNumber(b, k.NumberValue)
	case *structpb.Value_StringValue:
		return appendString(b, k.StringValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case *structpb.Value_StructValue:
		fields := k.StructValue.GetFields()
		keys := make([]string, 0, len(fields))
		for key := range fields {
			keys = append(keys, key)
		}
		slices.SortFunc(keys, compareUTF16)
		b = append(b, '{')
		for i, key := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendString(b, key); err != nil {
				return b, err
			}
			b = append(b, ':')
			if b, err = appendCanonical(b, fields[key]); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	default:
		return b, fmt.Errorf("unknown JSON value kind %T", k)
	}
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 requires.
// UTF-8 byte order agrees except between supplementary-plane characters (surrogate
// pairs, 0xD800..0xDFFF) and BMP characters at 0xE000 and above, so the fast path is
// a byte comparison and only non-ASCII differences fall back to decoding.
func compareUTF16(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) || (a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf) {
		return strings.Compare(a, b)
	}
	// Back up to the start of the rune the strings differ in.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	ua, ub := firstUnit(ra), firstUnit(rb)
	switch {
	case ua < ub:
		return -1
	case ua > ub:
		return 1
	}
	// Same leading unit: both are supplementary characters with the same high
	// surrogate, which orders like their code points, as does UTF-8.
	return strings.Compare(a[i:], b[i:])
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// appendNumber writes f the way ECMAScript's Number.prototype.toString does, which
// is what RFC 8785 prescribes: the shortest digits that round-trip, in plain
// notation for exponents in [-6, 21) and in exponent notation otherwise.
func appendNumber(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, fmt.Errorf("number %v has no JSON representation", f)
	}
	if f == 0 {
		return append(b, '0'), nil // also for -0
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	// 'e' with precision -1 gives the shortest round-tripping digits: d.ddddde±XX.
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	mant, expPart, _ := strings.Cut(string(s), "e")
	exp, _ := strconv.Atoi(expPart)
	digits := strings.Replace(mant, ".", "", 1)
	n := exp + 1 // position of the decimal point relative to the digits
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, "0."...)
		for range -n {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string with RFC 8785's minimal escaping: only
// the quote, the backslash and control characters are escaped; everything else,
// including non-ASCII text, is written as UTF-8.
func appendString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return b, fmt.Errorf("string is not valid UTF-8")
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}
