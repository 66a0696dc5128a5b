package pruner

import (
	"bytes"
	"encoding/json"
	"testing"
)

// pathArgOracle is the definition pathArg must match (its earlier implementation): a raw
// `"path"` key must occur; decode the arguments into a map with encoding/json, then decode its
// "path" member as a string (null decodes to "").
func pathArgOracle(raw []byte) (string, bool) {
	if !bytes.Contains(raw, []byte(`"path"`)) {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return "", false
	}
	v, ok := m["path"]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

var pathArgSeeds = []string{
	`{"path":"a/b.go"}`, `{"path":"a","path":"b"}`, `{"path":"a","path":1}`, `{"path":42}`,
	`{"x":{"path":"inner"}}`, `{"path":"caf\u00e9 \"q\" \ud83d\ude00"}`, `{"path":"\ud800"}`,
	"{\"path\":\"bad \xff utf8\"}", `{"path":null}`, `null`, `["path"]`, `"path"`, `{"path":"x"} trailing`,
	`{"path" : "spaced" , "n":1}`, `{"pat\u0068":"escaped key"}`, `{"path":"a"`, ` {"content":"the \"path\" word"} `,
}

func TestPathArgMatchesEncodingJSON(t *testing.T) {
	for _, s := range pathArgSeeds {
		got, ok := pathArg([]byte(s))
		want, wok := pathArgOracle([]byte(s))
		if got != want || ok != wok {
			t.Errorf("pathArg(%s) = %q, %v; encoding/json: %q, %v", s, got, ok, want, wok)
		}
	}
}

func FuzzPathArg(f *testing.F) {
	for _, s := range pathArgSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := pathArg(raw)
		want, wok := pathArgOracle(raw)
		if ok != wok || got != want {
			t.Fatalf("pathArg(%q) = %q, %v; encoding/json: %q, %v", raw, got, ok, want, wok)
		}
	})
}
