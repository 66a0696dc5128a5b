package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzParse checks, for any input: Parse never panics; it accepts exactly the valid JSON
// (differential against encoding/json plus UTF-8 validity, up to MaxDepth and schema rules); an accepted
// request serializes to the input slice itself; rebuilding every message and replacing
// every tool result yields a request that parses again with the new text.
func fuzzParse(t *testing.T, f Format, body []byte) {
	sameOnBothKernels(t, f, body)
	r, err := Parse(f, body)
	valid := json.Valid(body) && utf8.Valid(body) // invalid UTF-8 is rejected on purpose
	if err != nil {
		if r != nil {
			t.Fatal("request returned together with an error")
		}
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("untyped error %T: %v", err, err)
		}
		var se *SyntaxError
		if errors.As(err, &se) {
			if valid && !strings.Contains(se.Msg, "nesting") {
				t.Fatalf("valid JSON rejected as syntax error: %v", err)
			}
			if se.Offset < 0 || se.Offset > int64(len(body)) {
				t.Fatalf("offset %d outside input of %d bytes", se.Offset, len(body))
			}
		} else if !valid {
			t.Fatalf("invalid JSON reported as schema error: %v", err)
		}
		return
	}
	if !valid {
		t.Fatalf("invalid JSON accepted: %q", body)
	}
	checkDecodedText(t, r)
	out := r.Bytes()
	if !bytes.Equal(out, body) || (len(body) > 0 && &out[0] != &body[0]) {
		t.Fatal("unmodified request must serialize to its input slice")
	}
	msgs := make([]*Message, len(r.Messages))
	for i, m := range r.Messages {
		blocks := make([]*Block, len(m.Blocks))
		for j, b := range m.Blocks {
			blocks[j] = b
			if b.Kind == KindToolResult {
				blocks[j] = b.WithResultText("pruned\n" + b.ID)
			}
		}
		msgs[i] = m.WithBlocks(blocks)
	}
	nb := encoded(t, r.WithMessages(msgs))
	r2, err := Parse(f, nb)
	if err != nil {
		t.Fatalf("rebuilt request does not parse: %v\n%s", err, nb)
	}
	if len(r2.Messages) != len(r.Messages) {
		t.Fatalf("message count %d -> %d", len(r.Messages), len(r2.Messages))
	}
	for i, m := range r2.Messages {
		for _, b := range m.Blocks {
			if b.Kind == KindToolResult && b.ResultText() != "pruned\n"+b.ID {
				t.Fatalf("message %d: result text %q", i, b.ResultText())
			}
		}
	}
	_ = Validate(r)
}

var fuzzSeeds = []string{
	anthropicSample, openAISample, `{}`, `{"messages":[]}`, `[]`, `{"a":`, "{\"s\":\"\xff\"}",
	`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"a"}]}]}]}`,
	`{"messages":[{"role":"tool","tool_call_id":"c","content":null}]}`,
	`{"messages":[{"role":"user","content":"a","cache_control":{"type":"ephemeral"}}]}`,
}

// FuzzParseAnthropic fuzzes Parse for the Anthropic format.
func FuzzParseAnthropic(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { fuzzParse(t, Anthropic, body) })
}

// FuzzParseOpenAI fuzzes Parse for the OpenAI format.
func FuzzParseOpenAI(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { fuzzParse(t, OpenAI, body) })
}

// responsesSeeds are small Responses bodies covering each item kind and shape.
var responsesSeeds = []string{
	responsesSample, `{"input":"hi"}`, `{"input":[]}`, `{"input":5}`,
	`{"input":[{"role":"user","content":"a"},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"e"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"Exit code: 1\nOutput:\nx"}]}`,
	`{"input":[{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"p"},{"type":"custom_tool_call_output","call_id":"c","output":[{"type":"input_text","text":"a"}]}]}`,
	`{"input":[{"type":"local_shell_call","call_id":"l","action":{"type":"exec","command":["ls"]}},{"type":"local_shell_call_output","id":"l","output":"{\"output\":\"x\",\"metadata\":{\"exit_code\":3}}"}]}`,
	`{"input":[{"type":"compaction","encrypted_content":"x"},{"type":"message","role":"assistant","content":"a"},{"type":"item_reference","id":"r"}]}`,
}

// FuzzParseResponses fuzzes Parse for the Responses format.
func FuzzParseResponses(f *testing.F) {
	for _, s := range append(append([]string(nil), responsesSeeds...), fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { fuzzParse(t, Responses, body) })
}

// checkDecodedText compares every decoded text with encoding/json's decoding of the same
// bytes.
func checkDecodedText(t *testing.T, r *Request) {
	t.Helper()
	var check func(b *Block)
	check = func(b *Block) {
		if b.Kind == KindText {
			var want string
			var err error
			if b.IsStringForm() {
				err = json.Unmarshal(b.Raw(), &want)
			} else {
				// A map, not a struct: encoding/json matches struct fields case-insensitively,
				// providers (and Parse) match keys exactly.
				var obj map[string]json.RawMessage
				if err = json.Unmarshal(b.Raw(), &obj); err == nil {
					if raw, ok := obj["text"]; ok {
						err = json.Unmarshal(raw, &want)
					} else if raw, ok := obj["content"]; ok && b.Format() == Responses {
						want, err = responsesItemText(raw) // an assistant message item
					}
				}
			}
			if err == nil && want != b.Text() {
				t.Fatalf("decoded text %q, encoding/json says %q (raw %s)", b.Text(), want, b.Raw())
			}
		}
		for _, c := range b.Content {
			check(c)
		}
	}
	for _, b := range r.System {
		check(b)
	}
	for _, m := range r.Messages {
		for _, b := range m.Blocks {
			check(b)
		}
	}
}

// responsesItemText decodes a Responses message item's content as the parser's Text: the
// string, or the "text" members of the part objects joined with "\n".
func responsesItemText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var texts []string
	for _, p := range parts {
		var obj map[string]json.RawMessage
		if json.Unmarshal(p, &obj) != nil {
			continue
		}
		if t, ok := obj["text"]; ok {
			var s string
			if err := json.Unmarshal(t, &s); err == nil {
				texts = append(texts, s)
			}
		}
	}
	return strings.Join(texts, "\n"), nil
}

// sameOnBothKernels checks that Parse returns the same request, or the same error, on
// the SIMD and on the portable string kernels.
func sameOnBothKernels(t *testing.T, f Format, body []byte) {
	t.Helper()
	var fast, port *Request
	var ferr, perr error
	withKernels(false, func() { fast, ferr = Parse(f, body) })
	withKernels(true, func() { port, perr = Parse(f, body) })
	if fmt.Sprint(ferr) != fmt.Sprint(perr) || reflect.TypeOf(ferr) != reflect.TypeOf(perr) {
		t.Fatalf("SIMD kernels: error %v; portable kernels: error %v", ferr, perr)
	}
	if !reflect.DeepEqual(fast, port) {
		t.Fatal("SIMD and portable kernels parse to different requests")
	}
}
