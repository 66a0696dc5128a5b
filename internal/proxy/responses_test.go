package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestResponsesAPISDKPrunesAfterFinalAnswer: a Codex-like Responses session through the proxy,
// streamed and not: every request goes upstream valid with context_tree_query offered as a
// flat function tool; after the final answer the large shell output is stub-replaced, while the
// reasoning items, the unknown members and the hosted and namespaced tools reach the provider
// byte for byte.
func TestResponsesAPISDKPrunesAfterFinalAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			cs := codexConversation(t, r, r.codex("codex-prune", stream))
			rec2, req2 := lastModelRequest(t, r.up, wire.Responses)
			if rec2.Path != "/v1/responses" || !strings.Contains(string(rec2.Body), "build line 059") || rec2.Stream() != stream {
				t.Fatalf("turn 2 went upstream as %s (stream %v) without the full output", rec2.Path, rec2.Stream())
			}
			if rec2.Header.Get("Authorization") != "Bearer sk-test" || rec2.Header.Get(HeaderSession) != "" {
				t.Fatalf("headers forwarded wrongly: %v", rec2.Header)
			}
			q := gjson.GetBytes(rec2.Body, `tools.#(name=="context_tree_query")`)
			if q.Get("type").Str != "function" || q.Get("strict").Raw != "false" || !q.Get("parameters.properties.toolCallIds").Exists() {
				t.Fatalf("context_tree_query not offered as a function tool: %s", gjson.GetBytes(rec2.Body, "tools").Raw)
			}
			reasoning := gjson.GetBytes(rec2.Body, `input.#(type=="reasoning")`).Raw
			if !strings.Contains(reasoning, `"encrypted_content":"fakesig`) {
				t.Fatalf("turn 2 lost the reasoning item: %s", reasoning)
			}
			cs.user("Now run the tests.")
			r.up.Enqueue(upstreamfake.Reply{Text: "Sure."})
			cs.turn(t)
			rec3, req3 := lastModelRequest(t, r.up, wire.Responses)
			body := string(rec3.Body)
			if strings.Contains(body, "build line 030") || !strings.Contains(body, "`t1`") || len(rec3.Body) >= len(rec2.Body) {
				t.Fatalf("turn 3 not pruned (%d bytes, before %d):\n%s", len(rec3.Body), len(rec2.Body), body)
			}
			if !strings.Contains(body, reasoning) {
				t.Fatalf("the reasoning item changed:\n%s\nnot in\n%s", reasoning, body)
			}
			for _, k := range []string{"client_metadata", "include", "store", "prompt_cache_key", "instructions"} {
				if v := gjson.GetBytes(rec3.Body, k); !v.Exists() || v.Raw != gjson.GetBytes(rec2.Body, k).Raw {
					t.Fatalf("%s not passed through: %s", k, v.Raw)
				}
			}
			if got := gjson.GetBytes(rec3.Body, "tools.1").Raw; got != codexNamespaceTool || gjson.GetBytes(rec3.Body, "tools.2").Raw != `{"type":"web_search"}` {
				t.Fatalf("tools not passed through: %s", gjson.GetBytes(rec3.Body, "tools").Raw)
			}
			if len(req3.Messages) < len(req2.Messages)+2 {
				t.Fatalf("items lost: %d messages, before %d", len(req3.Messages), len(req2.Messages))
			}
			if testutil.ToFloat64(r.px.met.RequestsPruned) < 1 || testutil.ToFloat64(r.px.met.Requests.WithLabelValues("responses", "responses", "200")) != 3 {
				t.Fatal("requests not counted under endpoint responses")
			}
		})
	}
}

// TestResponsesAPIConsecutiveRequestsShareBytePrefix: with no flush between two requests the
// later one's input extends the earlier one's byte for byte, its instructions and tools the same.
func TestResponsesAPIConsecutiveRequestsShareBytePrefix(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	cs := codexConversation(t, r, r.codex("codex-prefix", false))
	r.up.Enqueue(upstreamfake.Reply{Text: "ok 3"}, upstreamfake.Reply{Text: "ok 4"})
	cs.user("third")
	cs.turn(t)
	rec3, _ := lastModelRequest(t, r.up, wire.Responses)
	cs.user("fourth")
	time.Sleep(50 * time.Millisecond)
	cs.turn(t)
	rec4, _ := lastModelRequest(t, r.up, wire.Responses)
	if p3, p4 := inputPrefix(rec3.Body), inputPrefix(rec4.Body); !strings.HasPrefix(p4, p3) {
		t.Fatalf("turn 4 does not extend turn 3 byte for byte:\n3: %s\n4: %s", p3, p4)
	}
	for _, k := range []string{"instructions", "tools"} {
		if gjson.GetBytes(rec3.Body, k).Raw != gjson.GetBytes(rec4.Body, k).Raw {
			t.Fatalf("%s changed between turns", k)
		}
	}
}

// TestResponsesAPIUsageInStats: the Responses usage (input_tokens including the cached ones)
// goes into the session counters and condense_upstream_usage_tokens_total split as for the
// other formats.
func TestResponsesAPIUsageInStats(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := newRig(t, nil, nil, nil)
			cs := r.codex("codex-usage", stream)
			r.up.Enqueue(upstreamfake.Reply{Text: "hi", Usage: upstreamfake.Usage{InputTokens: 40, CacheReadTokens: 60, OutputTokens: 5}})
			cs.user("hello")
			if resp := cs.turn(t); resp.Usage.InputTokens != 100 || resp.Usage.InputTokensDetails.CachedTokens != 60 {
				t.Fatalf("client usage %+v", resp.Usage)
			}
			r.settle()
			snap, err := r.st.Load(context.Background(), "codex-usage")
			if err != nil {
				t.Fatal(err)
			}
			if snap.Stats["inputTokens"] != 40 || snap.Stats[store.StatCacheReadTokens] != 60 || snap.Stats["outputTokens"] != 5 || snap.Stats[store.StatRequests] != 1 {
				t.Fatalf("stats %v", snap.Stats)
			}
			if v := testutil.ToFloat64(r.px.met.UsageTokens.WithLabelValues("cache_read")); v != 60 {
				t.Fatalf("cache_read usage %v", v)
			}
		})
	}
}

// TestResponsesAPIServerHeldHistoryPassesThrough: a request continuing history the provider
// holds (previous_response_id, conversation) goes upstream byte for byte and its answer comes
// back byte for byte; so do the Responses API's other paths, to the OpenAI upstream even with
// an Anthropic key header; each is counted by why, and no session is recorded.
func TestResponsesAPIServerHeldHistoryPassesThrough(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	raw := "{\"id\":\"resp_9\",\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"type\":\"function_call\",\"name\":\"context_tree_query\",\"call_id\":\"c\",\"arguments\":\"{}\"}],  \"usage\":{\"input_tokens\":1}}"
	for _, c := range []struct{ body, reason string }{
		{`{"model":"gpt-5", "previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c1","output":"x"}],"tools":[]}`, "previous_response_id"},
		{`{"model":"gpt-5","conversation":{"id":"conv_1"},  "input":"next"}`, "conversation"},
	} {
		r.up.Enqueue(upstreamfake.Reply{Raw: []byte(raw)})
		resp, b := post(t, r.http.URL+"/v1/responses", c.body, map[string]string{HeaderSession: "held"})
		rec, _ := r.up.Last()
		if resp.StatusCode != 200 || string(b) != raw || string(rec.Body) != c.body || rec.Path != "/v1/responses" {
			t.Fatalf("%s: %d %q; upstream got %s %q", c.reason, resp.StatusCode, b, rec.Path, rec.Body)
		}
		if v := testutil.ToFloat64(r.px.met.ResponsesPassThrough.WithLabelValues(c.reason)); v != 1 {
			t.Fatalf("%s counted %v times", c.reason, v)
		}
	}
	for _, c := range []struct{ method, path, reason string }{
		{http.MethodPost, "/v1/responses/compact", "compact"},
		{http.MethodGet, "/v1/responses/resp_1", "retrieve"},
		{http.MethodDelete, "/v1/responses/resp_1", "delete"},
		{http.MethodPost, "/v1/responses/resp_1/cancel", "cancel"},
		{http.MethodGet, "/v1/responses/resp_1/input_items", "input_items"},
	} {
		body := `{"model":"gpt-5",  "input":[{"type":"compaction","encrypted_content":"e"}]}`
		req, _ := http.NewRequest(c.method, r.http.URL+c.path+"?limit=2", strings.NewReader(body))
		req.Header.Set("X-Api-Key", "not-anthropic")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		rec, _ := r.up.Last()
		if rec.Method != c.method || rec.Path != c.path || rec.RawQuery != "limit=2" || string(rec.Body) != body || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s %s went upstream as %s %s?%s %q (%d)", c.method, c.path, rec.Method, rec.Path, rec.RawQuery, rec.Body, resp.StatusCode)
		}
		if v := testutil.ToFloat64(r.px.met.ResponsesPassThrough.WithLabelValues(c.reason)); v != 1 {
			t.Fatalf("%s counted %v times", c.reason, v)
		}
	}
	r.settle()
	if snap, err := r.st.Load(context.Background(), "held"); err != nil || snap.Stats[store.StatRequests] != 0 {
		t.Fatalf("a passed-through request was recorded: %v %v", snap, err)
	}
}

// TestResponsesAPIRelayedByteForByte: with nothing hidden, a Responses answer — JSON, or an event
// stream with unknown events, comments and fields — reaches the client as the provider sent
// it, and unknown input items and members reach the provider as the client sent them.
func TestResponsesAPIRelayedByteForByte(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	sse := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_a\",\"status\":\"in_progress\",\"output\":[]},\"sequence_number\":0}\n\n" +
		": keep-alive\n\n" +
		"event: response.future\ndata: {\"type\":\"response.future\",\"x\":  [1, 2],\"sequence_number\":1}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"msg_a\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"},\"sequence_number\":2}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_a\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\",\"sequence_number\":3,\"obfuscation\":\"zz\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"msg_a\",\"type\":\"message\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\",\"annotations\":[]}],\"role\":\"assistant\"},\"sequence_number\":4}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_a\",\"status\":\"completed\",\"output\":[{\"id\":\"msg_a\",\"type\":\"message\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\",\"annotations\":[]}],\"role\":\"assistant\"}],\"usage\":{\"input_tokens\":3,\"output_tokens\":1},\"new_field\":{}},\"sequence_number\":5}\n\n"
	js := "{\n \"id\":\"resp_b\",\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"type\":\"future_item\",\"id\":\"fi_1\"},{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\"}]}],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}"
	item, member := `{"type":"future_item","x":  [1, 2]}`, `"future_member":{"a":  1}`
	for _, c := range []struct{ stream, ct, raw string }{{"true", "text/event-stream", sse}, {"false", "application/json", js}} {
		r.up.Enqueue(upstreamfake.Reply{Raw: []byte(c.raw), ContentType: c.ct, Header: http.Header{"X-Provider-Header": {"kept"}}})
		body := `{"model":"gpt-5","stream":` + c.stream + `,` + member + `,"input":[{"role":"user","content":"hi"},` + item + `]}`
		resp, b := post(t, r.http.URL+"/v1/responses", body, map[string]string{HeaderSession: "raw-" + c.stream})
		if resp.StatusCode != 200 || string(b) != c.raw || resp.Header.Get("X-Provider-Header") != "kept" {
			t.Fatalf("stream %s: %d\n got %q\nwant %q", c.stream, resp.StatusCode, b, c.raw)
		}
		rec, _ := lastModelRequest(t, r.up, wire.Responses)
		if !strings.Contains(string(rec.Body), item) || !strings.Contains(string(rec.Body), member) {
			t.Fatalf("unknown item or member changed: %s", rec.Body)
		}
	}
}

// TestResponsesAPIInputTokensPruned: POST /v1/responses/input_tokens is rendered like a model
// request (the count is of what would go upstream), its answer relayed as it came, and
// nothing is recorded in the session.
func TestResponsesAPIInputTokensPruned(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	cs := codexConversation(t, r, r.codex("codex-count", false))
	r.settle()
	before, _ := r.st.Load(context.Background(), "codex-count")
	cs.user("how many tokens?")
	body, _ := json.Marshal(cs.params())
	resp, b := post(t, r.http.URL+"/v1/responses/input_tokens", string(body), map[string]string{HeaderSession: "codex-count", "Authorization": "Bearer sk-test"})
	rec, _ := r.up.Last()
	mustValid(t, wire.Responses, rec.Body)
	if rec.Path != "/v1/responses/input_tokens" || resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no route") {
		t.Fatalf("counted at %s: %d %s", rec.Path, resp.StatusCode, b)
	}
	if strings.Contains(string(rec.Body), "build line 030") || !strings.Contains(string(rec.Body), pruner.QueryToolName) {
		t.Fatalf("input_tokens not rendered like a model request: %s", rec.Body)
	}
	r.settle()
	after, _ := r.st.Load(context.Background(), "codex-count")
	if after.Stats[store.StatRequests] != before.Stats[store.StatRequests] {
		t.Fatalf("a token count was recorded as a request: %d → %d", before.Stats[store.StatRequests], after.Stats[store.StatRequests])
	}
}

// TestResponsesAPIFlushBySessionModel: with the summarizer set to the session's own model, a
// Responses session's flush summarizes through the Responses API of the upstream the session
// uses, with the session's credentials, and the summary reaches the next request.
func TestResponsesAPIFlushBySessionModel(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	tmpl, err := summarize.NewLLM(summarize.LLMOptions{Endpoint: summarize.Endpoint{Format: wire.Anthropic, BaseURL: "http://unused", Model: summarize.SessionModelName}})
	if err != nil {
		t.Fatal(err)
	}
	r.inpro.Orch.Summarizer = &summarize.SessionModel{Template: tmpl}
	cs := r.codex("codex-session-model", true)
	r.up.Enqueue(
		upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "call_b1", Name: "exec_command", Input: `{"cmd":"make build"}`}}},
		upstreamfake.Reply{Text: "The build passed."},
		upstreamfake.Reply{Text: "- [[1:exec_command]] built the project: 60 lines, no errors"},
		upstreamfake.Reply{Text: "Sure."},
	)
	cs.user("Please build the project.")
	cs.turn(t)
	cs.output("call_b1", codexOutput(0, bigOutput("build", 60)))
	cs.turn(t)
	cs.user("Now run the tests.")
	cs.turn(t)
	reqs := r.up.Requests()
	if len(reqs) != 4 {
		t.Fatalf("upstream got %d requests, want 4", len(reqs))
	}
	sum := reqs[2]
	if sum.Path != "/v1/responses" || sum.Header.Get("Authorization") != "Bearer sk-test" || gjson.GetBytes(sum.Body, "model").Str != "gpt-5.2-codex" ||
		!strings.Contains(gjson.GetBytes(sum.Body, "input").Str, "[[1:exec_command]] Tool: exec_command") || gjson.GetBytes(sum.Body, "store").Raw != "false" {
		t.Fatalf("the summarizer call went out as %s %v %s", sum.Path, sum.Header, sum.Body)
	}
	last := mustValid(t, wire.Responses, reqs[3].Body)
	if body := string(reqs[3].Body); strings.Contains(body, "build line 030") || !strings.Contains(body, "built the project: 60 lines, no errors") {
		t.Fatalf("the session model's summary is not in the next request (%d messages):\n%s", len(last.Messages), body)
	}
}
