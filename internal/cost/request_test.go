package cost

import (
	"errors"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

const anthropicBody = `{"model":"claude-sonnet-4-5","system":"abcdabcd","tools":[{"name":"t","input_schema":{}}],` +
	`"messages":[{"role":"user","content":"hello world!"},{"role":"assistant","content":[{"type":"text","text":"abcd"},` +
	`{"type":"tool_use","id":"x","name":"read","input":{"a":1}}]}]}`

// TestFromBodyAnthropic checks segmentation and estimates by hand (default estimator: 4 chars
// per token, 4 tokens per message, 2 per block):
//
//	tool {"name":"t","input_schema":{}}  30 chars → 8 + 2 block      = 10
//	system "abcdabcd"                    8 chars  → 2 + 4 message    = 6
//	user "hello world!"                 12 chars  → 3 + 4 message    = 7
//	assistant text "abcd"                4 chars  → 1 + 2 + 4        = 7
//	tool_use read {"a":1}           1 + 7 chars   → 1 + 2 + 2 block  = 5
//	                                                           total = 35
func TestFromBodyAnthropic(t *testing.T) {
	p, err := FromBody([]byte(anthropicBody), PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{10, 6, 7, 7, 5}
	if len(p.Segments) != len(want) {
		t.Fatalf("segments = %d, want %d", len(p.Segments), len(want))
	}
	for i, w := range want {
		if p.Segments[i].Tokens != w {
			t.Errorf("segment %d tokens = %d, want %d", i, p.Segments[i].Tokens, w)
		}
	}
	if p.Tokens() != 35 || p.Model != "claude-sonnet-4-5" {
		t.Fatalf("tokens %d model %q", p.Tokens(), p.Model)
	}
	// Auto breakpoints: last tool, last system block, last message block.
	for i, bp := range []bool{true, true, false, false, true} {
		if p.Segments[i].Breakpoint != bp {
			t.Errorf("segment %d breakpoint = %v", i, p.Segments[i].Breakpoint)
		}
	}
	// Client mode: no markers, no breakpoints.
	pc, _ := FromBody([]byte(anthropicBody), PromptOptions{Breakpoints: BreakpointsClient})
	for i, s := range pc.Segments {
		if s.Breakpoint {
			t.Errorf("client mode segment %d has a breakpoint", i)
		}
	}
	// A client marker (1h) on the text block: same keys, only that breakpoint.
	marked := `{"model":"claude-sonnet-4-5","system":"abcdabcd","tools":[{"name":"t","input_schema":{}}],` +
		`"messages":[{"role":"user","content":"hello world!"},{"role":"assistant","content":[{"type":"text","text":"abcd","cache_control":{"type":"ephemeral","ttl":"1h"}},` +
		`{"type":"tool_use","id":"x","name":"read","input":{"a":1}}]}]}`
	pm, err := FromBody([]byte(marked), PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pm.Segments {
		if pm.Segments[i].Key != p.Segments[i].Key {
			t.Errorf("segment %d key changed by cache_control", i)
		}
		if pm.Segments[i].Breakpoint != (i == 3) {
			t.Errorf("segment %d breakpoint = %v", i, pm.Segments[i].Breakpoint)
		}
	}
	if pm.Segments[3].TTL != TTL1h {
		t.Fatalf("ttl = %v", pm.Segments[3].TTL)
	}
	// Editing a block changes its key; the role is part of the key.
	edited, _ := FromBody([]byte(`{"model":"m","messages":[{"role":"assistant","content":"hello world!"}]}`), PromptOptions{})
	if edited.Segments[0].Key == p.Segments[2].Key {
		t.Fatal("role not part of the key")
	}
}

// TestFromBodyOpenAI: user string 8 chars → 2+4 = 6; assistant with one tool call:
// empty content → message framing only (0+4 = 4), tool call name "ls" (1) + args `{}` (1) + 2 = 4;
// tool message "abcdabcdabcd" → 3 + 4 = 7.
func TestFromBodyOpenAI(t *testing.T) {
	body := `{"model":"gpt-5","messages":[{"role":"user","content":"abcdabcd"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"abcdabcdabcd"}]}`
	got := unmarkedTokens(t, body, wire.OpenAI)
	if len(got) != 3 || got[0] != 6 || got[1] != 8 || got[2] != 7 {
		t.Fatalf("tokens = %v, want [6 8 7]", got)
	}
}

// unmarkedTokens flattens body in format f and returns its segments' tokens, failing when a
// segment is a breakpoint (only Anthropic prompts get them).
func unmarkedTokens(t *testing.T, body string, f wire.Format) []int {
	t.Helper()
	p, err := FromBody([]byte(body), PromptOptions{Format: f})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, s := range p.Segments {
		got = append(got, s.Tokens)
		if s.Breakpoint {
			t.Fatal("only Anthropic prompts get breakpoints")
		}
	}
	return got
}

// TestFromBodyResponses: instructions "abcdabcd" → 2+4 = 6; a user message item with string
// content is a message (2+4 = 6); a function_call item is one segment: name "ls" (1) + args
// `{}` (1) + 2 + 4 = 8; its output "abcdabcdabcd" → 3 + 2 + 4 = 9. Responses requests are
// billed like Chat Completions ones: no breakpoints, automatic prefix caching of the model's
// price entry (a second request reads the first one's prefix, and nothing is billed for
// writing it).
func TestFromBodyResponses(t *testing.T) {
	items := `{"type":"message","role":"user","content":"abcdabcd"},` +
		`{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"abcdabcdabcd"}`
	got := unmarkedTokens(t, `{"model":"gpt-5","instructions":"abcdabcd","input":[`+items+`]}`, wire.Responses)
	if len(got) != 4 || got[0] != 6 || got[1] != 6 || got[2] != 8 || got[3] != 9 {
		t.Fatalf("tokens = %v, want [6 6 8 9]", got)
	}
	long := strings.Repeat("abcd", 2000) // 2,000 tokens: over gpt-5's minimum cacheable prefix
	first, _ := FromBody([]byte(`{"model":"gpt-5","instructions":"`+long+`","input":[`+items+`]}`), PromptOptions{Format: wire.Responses})
	second, _ := FromBody([]byte(`{"model":"gpt-5","instructions":"`+long+`","input":[`+items+
		`,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}]}`), PromptOptions{Format: wire.Responses})
	c := NewCache(nil)
	b1, b2 := c.Send(&first), c.Send(&second)
	if b1.CacheRead != 0 || b1.CacheWrite() != 0 || b1.Input != int64(first.Tokens()) {
		t.Fatalf("first request: %+v", b1.Usage)
	}
	if b2.CacheRead != int64(first.Tokens()) || b2.CacheWrite() != 0 || b2.Input != int64(second.Tokens()-first.Tokens()) {
		t.Fatalf("second request: %+v (prompts of %d and %d tokens)", b2.Usage, first.Tokens(), second.Tokens())
	}
}

func TestFromBodyErrors(t *testing.T) {
	for _, body := range []string{`{`, `[]`, `{"model":"m"}`, `{"messages":[{"role":"user","content":5}]}`} {
		if _, err := FromBody([]byte(body), PromptOptions{}); !errors.Is(err, ErrBody) {
			t.Errorf("%s: err = %v", body, err)
		}
	}
}
