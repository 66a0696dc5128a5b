// Package parsebench compares wire.Parse with general Go JSON libraries on locating every
// message and content block of a request body (raw span, type, id, name, decoded text). It is its
// own module so the product's go.mod carries no benchmark-only dependencies.
package parsebench

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/codexrollout"
	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// Case is one request body of one wire format.
type Case struct {
	Name   string
	Format wire.Format
	Body   []byte
}

// Cases returns the bodies every parser is measured on: the pruner's reference workload in the
// three formats, the wire benchmarks' corpus requests when the shared corpus is there, then extra.
func Cases(tb testing.TB, extra ...Case) []Case {
	cs := []Case{
		{"workload/anthropic", wire.Anthropic, workloadBody(wire.Anthropic)},
		{"workload/openai", wire.OpenAI, workloadBody(wire.OpenAI)},
		{"workload/responses", wire.Responses, workloadBody(wire.Responses)},
	}
	if corpus.Dir() != "" {
		cs = append(cs, Case{"corpus/anthropic", wire.Anthropic, corpus.TwoMBAnthropicRequest(tb)},
			Case{"corpus/openai", wire.OpenAI, corpus.TrajectoryChatRequest(tb, "msa_psf__requests-1142.traj.json")},
			Case{"corpus/responses", wire.Responses, codexrollout.Joined(tb).Final()})
	}
	return append(cs, extra...)
}

// workloadBody is internal/pruner's reference workload (bench_test.go, workloadTx) in format f,
// byte for byte: 20 tasks of a prompt, 9 thinking tool-call turns with 10,000-character results
// and a final reply (400 messages; Responses: 560 items).
func workloadBody(f wire.Format) []byte {
	var msgs []map[string]any
	thinking := strings.Repeat("I should look at the next file carefully. ", 15)[:600]
	message := func(role, part, text string) map[string]any {
		return map[string]any{"type": "message", "role": role, "content": []any{map[string]any{"type": part, "text": text}}}
	}
	asst := func(thinking, text, id, input string) {
		if f == wire.Responses {
			if thinking != "" {
				msgs = append(msgs, map[string]any{"type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": thinking}},
					"content": nil, "encrypted_content": "enc-" + fmt.Sprint(len(msgs))})
			}
			if text != "" {
				msgs = append(msgs, message("assistant", "output_text", text))
			}
			if id != "" {
				msgs = append(msgs, map[string]any{"type": "function_call", "name": "read", "arguments": input, "call_id": id})
			}
			return
		}
		if f == wire.OpenAI {
			m := map[string]any{"role": "assistant", "content": nil}
			if text != "" {
				m["content"] = text
			}
			if id != "" {
				m["tool_calls"] = []any{map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": "read", "arguments": input}}}
			}
			msgs = append(msgs, m)
			return
		}
		var content []any
		if thinking != "" {
			content = append(content, map[string]any{"type": "thinking", "thinking": thinking, "signature": "sig-" + fmt.Sprint(len(msgs))})
		}
		if text != "" {
			content = append(content, map[string]any{"type": "text", "text": text})
		}
		if id != "" {
			content = append(content, map[string]any{"type": "tool_use", "id": id, "name": "read", "input": json.RawMessage(input)})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
	}
	for task := 0; task < 20; task++ {
		prompt := fmt.Sprintf("Task %d: fix the failing test in package p%d.", task, task)
		if f == wire.Responses {
			msgs = append(msgs, message("user", "input_text", prompt))
		} else {
			msgs = append(msgs, map[string]any{"role": "user", "content": prompt})
		}
		for turn := 0; turn < 9; turn++ {
			id := fmt.Sprintf("toolu_%02d_%d", task, turn)
			asst(thinking, "", id, fmt.Sprintf(`{"path":"pkg/p%d/file%d.go"}`, task, turn))
			var b strings.Builder
			for b.Len() < 10000 {
				fmt.Fprintf(&b, "%d:%d line of source code in file %d of task %d\n", task, b.Len(), turn, task)
			}
			text := b.String()[:10000]
			switch f {
			case wire.Responses:
				msgs = append(msgs, map[string]any{"type": "function_call_output", "call_id": id, "output": text})
			case wire.OpenAI:
				msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": text})
			default:
				msgs = append(msgs, map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "tool_result", "tool_use_id": id, "content": text}}})
			}
		}
		asst("Done with the task.", fmt.Sprintf("Task %d is fixed.", task), "", "")
	}
	m := map[string]any{"model": "test-model", "max_tokens": 1024, "messages": msgs}
	switch f {
	case wire.OpenAI:
		m = map[string]any{"model": "test-model", "messages": msgs}
	case wire.Responses:
		m = map[string]any{"model": "test-model", "instructions": "You are a coding agent.", "input": msgs, "store": false,
			"include": []string{"reasoning.encrypted_content"}}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}
