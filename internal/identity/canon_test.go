package identity

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// canonicalJSON is the canonical form of raw, or raw trimmed when it is not one JSON value
// (how occurrence keys hash a tool input).
func canonicalJSON(raw []byte) []byte {
	if out, ok := canonicalAppend(nil, raw, ""); ok {
		return out
	}
	return bytes.TrimSpace(raw)
}

// checkCanonical verifies canonicalJSON against encoding/json: same value, idempotent,
// sorted keys, no insignificant whitespace outside strings.
func checkCanonical(t *testing.T, in []byte) {
	out := canonicalJSON(in)
	var a, b any
	errIn := json.Unmarshal(in, &a)
	if errIn != nil || !utf8.Valid(in) {
		if errIn != nil && !bytes.Equal(out, bytes.TrimSpace(in)) {
			t.Fatalf("invalid input must come back trimmed: %q -> %q", in, out)
		}
		return
	}
	if err := json.Unmarshal(out, &b); err != nil {
		if strings.Count(string(in), "[")+strings.Count(string(in), "{") > maxCanonDepth {
			return
		}
		t.Fatalf("canonical output is not JSON: %q -> %q: %v", in, out, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("value changed: %q -> %q", in, out)
	}
	if again := canonicalJSON(out); !bytes.Equal(again, out) {
		t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
	}
}

func TestCanonicalJSONAgainstEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{"z":{"b":[1,{"y":2,"x":"\u0041\n\"\\\/"}],"a":null},"a":true}`,
		`"\ud83d\ude00 \u2028 <&> \u0007"`,
		`{"k":"v","k":"w","a":{"k":1,"k":[]}}`,
		`[ ]`, `{ }`, `-0.5e-3`, `"\ud800"`,
		strings.Repeat(`{"a":`, 300) + `1` + strings.Repeat(`}`, 300),
	} {
		checkCanonical(t, []byte(s))
	}
}

// FuzzCanonicalJSON checks canonicalJSON against encoding/json on arbitrary input.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `"\u00e9"`, `{"a":{"a":{"a":1}}}`, `[1,2`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkCanonical(t, in) })
}
