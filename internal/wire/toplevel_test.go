package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTopLevel: members by name, in the order asked, the last of a repeated name, escaped
// keys by their decoded text, nested members of the same name ignored, and an error (no
// values) for anything that is not one JSON object.
func TestTopLevel(t *testing.T) {
	names := []string{"system", "messages", "user"}
	for _, tc := range []struct {
		body string
		want []string // "" for absent
		err  bool
	}{
		{body: `{"system":"s","messages":[{"user":1}],"user":"u"}`, want: []string{`"s"`, `[{"user":1}]`, `"u"`}},
		{body: ` { "user" : {"a":[1,2]} , "system":null }  `, want: []string{`null`, ``, `{"a":[1,2]}`}},
		{body: `{"user":"a","user":"b"}`, want: []string{``, ``, `"b"`}},
		{body: `{"\u0073ystem":"esc","sys\"tem":1}`, want: []string{`"esc"`, ``, ``}},
		{body: `{"metadata":{"system":"nested"}}`, want: []string{``, ``, ``}},
		{body: `{}`, want: []string{``, ``, ``}},
		{body: `[]`, err: true},
		{body: ``, err: true},
		{body: `{"system":"s"`, err: true},
		{body: `{"system":"s"} x`, err: true},
		{body: `{"system":"s","messages":[1,]}`, err: true},
		{body: "{\"system\":\"\xff\"}", err: true},
	} {
		vals, err := TopLevel([]byte(tc.body), names...)
		if tc.err {
			if err == nil || !errors.Is(err, ErrInvalid) || vals != nil {
				t.Errorf("%q: got %q, %v; want an ErrInvalid error", tc.body, vals, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.body, err)
			continue
		}
		for i, w := range tc.want {
			if string(vals[i]) != w || (w == "") != (vals[i] == nil) {
				t.Errorf("%q: %s = %q, want %q", tc.body, names[i], vals[i], w)
			}
		}
	}
}

// FuzzTopLevel compares TopLevel with encoding/json decoding the body into a map of raw
// messages (which also keeps the last of repeated keys): the same values for valid objects,
// an error exactly for the rest (and for what Parse rejects on purpose: invalid UTF-8 and
// nesting deeper than MaxDepth).
func FuzzTopLevel(f *testing.F) {
	for _, s := range append(fuzzSeeds, `{"user":"a","user":"b"}`, `{"\u0075ser":[{"user":2}]}`, ` {"system" : "x" } `) {
		f.Add([]byte(s), "user")
	}
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		names := []string{name, "system", "messages"}
		vals, err := TopLevel(body, names...)
		var m map[string]json.RawMessage
		jerr := json.Unmarshal(body, &m)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || vals != nil {
				t.Fatalf("error %v with values %q", err, vals)
			}
			if jerr == nil && m != nil && utf8.Valid(body) && !strings.Contains(err.Error(), "nesting") {
				t.Fatalf("valid object rejected: %v", err)
			}
			return
		}
		if jerr != nil || m == nil {
			t.Fatalf("accepted what encoding/json rejects (%v): %q", jerr, body)
		}
		for i, n := range names {
			want, ok := m[n]
			if ok != (vals[i] != nil) || !bytes.Equal(vals[i], want) {
				t.Fatalf("%q: %q, want %q (present %v)", n, vals[i], want, ok)
			}
		}
	})
}

// TestDuplicateField: the first repeated top-level name, escaped keys by their decoded text,
// nested repeats ignored, in every format; the re-encoded body keeps both copies, which is
// why a caller that edits the request must refuse it.
func TestDuplicateField(t *testing.T) {
	for _, tc := range []struct {
		f          Format
		body, want string
	}{
		{Anthropic, `{"model":"m","messages":[{"role":"user","content":"a"}]}`, ""},
		{Anthropic, `{"model":"m","messages":[],"messages":[{"role":"user","content":"a"}]}`, "messages"},
		{OpenAI, `{"model":"a","messages":[],"x":1,"model":"b"}`, "model"},
		{OpenAI, `{"x":1,"y":2,"\u0078":3,"messages":[]}`, "x"},
		{Responses, `{"model":"m","input":"a","input":[]}`, "input"},
		{Anthropic, `{"model":"m","metadata":{"a":1,"a":2},"messages":[]}`, ""},
	} {
		r, err := Parse(tc.f, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := r.DuplicateField(); got != tc.want {
			t.Errorf("%s: DuplicateField() = %q, want %q", tc.body, got, tc.want)
		}
	}
}
