package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

const anthropicSample = `{
  "model": "claude-sonnet-4-5",
  "max_tokens": 1024,
  "system": [{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],
  "tools": [{"name":"bash","description":"run","input_schema":{"type":"object"}}, {"type":"web_search_20250305","name":"web_search"}],
  "x-unknown": {"keep": [1, 2.5e3, null]},
  "messages": [
    {"role":"user","content":"hi there"},
    {"role":"assistant","content":[
      {"type":"thinking","thinking":"hmm","signature":"sig=="},
      {"type":"redacted_thinking","data":"abc"},
      {"type":"text","text":"I'll look"},
      {"type":"tool_use","id":"toolu_1","name":"bash","input":{"cmd":"ls -la","n":1}},
      {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go"}},
      {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://x","title":"t"}]},
      {"type":"mcp_tool_use","id":"m1","weird":true}
    ]},
    {"role":"user","content":[
      {"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"exit 1\nno such file","cache_control":{"type":"ephemeral"},"zz":"keep"},
      {"type":"text","text":"and \u00e9\ud83d\ude00"},
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},
      {"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"}}
    ]},
    {"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"read","input":{}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"line1"},{"type":"image","source":{}},{"type":"text","text":"line2"}]}]}
  ],
  "stream": true,
  "metadata": {"user_id": "u"}
}
`

const openAISample = `{"model":"gpt-5","messages":[
 {"role":"system","content":"be brief"},
 {"role":"developer","content":[{"type":"text","text":"dev"}]},
 {"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:x"}},{"type":"file","file":{"file_id":"f"}},{"type":"input_audio","input_audio":{"data":"a","format":"wav"}}]},
 {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"cmd\": \"ls\"}"}},{"id":"call_2","type":"function","function":{"name":"read","arguments":"{}"}}],"refusal":null},
 {"role":"tool","tool_call_id":"call_1","content":"a.txt\nb.txt","x":1},
 {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"p1"},{"type":"text","text":"p2"}]},
 {"role":"assistant","content":"done"},
 {"role":"function","name":"legacy","content":"kept"}
],"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}],"stream":false,"temperature":0.2}`

func mustParse(t *testing.T, f Format, s string) *Request {
	t.Helper()
	r, err := Parse(f, []byte(s))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

func TestParseAnthropicModel(t *testing.T) {
	r := mustParse(t, Anthropic, anthropicSample)
	if r.Model != "claude-sonnet-4-5" || !r.Stream || r.Format != Anthropic {
		t.Fatalf("model/stream: %q %v", r.Model, r.Stream)
	}
	if len(r.System) != 1 || r.System[0].Text() != "sys" || string(r.System[0].CacheControl) != `{"type":"ephemeral"}` {
		t.Fatalf("system: %+v", r.System)
	}
	if len(r.Tools) != 2 || r.Tools[0].Name != "bash" || r.Tools[1].Name != "web_search" {
		t.Fatalf("tools: %+v", r.Tools)
	}
	if len(r.Messages) != 5 {
		t.Fatalf("messages: %d", len(r.Messages))
	}
	m0 := r.Messages[0]
	if m0.Role != RoleUser || !m0.StringContent || len(m0.Blocks) != 1 || m0.Blocks[0].Text() != "hi there" || string(m0.Blocks[0].Raw()) != `"hi there"` {
		t.Fatalf("m0: %+v", m0)
	}
	a := r.Messages[1].Blocks
	wantKinds := []Kind{KindThinking, KindRedactedThinking, KindText, KindToolUse, KindServerToolUse, KindWebSearchToolResult, KindUnknown}
	if len(a) != len(wantKinds) {
		t.Fatalf("assistant blocks %d", len(a))
	}
	for i, k := range wantKinds {
		if a[i].Kind != k {
			t.Errorf("block %d kind %v want %v", i, a[i].Kind, k)
		}
	}
	if a[0].Text() != "hmm" || a[0].Signature != "sig==" {
		t.Errorf("thinking %+v", a[0])
	}
	if a[3].ID != "toolu_1" || a[3].Name != "bash" || string(a[3].Input) != `{"cmd":"ls -la","n":1}` {
		t.Errorf("tool_use %+v", a[3])
	}
	if a[5].ID != "srvtoolu_1" || a[5].Name != "web_search" {
		t.Errorf("web search result %+v", a[5])
	}
	if a[6].Type != "mcp_tool_use" || string(a[6].Raw()) != `{"type":"mcp_tool_use","id":"m1","weird":true}` {
		t.Errorf("unknown %+v", a[6])
	}
	u := r.Messages[2].Blocks
	tr := u[0]
	if tr.Kind != KindToolResult || tr.ID != "toolu_1" || !tr.IsError || !tr.ContentString || tr.ResultText() != "exit 1\nno such file" || tr.Name != "bash" {
		t.Errorf("tool_result %+v", tr)
	}
	if u[1].Text() != "and é😀" {
		t.Errorf("escaped text %q", u[1].Text())
	}
	if u[2].Kind != KindImage || u[3].Kind != KindDocument {
		t.Errorf("image/document kinds %v %v", u[2].Kind, u[3].Kind)
	}
	tr2 := r.Messages[4].Blocks[0]
	if tr2.ContentString || len(tr2.Content) != 3 || tr2.ResultText() != "line1\nline2" || tr2.Name != "read" {
		t.Errorf("array tool_result %+v %q", tr2, tr2.ResultText())
	}
	if v, ok := r.Field("x-unknown"); !ok || string(v) != `{"keep": [1, 2.5e3, null]}` {
		t.Errorf("Field: %s %v", v, ok)
	}
	if _, ok := r.Field("nope"); ok {
		t.Error("Field of absent key")
	}
}

func TestParseOpenAIModel(t *testing.T) {
	r := mustParse(t, OpenAI, openAISample)
	if r.Model != "gpt-5" || r.Stream || r.System != nil || len(r.Tools) != 1 || r.Tools[0].Name != "bash" {
		t.Fatalf("top: %+v", r)
	}
	roles := []Role{"system", "developer", "user", "assistant", "tool", "tool", "assistant", "function"}
	if len(r.Messages) != len(roles) {
		t.Fatalf("messages %d", len(r.Messages))
	}
	for i, ro := range roles {
		if r.Messages[i].Role != ro {
			t.Errorf("role %d = %q", i, r.Messages[i].Role)
		}
	}
	u := r.Messages[2].Blocks
	if len(u) != 4 || u[0].Kind != KindText || u[1].Kind != KindImage || u[2].Kind != KindDocument || u[3].Kind != KindUnknown {
		t.Errorf("user parts %+v", u)
	}
	a := r.Messages[3]
	if len(a.Blocks) != 2 || a.Blocks[0].Kind != KindToolUse || a.Blocks[0].ID != "call_1" || a.Blocks[0].Name != "bash" || string(a.Blocks[0].Input) != `{"cmd": "ls"}` {
		t.Fatalf("assistant tool calls %+v", a.Blocks)
	}
	tm := r.Messages[4]
	if len(tm.Blocks) != 1 || tm.Blocks[0].Kind != KindToolResult || tm.Blocks[0].ID != "call_1" || tm.Blocks[0].ResultText() != "a.txt\nb.txt" || !tm.StringContent || tm.Blocks[0].Name != "bash" {
		t.Fatalf("tool message %+v", tm.Blocks[0])
	}
	if !bytes.Equal(tm.Blocks[0].Raw(), tm.Raw()) {
		t.Error("OpenAI tool result raw must be the message object")
	}
	if got := r.Messages[5].Blocks[0].ResultText(); got != "p1\np2" {
		t.Errorf("parts result %q", got)
	}
	if r.Messages[6].Blocks[0].Text() != "done" {
		t.Error("assistant text")
	}
}

func TestRoundTripUnmodified(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Format
		body string
	}{
		{"anthropic", Anthropic, anthropicSample},
		{"openai", OpenAI, openAISample},
		{"minimal", Anthropic, `{}`},
		{"ws", OpenAI, " \n{ \"messages\" : [ ] } \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			r, err := Parse(tc.f, body)
			if err != nil {
				t.Fatal(err)
			}
			out := r.Bytes()
			if r.modified() || !bytes.Equal(out, body) || &out[0] != &body[0] {
				t.Fatalf("unmodified request must return the input slice itself")
			}
			// Re-emitting every list with the same elements yields identical bytes.
			msgs := make([]*Message, len(r.Messages))
			for i, m := range r.Messages {
				msgs[i] = m.WithBlocks(m.Blocks)
			}
			r2 := r.WithMessages(msgs)
			if len(msgs) > 0 && !r2.modified() {
				t.Fatal("WithMessages with new messages must be modified")
			}
			if got := r2.Bytes(); !bytes.Equal(got, body) {
				t.Fatalf("rebuild differs:\n%s\n---\n%s", got, body)
			}
		})
	}
}

func TestReplaceOneToolResultChangesOnlyThatBlock(t *testing.T) {
	r := mustParse(t, Anthropic, anthropicSample)
	m := r.Messages[2]
	old := m.Blocks[0]
	nb := old.WithResultText("[pruned]")
	want := strings.Replace(string(old.Raw()), `"exit 1\nno such file"`, `"[pruned]"`, 1)
	if string(nb.Raw()) != want {
		t.Fatalf("block: %s\nwant %s", nb.Raw(), want)
	}
	if string(old.Raw()) == want || old.ResultText() != "exit 1\nno such file" {
		t.Fatal("receiver was modified")
	}
	if !nb.IsError || string(nb.CacheControl) != `{"type":"ephemeral"}` || nb.ResultText() != "[pruned]" {
		t.Fatalf("fields: %+v", nb)
	}
	blocks := append([]*Block{nb}, m.Blocks[1:]...)
	msgs := append([]*Message(nil), r.Messages...)
	msgs[2] = m.WithBlocks(blocks)
	r2 := r.WithMessages(msgs)
	got := r2.Bytes()
	wantBody := strings.Replace(anthropicSample, string(old.Raw()), want, 1)
	if string(got) != wantBody {
		t.Fatalf("request:\n%s\nwant\n%s", got, wantBody)
	}
	if !bytes.Equal(r.Bytes(), []byte(anthropicSample)) {
		t.Fatal("original request changed")
	}
	// Reparse: the model follows.
	r3, err := Parse(Anthropic, got)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Messages[2].Blocks[0].ResultText() != "[pruned]" {
		t.Fatal("reparse")
	}
}

func TestOpenAIModifications(t *testing.T) {
	r := mustParse(t, OpenAI, openAISample)
	tm := r.Messages[4]
	nb := tm.Blocks[0].WithResultText("gone")
	nm := tm.WithBlocks([]*Block{nb})
	if string(nm.Raw()) != `{"role":"tool","tool_call_id":"call_1","content":"gone","x":1}` {
		t.Fatalf("tool message: %s", nm.Raw())
	}
	a := r.Messages[3]
	call := a.Blocks[0].WithInput([]byte(`{"cmd":"pwd"}`))
	if string(call.Input) != `{"cmd":"pwd"}` {
		t.Fatal(string(call.Input))
	}
	na := a.WithBlocks([]*Block{call, a.Blocks[1]})
	wantA := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"pwd\"}"}},{"id":"call_2","type":"function","function":{"name":"read","arguments":"{}"}}],"refusal":null}`
	if string(na.Raw()) != wantA {
		t.Fatalf("assistant:\n%s\nwant\n%s", na.Raw(), wantA)
	}
	// Dropping all tool calls removes the member; text goes to content.
	nt := a.WithBlocks([]*Block{NewTextBlock(OpenAI, "x")})
	if string(nt.Raw()) != `{"role":"assistant","content":[{"type":"text","text":"x"}],"refusal":null}` {
		t.Fatalf("no calls: %s", nt.Raw())
	}
	msgs := append([]*Message(nil), r.Messages...)
	msgs[4] = nm
	msgs = append(msgs, NewTextMessage(OpenAI, RoleUser, "more \"quoted\"\n"))
	r2 := r.WithMessages(msgs)
	got := string(r2.Bytes())
	want := strings.Replace(openAISample, `"content":"a.txt\nb.txt"`, `"content":"gone"`, 1)
	want = strings.Replace(want, `"content":"kept"}`+"\n]", `"content":"kept"},{"role":"user","content":"more \"quoted\"\n"}`+"\n]", 1)
	if got != want {
		t.Fatalf("request:\n%s\nwant\n%s", got, want)
	}
	if _, err := Parse(OpenAI, []byte(got)); err != nil {
		t.Fatal(err)
	}
}

func TestTopLevelModifications(t *testing.T) {
	r := mustParse(t, Anthropic, `{"model":"a", "system":"s","stream":false,"z":[1]}`)
	r2 := r.WithField("z", []byte(`{"q":2}`)).WithField("new", []byte(`"v"`))
	if got := string(encoded(t, r2)); got != `{"model":"a", "system":"s","stream":false,"z":{"q":2},"new":"v"}` {
		t.Fatalf("WithField: %s", got)
	}
	if r.WithField("z", []byte(`{bad`)) != r {
		t.Fatal("invalid raw must leave the request unchanged")
	}
	if _, err := r.SetField("z", []byte(`{bad`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetField error: %v", err)
	}
	r3 := r.WithSystem(nil)
	r3.Model = "b"
	r3.Stream = true
	if got := string(encoded(t, r3)); got != `{"model":"b", "stream":true,"z":[1]}` {
		t.Fatalf("system removed: %s", got)
	}
	r4 := r.WithSystem([]*Block{r.System[0], NewTextBlock(Anthropic, "more").WithCacheControl([]byte(`{"type":"ephemeral"}`))})
	if got := string(encoded(t, r4)); got != `{"model":"a", "system":[{"type":"text","text":"s"},{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}],"stream":false,"z":[1]}` {
		t.Fatalf("system blocks: %s", got)
	}
	r5, err := r.SetField("model", []byte(`"m2"`))
	if err != nil || r5.Model != "m2" || string(encoded(t, r5)) != `{"model":"m2", "system":"s","stream":false,"z":[1]}` {
		t.Fatalf("SetField model: %v %s", err, r5.Bytes())
	}
	tl, err := NewTool(Anthropic, []byte(`{"name":"t","input_schema":{}}`))
	if err != nil || tl.Name != "t" {
		t.Fatal(err)
	}
	r6 := r.WithTools([]*Tool{tl})
	if got := string(encoded(t, r6)); got != `{"model":"a", "system":"s","stream":false,"z":[1],"tools":[{"name":"t","input_schema":{}}]}` {
		t.Fatalf("tools added: %s", got)
	}
}

// TestOpenAIStreamNull: OpenAI's stream is "boolean or null"; null parses as not streamed and
// is re-encoded as it was when the request is modified (a tool added). Anthropic's stream is
// a boolean only.
func TestOpenAIStreamNull(t *testing.T) {
	r := mustParse(t, OpenAI, `{"model":"m","stream":null,"stream_options":null,"x":[1, 2],"messages":[{"role":"user","content":"hi"}]}`)
	if r.Stream {
		t.Fatal("stream null parsed as streamed")
	}
	tl, err := NewTool(OpenAI, []byte(`{"type":"function","function":{"name":"t"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(encoded(t, r.WithTools([]*Tool{tl}))); got != `{"model":"m","stream":null,"stream_options":null,"x":[1, 2],"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"t"}}]}` {
		t.Fatalf("re-encoded: %s", got)
	}
	var se *SchemaError
	if _, err := Parse(Anthropic, []byte(`{"model":"m","stream":null}`)); !errors.As(err, &se) || se.Path != "stream" {
		t.Fatalf("anthropic stream null: %v", err)
	}
}

func TestBlockModifiersKeepOtherMembers(t *testing.T) {
	r := mustParse(t, Anthropic, anthropicSample)
	tu := r.Messages[1].Blocks[3]
	nb := tu.WithInput([]byte(`{"cmd":"pwd"}`))
	if string(nb.Raw()) != `{"type":"tool_use","id":"toolu_1","name":"bash","input":{"cmd":"pwd"}}` || string(nb.Input) != `{"cmd":"pwd"}` {
		t.Fatalf("WithInput: %s", nb.Raw())
	}
	if tu.WithInput([]byte(`{`)) != tu {
		t.Fatal("invalid input must be refused")
	}
	if _, err := tu.setInput([]byte(`{`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("setInput err %v", err)
	}
	tr := r.Messages[2].Blocks[0]
	nc := tr.WithCacheControl(nil)
	if string(nc.Raw()) != `{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"exit 1\nno such file","zz":"keep"}` || nc.CacheControl != nil {
		t.Fatalf("remove cache_control: %s", nc.Raw())
	}
	s := r.Messages[0].Blocks[0].WithCacheControl([]byte(`{"type":"ephemeral"}`))
	if string(s.Raw()) != `{"type":"text","text":"hi there","cache_control":{"type":"ephemeral"}}` {
		t.Fatalf("string block cache_control: %s", s.Raw())
	}
	first := mustParse(t, Anthropic, `{"messages":[{"role":"user","content":[{"cache_control":{},"type":"text","text":"a"}]}]}`).Messages[0].Blocks[0]
	if got := string(first.WithCacheControl(nil).Raw()); got != `{"type":"text","text":"a"}` {
		t.Fatalf("remove first member: %s", got)
	}
}

func TestCorpusRoundTrip(t *testing.T) {
	n := 0
	for _, p := range corpus.Files(t) {
		base := filepath.Base(p)
		if !strings.HasPrefix(base, "ccspot_") && !strings.HasPrefix(base, "cccodemie_") {
			continue
		}
		body := claudeCodeRequest(t, p)
		r, err := Parse(Anthropic, body)
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if !bytes.Equal(r.Bytes(), body) {
			t.Fatalf("%s: round trip differs", base)
		}
		checkDecodedText(t, r)
		// Replace the first tool result: only that block's bytes change.
		for mi, m := range r.Messages {
			for bi, b := range m.Blocks {
				if b.Kind != KindToolResult {
					continue
				}
				nb := b.WithResultText("[pruned]")
				blocks := append([]*Block(nil), m.Blocks...)
				blocks[bi] = nb
				msgs := append([]*Message(nil), r.Messages...)
				msgs[mi] = m.WithBlocks(blocks)
				got := encoded(t, r.WithMessages(msgs))
				off := offsetIn(body, b.Raw())
				want := append(append(append([]byte(nil), body[:off]...), nb.Raw()...), body[off+len(b.Raw()):]...)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: replacing message %d block %d changed other bytes", base, mi, bi)
				}
				goto done
			}
		}
	done:
		n++
	}
	t.Logf("%d corpus requests round-tripped", n)
}

// TestCorpusOpenAIRoundTrip feeds the OpenAI-native corpus conversations (mini-SWE-agent
// "messages" and SWE-agent "history", each entry verbatim with its extra members) through
// the OpenAI parser: byte-identical round trip, and replacing one message's content changes
// only that member.
func TestCorpusOpenAIRoundTrip(t *testing.T) {
	n := 0
	for _, p := range corpus.Files(t) {
		base := filepath.Base(p)
		var key string
		switch {
		case strings.HasPrefix(base, "msa_"):
			key = "messages"
		case strings.HasPrefix(base, "sweagent_"):
			key = "history"
		default:
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		body := append(append([]byte(`{"model":"gpt-4o","messages":`), doc[key]...), '}')
		r, err := Parse(OpenAI, body)
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if len(r.Messages) < 3 || !bytes.Equal(r.Bytes(), body) {
			t.Fatalf("%s: %d messages, round trip equal=%v", base, len(r.Messages), bytes.Equal(r.Bytes(), body))
		}
		mi := len(r.Messages) / 2
		m := r.Messages[mi]
		nm := m.WithBlocks([]*Block{NewTextBlock(OpenAI, "replaced")})
		if m.Role == RoleTool {
			nm = m.WithBlocks([]*Block{m.Blocks[0].WithResultText("replaced")})
		}
		msgs := append([]*Message(nil), r.Messages...)
		msgs[mi] = nm
		got := encoded(t, r.WithMessages(msgs))
		off := offsetIn(body, m.Raw())
		want := append(append(append([]byte(nil), body[:off]...), nm.Raw()...), body[off+len(m.Raw()):]...)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: replacing message %d changed other bytes", base, mi)
		}
		n++
	}
	t.Logf("%d OpenAI corpus conversations round-tripped", n)
}

func TestInPlaceMessageAssignmentIsSeen(t *testing.T) {
	r := mustParse(t, Anthropic, `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`)
	r.Messages[1] = NewTextMessage(Anthropic, RoleAssistant, "c")
	if !r.modified() {
		t.Fatal("in-place assignment not detected")
	}
	if got := string(r.Bytes()); got != `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"c"}]}` {
		t.Fatalf("got %s", got)
	}
	if r.Messages[1].Raw() != nil || string(r.Messages[1].Bytes()) != `{"role":"assistant","content":"c"}` {
		t.Fatal("constructed message Raw/Bytes")
	}
}

func TestToolCacheControlCounted(t *testing.T) {
	cc := `"cache_control":{"type":"ephemeral"}`
	r := mustParse(t, Anthropic, `{"tools":[{"name":"a",`+cc+`},{"name":"b",`+cc+`}],"system":[{"type":"text","text":"s",`+cc+`}],"messages":[{"role":"user","content":[{"type":"text","text":"x",`+cc+`},{"type":"text","text":"y",`+cc+`}]}]}`)
	if string(r.Tools[0].CacheControl) != `{"type":"ephemeral"}` {
		t.Fatal("tool cache_control")
	}
	checkRule(t, Validate(r), RuleCacheControl, 0)
}

func TestAddMembersToEmptyAndPrettyRequests(t *testing.T) {
	r := mustParse(t, Anthropic, " {}\n")
	r2 := r.WithMessages([]*Message{NewTextMessage(Anthropic, RoleUser, "hi")})
	r2.Model = "m"
	if got := string(encoded(t, r2)); got != " {\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"model\":\"m\"}\n" {
		t.Fatalf("got %q", got)
	}
	pretty := "{\n  \"model\": \"m\",\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"a\"},\n    {\"role\": \"assistant\", \"content\": \"b\"}\n  ]\n}\n"
	p := mustParse(t, Anthropic, pretty)
	msgs := append([]*Message(nil), p.Messages...)
	msgs[1] = NewTextMessage(Anthropic, RoleAssistant, "c")
	want := strings.Replace(pretty, `{"role": "assistant", "content": "b"}`, `{"role":"assistant","content":"c"}`, 1)
	if got := string(encoded(t, p.WithMessages(msgs))); got != want {
		t.Fatalf("pretty request lost its layout:\n%s\nwant\n%s", got, want)
	}
	// Appending a message keeps the existing separators and uses "," for the new one.
	msgs = append(append([]*Message(nil), p.Messages...), NewTextMessage(Anthropic, RoleUser, "d"))
	want = strings.Replace(pretty, `"content": "b"}`, `"content": "b"},{"role":"user","content":"d"}`, 1)
	if got := string(encoded(t, p.WithMessages(msgs))); got != want {
		t.Fatalf("append:\n%s\nwant\n%s", got, want)
	}
}

// TestEscapedKeys: keys written with escapes name the same members as plain ones, and a
// key whose literal is no longer than a name but differs from it never matches it.
func TestEscapedKeys(t *testing.T) {
	body := []byte(`{"m\u006fdel":"m","m\u0065ssages":[{"r\u006fle":"user","c\u006fntent":[` +
		`{"typ\u0065":"text","t\u0065xt":"hi","tex\"":"no","te\\t":"no2"}]}]}`)
	r, err := Parse(Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "m" || len(r.Messages) != 1 || r.Messages[0].Role != RoleUser {
		t.Fatalf("model %q, %d messages", r.Model, len(r.Messages))
	}
	b := r.Messages[0].Blocks[0]
	if b.Kind != KindText || b.Text() != "hi" {
		t.Fatalf("block %v %q", b.Kind, b.Text())
	}
	for lit, want := range map[string]bool{`"text"`: true, `"t\u0065xt"`: true, `"tex\""`: false, `"te\\t"`: false, `"tex"`: false, `"texts"`: false, `"\u0074\u0065\u0078\u0074"`: true, `"\u0074ext"`: true, `"x\u0065xt"`: false} {
		if got := keyMatch([]byte(lit), "text"); got != want {
			t.Errorf("keyMatch(%s, text) = %v", lit, got)
		}
	}
}

// TestFieldOfMatchesKeyMatch: the block and item parsers' one-switch key classification
// names a field exactly when keyMatch would match that field's name (escaped keys included).
func TestFieldOfMatchesKeyMatch(t *testing.T) {
	lits := []string{`""`, `"x"`, `"typ"`, `"types"`, `"\u0074ype"`, `"t\u0079pe"`, `"tool_use_i\u0064"`,
		`"cache\u005fcontrol"`, `"is_error "`, `"\"id"`, `"i\\d"`, `"na\u006de"`, `"in\/put"`}
	for _, n := range fieldNames[1:] {
		lits = append(lits, `"`+n+`"`, `"`+n+`x"`, `"\u00`+fmt.Sprintf("%02x", n[0])+n[1:]+`"`)
	}
	for _, lit := range lits {
		f := fieldOf([]byte(lit))
		for g, n := range fieldNames[1:] {
			if want := keyMatch([]byte(lit), n); (f == g+1) != want {
				t.Errorf("fieldOf(%s) = %d, keyMatch(%s, %q) = %v", lit, f, lit, n, want)
			}
		}
	}
}

// TestBlockDuplicateKeysLastWins: when a block repeats a key, its last member is the one
// read (as object lookups find it), whatever the earlier ones held.
func TestBlockDuplicateKeysLastWins(t *testing.T) {
	parse := func(blocks string) (*Block, error) {
		r, err := Parse(Anthropic, []byte(`{"messages":[{"role":"user","content":[`+blocks+`]}]}`))
		if err != nil {
			return nil, err
		}
		return r.Messages[0].Blocks[0], nil
	}
	for _, tc := range []struct{ in, text string }{
		{`{"type":"text","text":"a","text":"b"}`, "b"},
		{`{"type":"text","text":"a","t\u0065xt":"b\n"}`, "b\n"},
		{`{"type":"text","text":1,"text":"c"}`, "c"},
		{`{"type":"thinking","thinking":"a","signature":"s","thinking":"\u00e9"}`, "é"},
		{`{"type":"image","type":"text","text":"t"}`, "t"},
	} {
		b, err := parse(tc.in)
		if err != nil || b.Text() != tc.text {
			t.Errorf("%s: text %q, %v; want %q", tc.in, b.Text(), err, tc.text)
		}
	}
	b, err := parse(`{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"arr"}],"content":"str"}`)
	if err != nil || !b.ContentString || b.ResultText() != "str" || b.Content[0].Kind != KindText {
		t.Errorf("tool_result string after array: %+v, %v", b, err)
	}
	b, err = parse(`{"type":"tool_result","tool_use_id":"x","content":"str","content":[{"type":"text","text":"arr"}],"is_error":false,"is_error":true}`)
	if err != nil || b.ContentString || b.ResultText() != "arr" || !b.IsError {
		t.Errorf("tool_result array after string: %+v, %v", b, err)
	}
	var se *SchemaError
	if _, err := parse(`{"type":"text","text":"a","text":1}`); !errors.As(err, &se) || se.Path != "messages[0].content[0].text" || se.Offset != 72 {
		t.Errorf("non-string last text: %v", err)
	}
	if _, err := parse(`{"type":"tool_use","id":"a","name":"n","name":[]}`); !errors.As(err, &se) || se.Path != "messages[0].content[0].name" {
		t.Errorf("non-string last name: %v", err)
	}
}

// TestCallIndexMatchesMap: callIndex names each result like a map of the latest call
// per id would, whether the call is inside its search window or far behind it.
func TestCallIndexMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var x callIndex
		want := map[string]string{}
		ids := 1 + rng.IntN(3*callWindow)
		for op := 0; op < 300; op++ {
			id := fmt.Sprintf("toolu_%d", rng.IntN(ids))
			if rng.IntN(2) == 0 {
				name := fmt.Sprintf("tool%d", op)
				x.add(&Block{ID: id, Name: name})
				want[id] = name
				continue
			}
			if got := x.name(id); got != want[id] {
				t.Fatalf("round %d op %d: name(%s) = %q, want %q", round, op, id, got, want[id])
			}
		}
	}
}

// TestIdentitySum: a block's cached fingerprint is the xxhash of its ResultText (results)
// or Input (other blocks), for string, multi-part, non-text and empty result content in
// both formats; repeats answer the same; ResultTextLen matches; and a copy made by
// WithResultText fingerprints its own text, not the cached one of the block it came from.
func TestIdentitySum(t *testing.T) {
	anth := `{"model":"m","messages":[
	  {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{"cmd":"ls"}},
	    {"type":"tool_use","id":"b","name":"bash","input":{}},{"type":"tool_use","id":"c","name":"read","input":{"p":1}},
	    {"type":"tool_use","id":"d","name":"img","input":{}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"one\ntwo"},
	    {"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"x"},{"type":"image","source":{}},{"type":"text","text":"y\u00e9"}]},
	    {"type":"tool_result","tool_use_id":"c","content":[]},
	    {"type":"tool_result","tool_use_id":"d","content":[{"type":"image","source":{}}]}]}]}`
	oai := `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"q","type":"function","function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]},
	  {"role":"tool","tool_call_id":"q","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`
	checked := 0
	for _, c := range []struct {
		f    Format
		body string
	}{{Anthropic, anth}, {OpenAI, oai}} {
		r, err := Parse(c.f, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			for _, b := range m.Blocks {
				want := xxhash.Sum64(b.Input)
				if b.Kind == KindToolResult {
					want = xxhash.Sum64String(b.ResultText())
				}
				for range 2 {
					if got := b.IdentitySum(); got != want {
						t.Fatalf("%v block %q: IdentitySum %x, want %x", c.f, b.ID, got, want)
					}
				}
				if b.Kind == KindToolResult { // b's fingerprint is cached by now
					if b.ResultTextLen() != len(b.ResultText()) {
						t.Errorf("%s: ResultTextLen %d, len(ResultText) %d", b.ID, b.ResultTextLen(), len(b.ResultText()))
					}
					if got := b.WithResultText("stub " + b.ID).IdentitySum(); got != xxhash.Sum64String("stub "+b.ID) {
						t.Errorf("%s: the WithResultText copy kept a stale fingerprint", b.ID)
					}
				}
				checked++
			}
		}
	}
	if checked != 10 {
		t.Fatalf("checked %d blocks, want 10", checked)
	}
}

// TestBlockCloneCopiesEveryField: clone copies every field but the object (replaced), the
// string-form literal (dropped), the cached identity sum (recomputed), the WithResultText
// memo, the pair memo and the decoded text (decoded again when read). Adding a field
// to Block fails the count below until clone and this test handle it.
func TestBlockCloneCopiesEveryField(t *testing.T) {
	if n := reflect.TypeFor[Block]().NumField(); n != 21 {
		t.Fatalf("Block has %d fields, this test and Block.clone know 21", n)
	}
	decoded := "t\n"
	b := &Block{Kind: KindToolResult, Type: "tool_result", text: `t\n`, textEsc: true, Signature: "s", ID: "i", Name: "n",
		Input: []byte("{}"), IsError: true, Content: []*Block{{text: "c"}}, ContentString: true,
		CacheControl: []byte(`{"type":"ephemeral"}`), f: OpenAI, obj: &object{}, str: []byte(`"x"`),
		fn: &object{}, contentArr: &array{}, idSum: 7, resultMemo: unsafe.Pointer(&textMemo{}), pairMemo: unsafe.Pointer(&pairMemo{}),
		textDec: unsafe.Pointer(&decoded)}
	obj := &object{}
	c := b.clone(obj)
	want := *b
	want.obj, want.str, want.idSum, want.resultMemo, want.pairMemo, want.textDec = obj, nil, 0, nil, nil, nil
	if !reflect.DeepEqual(*c, want) {
		t.Fatalf("clone:\n%+v\nwant\n%+v", *c, want)
	}
}

// TestModifierMemos: WithResultText and WithBlocks give the same value back for a repeat
// (the same text; blocks with the same pointers in a new slice) and a fresh, correct one
// otherwise, and the WithBlocks memo is not changed by the caller reusing its slice.
func TestModifierMemos(t *testing.T) {
	r, err := Parse(Anthropic, []byte(`{"model":"m","messages":[
	  {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{}},{"type":"tool_use","id":"b","name":"bash","input":{}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"long output a"},{"type":"tool_result","tool_use_id":"b","content":"long output b"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := r.Messages[1]
	a, b := m.Blocks[0], m.Blocks[1]
	sa := a.WithResultText("[t1] stub")
	if a.WithResultText("[t1] stub") != sa {
		t.Fatal("WithResultText: a repeat re-encoded the block")
	}
	if got := a.WithResultText("[t2] other"); got == sa || got.ResultText() != "[t2] other" ||
		!bytes.Equal(got.Raw(), a.withResultText("[t2] other").Raw()) {
		t.Fatalf("WithResultText with another text: %s", got.Raw())
	}
	if sa.ResultText() != "[t1] stub" || !bytes.Equal(sa.Raw(), a.withResultText("[t1] stub").Raw()) {
		t.Fatalf("the first result changed: %s", sa.Raw())
	}

	bs := []*Block{sa, b}
	m1 := m.WithBlocks(bs)
	if m.WithBlocks([]*Block{sa, b}) != m1 {
		t.Fatal("WithBlocks: the same blocks in a new slice re-encoded the message")
	}
	bs[1] = sa // the caller reuses its slice
	if got := m.WithBlocks([]*Block{sa, b}); got != m1 || !bytes.Equal(got.Bytes(), m.withBlocks([]*Block{sa, b}).Bytes()) {
		t.Fatalf("the memo followed the caller's slice: %s", got.Bytes())
	}
	if m1.Blocks[1] != b {
		t.Fatal("the result's blocks alias the caller's slice")
	}
	m2 := m.WithBlocks(bs)
	if m2 == m1 || !bytes.Equal(m2.Bytes(), m.withBlocks([]*Block{sa, sa}).Bytes()) {
		t.Fatalf("WithBlocks with other blocks: %s", m2.Bytes())
	}
	if !bytes.Contains(m1.Bytes(), []byte("long output b")) || bytes.Contains(m2.Bytes(), []byte("long output b")) {
		t.Fatalf("messages: %s / %s", m1.Bytes(), m2.Bytes())
	}
}

// TestModifierMemosConcurrent: goroutines sharing parsed blocks (as a request's render and a
// flush's weighing do) stub them with different texts, rebuild their message and key them at
// once; every answer is the one a fresh call gives. Run with -race to check the caches'
// synchronisation too.
func TestModifierMemosConcurrent(t *testing.T) {
	r, err := Parse(Anthropic, []byte(`{"model":"m","messages":[
	  {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{"x":1}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"output a"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := r.Messages[1]
	res := m.Blocks[0]
	wantSum := xxhash.Sum64String("output a")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				text := fmt.Sprintf("[t%d] stub", (g+i)%3)
				s := res.WithResultText(text)
				if s.ResultText() != text {
					errs <- "WithResultText(" + text + ") = " + s.ResultText()
					return
				}
				nm := m.WithBlocks([]*Block{s})
				if want := m.withBlocks([]*Block{s}).Bytes(); !bytes.Equal(nm.Bytes(), want) {
					errs <- fmt.Sprintf("WithBlocks: %s, want %s", nm.Bytes(), want)
					return
				}
				if res.IdentitySum() != wantSum || s.IdentitySum() != xxhash.Sum64String(text) {
					errs <- "IdentitySum of " + text
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// shapeSumBodies are the messages TestShapeSum pins: every block field the sum covers, a text
// over 64 bytes (only its ends count), both formats.
var shapeSumBodies = []struct {
	f    Format
	body string
}{
	{Anthropic, `{"model":"m","messages":[{"role":"user","content":"hi"},
	  {"role":"assistant","content":[{"type":"thinking","thinking":"` + strings.Repeat("x", 40) + strings.Repeat("y", 40) + `","signature":"sig"},{"type":"text","text":"t"},{"type":"tool_use","id":"a","name":"bash","input":{}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":[{"type":"text","text":"` + strings.Repeat("z", 70) + `"},{"type":"image","source":{}}]}]}]}`},
	{OpenAI, `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"q","type":"function","function":{"name":"bash","arguments":"{}"}}]},
	  {"role":"tool","tool_call_id":"q","content":"out"}]}`},
}

func TestShapeSum(t *testing.T) {
	// The values pruner.msgSig gave before the sum moved here: stored session states hold
	// them, so a changed definition would no longer resolve their fingerprints.
	want := []uint64{0xc7b6bc476eac26c8, 0xe7c6f15bfbdd10bc, 0x14d93a70d3523045, 0xd304f5233f693a87, 0x461078249b95c398}
	k := 0
	for _, c := range shapeSumBodies {
		r := mustParse(t, c.f, c.body)
		for i, m := range r.Messages {
			for range 2 { // computed, then cached
				if got := m.ShapeSum(); got != want[k] {
					t.Fatalf("%v message %d: ShapeSum %#x, want %#x", c.f, i, got, want[k])
				}
			}
			k++
			// A rebuilt message has its own sum, not its source's cached one: the same as an
			// uncached message with its fields.
			nm := m.WithBlocks(m.Blocks[:len(m.Blocks)-1])
			fresh := &Message{Role: nm.Role, Blocks: nm.Blocks}
			if got := nm.ShapeSum(); got != fresh.ShapeSum() || got == m.ShapeSum() {
				t.Fatalf("%v message %d: rebuilt ShapeSum %#x, fresh %#x, source %#x", c.f, i, got, fresh.ShapeSum(), m.ShapeSum())
			}
		}
	}
}

// TestEachMember: messages and blocks list their members as sent, repeated and unknown keys
// included; a string-form block and a Responses run of items have none.
func TestEachMember(t *testing.T) {
	members := func(each func(func(k, v []byte))) string {
		var out []string
		each(func(k, v []byte) { out = append(out, string(k)+"="+string(v)) })
		return strings.Join(out, " ")
	}
	r := mustParse(t, Anthropic, `{"messages":[{"role":"user", "x":[1,{"a":2}] ,"content":[{"type":"text","text":"a\n","type":"text"}]},{"role":"assistant","content":"s"}]}`)
	m := r.Messages[0]
	if got := members(m.EachMember); got != `"role"="user" "x"=[1,{"a":2}] "content"=[{"type":"text","text":"a\n","type":"text"}]` {
		t.Errorf("message: %s", got)
	}
	if got := members(m.Blocks[0].EachMember); got != `"type"="text" "text"="a\n" "type"="text"` {
		t.Errorf("block: %s", got)
	}
	if got := members(r.Messages[1].Blocks[0].EachMember); got != "" {
		t.Errorf("string-form block: %s", got)
	}
	rr := mustParse(t, Responses, responsesSample)
	if got := members(rr.Messages[3].EachMember); got != "" {
		t.Errorf("run of items: %s", got)
	}
	if got := members(rr.Messages[1].EachMember); got != `"role"="user" "content"="hi"` {
		t.Errorf("item: %s", got)
	}
}

// TestModifyDuplicateContent: a modification rewrites the last "content" member of a block
// and of a message, as lookups find it, in every format, the earlier ones kept as sent.
func TestModifyDuplicateContent(t *testing.T) {
	for _, tc := range []struct {
		f        Format
		in, want string
	}{
		{Anthropic, `{"messages":[{"role":"user","content":"x", "content" : [{"type":"tool_result","tool_use_id":"t","content":"a","content":[{"type":"text","text":"b"}]}]}]}`,
			`{"messages":[{"role":"user","content":"x", "content" : [{"type":"tool_result","tool_use_id":"t","content":"a","content":"S"}]}]}`},
		{OpenAI, `{"messages":[{"role":"tool","content":[{"type":"text","text":"a"}],"tool_call_id":"t","content":"b"}]}`,
			`{"messages":[{"role":"tool","content":[{"type":"text","text":"a"}],"tool_call_id":"t","content":"S"}]}`},
		{Responses, `{"input":[{"type":"function_call_output","output":"a","call_id":"t","output":"b"}]}`,
			`{"input":[{"type":"function_call_output","output":"a","call_id":"t","output":"S"}]}`},
	} {
		r := mustParse(t, tc.f, tc.in)
		m := r.Messages[0]
		nb := m.Blocks[0].WithResultText("S")
		if got := string(r.WithMessages([]*Message{m.WithBlocks([]*Block{nb})}).Bytes()); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.f, got, tc.want)
		}
	}
}
