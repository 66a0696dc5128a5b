package cost_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

// checkSame fails unless FromRequest(r) equals FromBody(body) segment for segment.
func checkSame(t *testing.T, what string, body []byte, r *wire.Request, memo *cost.PromptMemo, bp cost.BreakpointMode) {
	t.Helper()
	want, err := cost.FromBody(body, cost.PromptOptions{Format: r.Format, Breakpoints: bp})
	if err != nil {
		t.Fatalf("%s: FromBody: %v", what, err)
	}
	got := cost.FromRequest(r, cost.PromptOptions{Breakpoints: bp}, memo)
	if got.Model != want.Model || len(got.Segments) != len(want.Segments) {
		t.Fatalf("%s: model %q, %d segments; FromBody: %q, %d", what, got.Model, len(got.Segments), want.Model, len(want.Segments))
	}
	for i := range want.Segments {
		if got.Segments[i] != want.Segments[i] {
			t.Fatalf("%s: segment %d = %+v, FromBody %+v", what, i, got.Segments[i], want.Segments[i])
		}
	}
}

// TestFromRequestMatchesFromBody flattens corpus requests in both wire formats — as sent,
// and rendered with a pruning state (stubs, purged arguments, compressed chains, summary
// blocks, moved cache markers), sharing one memo between a request's renders as the proxy's
// cache-aware weighing does — and requires FromRequest to equal FromBody on the serialized
// bytes.
func TestFromRequestMatchesFromBody(t *testing.T) {
	pol := pruner.DefaultPolicy()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	checked := 0
	for _, path := range corpus.Files(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := transcripts.ImportFile(path, transcripts.FormatAuto)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range s.Providers() {
				wf := wire.Anthropic
				switch p {
				case transcripts.OpenAI:
					wf = wire.OpenAI
				case transcripts.Responses:
					wf = wire.Responses
				}
				st := pruner.NewState()
				step := max(1, s.Len()/12)
				for k := 0; k < s.Len(); k += step {
					body, err := s.AppendRequest(nil, k, p)
					if err != nil {
						t.Fatal(err)
					}
					req, err := wire.Parse(wf, body)
					if err != nil {
						t.Fatalf("%s request %d: %v", p, k, err)
					}
					memo := &cost.PromptMemo{}
					what := fmt.Sprintf("%s request %d", p, k)
					checkSame(t, what+" as sent", body, req, memo, cost.BreakpointsAuto)
					checkSame(t, what+" as sent, client breakpoints", body, req, nil, cost.BreakpointsClient)
					cur := pruner.Render(req, st, pol)
					checkSame(t, what+" rendered", cur.Body, cur.Request, memo, cost.BreakpointsAuto)
					plan, err := pruner.PlanFlush(req, st, pol, t0.Add(time.Duration(k)*time.Minute))
					if err != nil {
						t.Fatal(err)
					}
					outs := map[string]string{}
					for _, b := range plan.Batches {
						outs[b.ID] = "- summary of " + b.ID + ": ran the tools, \"quoted\" \u00e9t\u00e9 ok"
					}
					next, err := plan.Apply(outs)
					if err != nil {
						t.Fatal(err)
					}
					res := pruner.Render(req, next, pol)
					checkSame(t, what+" rendered after a flush", res.Body, res.Request, memo, cost.BreakpointsAuto)
					st = next
					checked++
				}
			}
		})
	}
	if !t.Failed() && checked < 100 {
		t.Errorf("only %d requests checked", checked)
	}
}

// TestFromRequestEdgeForms covers forms the corpus lacks: string system prompts, cache
// markers with the 1-hour TTL, empty and null content, OpenAI refusals, tool calls and tool
// messages, images and unknown blocks.
func TestFromRequestEdgeForms(t *testing.T) {
	img := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	cases := []struct {
		f    wire.Format
		body string
	}{
		{wire.Anthropic, `{"model":"m","system":"you are \"terse\"","messages":[{"role":"user","content":"hi\nthere"}]}`},
		{wire.Anthropic, `{"model":"m","tools":[{"name":"a","input_schema":{}},{"name":"b","input_schema":{},"cache_control":{"type":"ephemeral","ttl":"1h"}}],` +
			`"system":[{"type":"text","text":"s1"},{"type":"text","text":"s2","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":null},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"abc"},{"type":"tool_use","id":"t1","name":"read","input":{"path":"a\u00e9"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"one"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}}]},{"type":"future_block","x":1}]},` +
			`{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"zz"},{"type":"document","source":{"type":"text","data":"doc"}}]}]}`},
		{wire.OpenAI, `{"model":"gpt","tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"messages":[{"role":"system","content":"sys"},` +
			`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}},{"type":"text","text":""}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":\"\\u00e9\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"out"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"p1"}]},` +
			`{"role":"assistant","refusal":"no","content":[{"type":"refusal","refusal":"no"}]},{"role":"assistant","content":""},{"role":"user"}]}`},
		{wire.Responses, `{"model":"gpt-5","input":"hi \"there\""}`},
		{wire.Responses, `{"model":"gpt-5","instructions":"be brief","tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search"}],"input":[` +
			`{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},{"role":"user","content":"typeless"},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,` + img + `"}]},` +
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"thinking"}],"encrypted_content":"` + strings.Repeat("QUJD", 400) + `"},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin Patch"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"doing it"},{"type":"output_text","text":"twice"}]},{"type":"web_search_call","id":"ws1","action":{"type":"search","query":"q"}},` +
			`{"type":"function_call_output","call_id":"c1","output":"out"},{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"patched"}]},` +
			`{"type":"compaction","encrypted_content":"xyz"},{"type":"message","role":"user","content":[{"type":"input_text","text":"next"}]}]}`},
	}
	for i, c := range cases {
		r, err := wire.Parse(c.f, []byte(c.body))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		checkSame(t, fmt.Sprintf("case %d", i), []byte(c.body), r, nil, cost.BreakpointsAuto)
		checkSame(t, fmt.Sprintf("case %d, client breakpoints", i), []byte(c.body), r, nil, cost.BreakpointsClient)
	}
}

// TestPromptMemoReuse checks that a memo filled by one request's flattening serves a
// modified copy of it: changed blocks are new pointers and get their own segments.
func TestPromptMemoReuse(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"long output"}]}]}`)
	r, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	memo := &cost.PromptMemo{}
	a := cost.FromRequest(r, cost.PromptOptions{}, memo)
	m := r.Messages[2]
	r2 := r.WithMessages(append(append([]*wire.Message(nil), r.Messages[:2]...), m.WithBlocks([]*wire.Block{m.Blocks[0].WithResultText("stub")})))
	b := cost.FromRequest(r2, cost.PromptOptions{}, memo)
	if reflect.DeepEqual(a.Segments[2], b.Segments[2]) || !reflect.DeepEqual(a.Segments[:2], b.Segments[:2]) {
		t.Fatalf("segments %+v vs %+v", a.Segments, b.Segments)
	}
	checkSame(t, "modified", r2.Bytes(), r2, memo, cost.BreakpointsAuto)
}
