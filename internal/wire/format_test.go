package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFormatText: every format's name parses back to it, in ParseFormat, in text and in JSON;
// the zero Format is "" both ways; other names are errors that list the valid ones.
func TestFormatText(t *testing.T) {
	for _, f := range []Format{Anthropic, OpenAI, Responses} {
		g, err := ParseFormat(f.String())
		if err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), g, err)
		}
		b, err := json.Marshal(struct{ F Format }{f})
		if err != nil || string(b) != `{"F":"`+f.String()+`"}` {
			t.Errorf("json.Marshal(%v) = %s, %v", f, b, err)
		}
		var v struct{ F Format }
		if err := json.Unmarshal(b, &v); err != nil || v.F != f {
			t.Errorf("json.Unmarshal(%s) = %v, %v", b, v.F, err)
		}
	}
	want := map[string]Format{"anthropic": Anthropic, "openai": OpenAI, "responses": Responses}
	if len(want) != len(formatNames)-1 {
		t.Fatalf("formatNames %q has formats this test does not know", formatNames)
	}

	b, err := json.Marshal(struct{ F Format }{})
	if err != nil || string(b) != `{"F":""}` {
		t.Errorf("zero Format marshals as %s, %v", b, err)
	}
	v := struct{ F Format }{OpenAI}
	if err := json.Unmarshal([]byte(`{"F":""}`), &v); err != nil || v.F != 0 {
		t.Errorf(`"" unmarshals as %v, %v`, v.F, err)
	}
	if err := json.Unmarshal([]byte(`{"F":null}`), &v); err != nil || v.F != 0 {
		t.Errorf("null changed the format: %v, %v", v.F, err)
	}

	for _, s := range []string{"", "Anthropic", "chat", "openai ", "gemini"} {
		if f, err := ParseFormat(s); err == nil || !strings.Contains(err.Error(), "want anthropic, openai or responses") ||
			!strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParseFormat(%q) = %v, %v", s, f, err)
		}
	}
	if err := v.F.UnmarshalText([]byte("chat")); err == nil || !strings.Contains(err.Error(), `unknown wire format "chat"`) {
		t.Errorf("UnmarshalText(chat): %v", err)
	}
	if b, err := Format(9).MarshalText(); err == nil {
		t.Errorf("Format(9) marshals as %q", b)
	}
	if s := Format(9).String(); s != "Format(9)" {
		t.Errorf("Format(9).String() = %q", s)
	}
}
