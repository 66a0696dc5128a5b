package pruner

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/wire"
)

// tcall is a tool call in a test transcript.
type tcall struct {
	id, name, input string
}

// tres is a tool result in a test transcript.
type tres struct {
	id, text string
	isErr    bool
}

// tx builds provider request bodies for tests.
type tx struct {
	f    wire.Format
	msgs []map[string]any
}

func newTx(f wire.Format) *tx { return &tx{f: f, msgs: []map[string]any{}} }

func (t *tx) user(text string) *tx {
	if t.f == wire.Responses {
		t.msgs = append(t.msgs, responsesMessage("user", "input_text", text))
		return t
	}
	t.msgs = append(t.msgs, map[string]any{"role": "user", "content": text})
	return t
}

func (t *tx) system(text string) *tx {
	if t.f == wire.Responses {
		t.msgs = append(t.msgs, responsesMessage("system", "input_text", text))
		return t
	}
	t.msgs = append(t.msgs, map[string]any{"role": "system", "content": text})
	return t
}

// responsesMessage is a Responses message item with one text part, as Codex sends them.
func responsesMessage(role, part, text string) map[string]any {
	return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": part, "text": text}}}
}

// asst adds an assistant message: optional thinking (Anthropic; Responses: a reasoning
// item), text, tool calls.
func (t *tx) asst(thinking, text string, calls ...tcall) *tx {
	if t.f == wire.Responses {
		if thinking != "" {
			t.msgs = append(t.msgs, map[string]any{"type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": thinking}},
				"content": nil, "encrypted_content": "enc-" + fmt.Sprint(len(t.msgs))})
		}
		if text != "" {
			t.msgs = append(t.msgs, responsesMessage("assistant", "output_text", text))
		}
		for _, c := range calls {
			t.msgs = append(t.msgs, map[string]any{"type": "function_call", "name": c.name, "arguments": c.input, "call_id": c.id})
		}
		return t
	}
	if t.f == wire.OpenAI {
		m := map[string]any{"role": "assistant"}
		if text != "" {
			m["content"] = text
		} else {
			m["content"] = nil
		}
		if len(calls) > 0 {
			var tc []any
			for _, c := range calls {
				tc = append(tc, map[string]any{"id": c.id, "type": "function",
					"function": map[string]any{"name": c.name, "arguments": c.input}})
			}
			m["tool_calls"] = tc
		}
		t.msgs = append(t.msgs, m)
		return t
	}
	var content []any
	if thinking != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": thinking, "signature": "sig-" + fmt.Sprint(len(t.msgs))})
	}
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for _, c := range calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": json.RawMessage(c.input)})
	}
	t.msgs = append(t.msgs, map[string]any{"role": "assistant", "content": content})
	return t
}

// responsesFailure is the header Codex puts before a failed command's output.
const responsesFailure = "Exit code: 1\nWall time: 0.1 seconds\nOutput:\n"

func (t *tx) results(rs ...tres) *tx {
	if t.f == wire.Responses {
		for _, r := range rs {
			text := r.text
			if r.isErr {
				text = responsesFailure + text
			}
			t.msgs = append(t.msgs, map[string]any{"type": "function_call_output", "call_id": r.id, "output": text})
		}
		return t
	}
	if t.f == wire.OpenAI {
		for _, r := range rs {
			t.msgs = append(t.msgs, map[string]any{"role": "tool", "tool_call_id": r.id, "content": r.text})
		}
		return t
	}
	var content []any
	for _, r := range rs {
		b := map[string]any{"type": "tool_result", "tool_use_id": r.id, "content": r.text}
		if r.isErr {
			b["is_error"] = true
		}
		content = append(content, b)
	}
	t.msgs = append(t.msgs, map[string]any{"role": "user", "content": content})
	return t
}

// turn adds an assistant turn with one call and its result.
func (t *tx) turn(id, name, input, result string) *tx {
	return t.asst("", "", tcall{id, name, input}).results(tres{id: id, text: result})
}

func (t *tx) body() []byte {
	m := map[string]any{"model": "test-model", "max_tokens": 1024, "messages": t.msgs}
	switch t.f {
	case wire.OpenAI:
		m = map[string]any{"model": "test-model", "messages": t.msgs}
	case wire.Responses:
		m = map[string]any{"model": "test-model", "instructions": "You are a coding agent.", "input": t.msgs, "store": false,
			"include": []string{"reasoning.encrypted_content"}}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func (t *tx) req(tb testing.TB) *wire.Request {
	tb.Helper()
	r, err := wire.Parse(t.f, t.body())
	if err != nil {
		tb.Fatalf("parse: %v\n%s", err, t.body())
	}
	return r
}

// big returns a result text of n ASCII characters that starts with tag.
func big(tag string, n int) string {
	s := tag + " " + strings.Repeat("x", n)
	return s[:n]
}

// testSummarizer is a deterministic summarizer: one labelled bullet per call.
func testSummarizer(b Batch) string {
	if b.Kind == KindRangeFusion {
		return "Fused: " + strings.Join(b.Parts, " | ")
	}
	var out []string
	for _, c := range b.Calls {
		out = append(out, fmt.Sprintf("- [[%d:%s]] %s returned %d chars", c.Label, c.Tool, c.Tool, len(c.Result)))
	}
	return strings.Join(out, "\n")
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// flush plans and commits with the test summarizer until no follow-up remains.
func flush(tb testing.TB, req *wire.Request, st *State, pol Policy) *State {
	tb.Helper()
	for i := 0; i < 4; i++ {
		p, err := PlanFlush(req, st, pol, t0)
		if err != nil {
			tb.Fatal(err)
		}
		outs := map[string]string{}
		for _, b := range p.Batches {
			outs[b.ID] = testSummarizer(b)
		}
		st, err = p.Apply(outs)
		if err != nil {
			tb.Fatal(err)
		}
		if !p.Followup {
			break
		}
	}
	return st
}

// blobStore collects plan blobs for Query tests.
type blobStore map[string][]byte

func (s blobStore) lookup(k string) ([]byte, bool) { v, ok := s[k]; return v, ok }

// flushBlobs is flush that also keeps the blobs.
func flushBlobs(tb testing.TB, req *wire.Request, st *State, pol Policy, bs blobStore) *State {
	tb.Helper()
	for i := 0; i < 4; i++ {
		p, err := PlanFlush(req, st, pol, t0)
		if err != nil {
			tb.Fatal(err)
		}
		for _, b := range p.Blobs {
			bs[b.Key] = b.Data
		}
		outs := map[string]string{}
		for _, b := range p.Batches {
			outs[b.ID] = testSummarizer(b)
		}
		st, err = p.Apply(outs)
		if err != nil {
			tb.Fatal(err)
		}
		if !p.Followup {
			break
		}
	}
	return st
}

// mustValid fails when the result is not valid for its provider.
// An input that is itself invalid (e.g. ids reused in an Anthropic request) may only keep
// the same violation.
func mustValid(tb testing.TB, req *wire.Request, res *Result) {
	tb.Helper()
	if res.Fallback != "" {
		tb.Fatalf("render fell back: %s", res.Fallback)
	}
	errIn, errOut := wire.Validate(req), wire.Validate(res.Request)
	if errOut != nil {
		var a, b *wire.ValidationError
		if errIn == nil || !errors.As(errIn, &a) || !errors.As(errOut, &b) || a.Rule != b.Rule {
			tb.Fatalf("invalid render: %v (input: %v)\n%s", errOut, errIn, res.Body)
		}
	}
	// The body must parse back.
	if _, err := wire.Parse(res.Request.Format, res.Body); err != nil {
		tb.Fatalf("rendered body does not parse: %v", err)
	}
}

// texts returns every text of the rendered messages, one string per message.
func texts(r *wire.Request) []string {
	var out []string
	for _, m := range r.Messages {
		var parts []string
		for _, b := range m.Blocks {
			switch b.Kind {
			case wire.KindToolResult:
				parts = append(parts, "R("+b.ID+"):"+b.ResultText())
			case wire.KindToolUse:
				parts = append(parts, "C("+b.ID+")")
			case wire.KindThinking, wire.KindReasoning:
				parts = append(parts, "T:"+b.Text())
			default:
				parts = append(parts, b.Text())
			}
		}
		out = append(out, string(m.Role)+"|"+strings.Join(parts, "|"))
	}
	return out
}

func noSpillPolicy() Policy {
	p := DefaultPolicy()
	p.MinBatchChars = 0
	return p
}
