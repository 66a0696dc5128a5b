package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// rawEvents builds a Responses event stream: each event is its type and its members besides
// type and sequence_number, numbered from 0.
func rawEvents(evs ...[2]string) string {
	var b strings.Builder
	for i, ev := range evs {
		fmt.Fprintf(&b, "event: %s\ndata: {\"type\":%q,%s,\"sequence_number\":%d}\n\n", ev[0], ev[0], ev[1], i)
	}
	return b.String()
}

const (
	spliceMsg1  = `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Let me look."}]}`
	spliceRs1   = `{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"need t1"}],"encrypted_content":"enc-one"}`
	spliceQuery = `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"toolCallIds\":[\"t9\"]}","call_id":"call_q","name":"context_tree_query"}`
	spliceRs2   = `{"id":"rs_2","type":"reasoning","summary":[],"encrypted_content":"enc-two"}`
	spliceMsg2  = `{"id":"msg_2","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Line 42."}]}`
)

// spliceRounds are two provider streams: a message, then a reasoning item and a
// context_tree_query call; then a reasoning item, a message and an event the proxy does not
// know that names an output index.
var spliceRounds = []string{
	rawEvents(
		[2]string{"response.created", `"response":{"id":"resp_r1","status":"in_progress","output":[]}`},
		[2]string{"response.in_progress", `"response":{"id":"resp_r1","status":"in_progress","output":[]}`},
		[2]string{"response.output_item.added", `"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}`},
		[2]string{"response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Let me look."`},
		[2]string{"response.output_item.done", `"output_index":0,"item":` + spliceMsg1},
		[2]string{"response.output_item.added", `"output_index":1,"item":{"id":"rs_1","type":"reasoning","summary":[]}`},
		[2]string{"response.reasoning_summary_text.delta", `"item_id":"rs_1","output_index":1,"summary_index":0,"delta":"need t1"`},
		[2]string{"response.output_item.done", `"output_index":1,"item":` + spliceRs1},
		[2]string{"response.output_item.added", `"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_q","name":"context_tree_query"}`},
		[2]string{"response.function_call_arguments.delta", `"item_id":"fc_1","output_index":2,"delta":"{\"toolCallIds\":[\"t9\"]}"`},
		[2]string{"response.output_item.done", `"output_index":2,"item":` + spliceQuery},
		[2]string{"response.completed", `"response":{"id":"resp_r1","status":"completed","output":[` + spliceMsg1 + `,` + spliceRs1 + `,` + spliceQuery + `],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":15}}`},
	),
	rawEvents(
		[2]string{"response.created", `"response":{"id":"resp_r2","status":"in_progress","output":[]}`},
		[2]string{"response.in_progress", `"response":{"id":"resp_r2","status":"in_progress","output":[]}`},
		[2]string{"response.output_item.added", `"output_index":0,"item":{"id":"rs_2","type":"reasoning","summary":[]}`},
		[2]string{"response.output_item.done", `"output_index":0,"item":` + spliceRs2},
		[2]string{"response.output_item.added", `"output_index":1,"item":{"id":"msg_2","type":"message","status":"in_progress","role":"assistant","content":[]}`},
		[2]string{"response.output_text.delta", `"item_id":"msg_2","output_index":1,"content_index":0,"delta":"Line 42."`},
		[2]string{"response.future_event", `"item_id":"msg_2","output_index":1,"x":  [1, 2]`},
		[2]string{"response.output_item.done", `"output_index":1,"item":` + spliceMsg2},
		[2]string{"response.completed", `"response":{"id":"resp_r2","status":"completed","output":[` + spliceRs2 + `,` + spliceMsg2 + `],"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":26}}`},
	),
}

// TestResponsesAPIStreamSplicedEventByEvent: a recovery spliced into one stream, event by
// event: the first round's events as they came (the reasoning item before the query call and
// the call never), the continuation's without its opening events, its items renumbered after
// the client's, every sequence number consecutive, and the terminal event carrying the first
// response's id, the items the client saw and the usage summed, reasoning tokens included.
func TestResponsesAPIStreamSplicedEventByEvent(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	for _, raw := range spliceRounds {
		r.up.Enqueue(upstreamfake.Reply{Raw: []byte(raw), ContentType: "text/event-stream"})
	}
	resp, b := post(t, r.http.URL+"/v1/responses", `{"model":"gpt-5","stream":true,"input":"what does line 42 say?"}`, map[string]string{HeaderSession: "splice"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	got := readSSE(t, b)
	first := readSSE(t, []byte(spliceRounds[0]))
	want := []string{
		"response.created 0 -", "response.in_progress 1 -",
		"response.output_item.added 2 0", "response.output_text.delta 3 0", "response.output_item.done 4 0",
		"response.output_item.added 5 1", "response.output_item.done 6 1",
		"response.output_item.added 7 2", "response.output_text.delta 8 2", "response.future_event 9 2", "response.output_item.done 10 2",
		"response.completed 11 -",
	}
	var shape []string
	for _, ev := range got {
		d := gjson.ParseBytes(ev.data)
		idx := "-"
		if v := d.Get("output_index"); v.Exists() {
			idx = v.Raw
		}
		shape = append(shape, fmt.Sprintf("%s %d %s", d.Get("type").Str, d.Get("sequence_number").Int(), idx))
	}
	if fmt.Sprint(shape) != fmt.Sprint(want) {
		t.Fatalf("the client's events\n%v\nwant\n%v", shape, want)
	}
	for i := range 5 {
		if !bytes.Equal(got[i].raw, first[i].raw) {
			t.Fatalf("event %d changed: %q, the provider sent %q", i, got[i].raw, first[i].raw)
		}
	}
	if d := gjson.ParseBytes(got[9].data); d.Get("x").Raw != "[1, 2]" || d.Get("item_id").Str != "msg_2" {
		t.Fatalf("unknown event changed: %s", got[9].data)
	}
	final := gjson.ParseBytes(got[11].data).Get("response")
	if final.Get("id").Str != "resp_r1" || final.Get("output").Raw != "["+spliceMsg1+","+spliceRs2+","+spliceMsg2+"]" {
		t.Fatalf("terminal response: %s", final.Raw)
	}
	if u := final.Get("usage"); u.Get("input_tokens").Int() != 30 || u.Get("input_tokens_details.cached_tokens").Int() != 12 ||
		u.Get("output_tokens").Int() != 11 || u.Get("output_tokens_details.reasoning_tokens").Int() != 5 || u.Get("total_tokens").Int() != 41 {
		t.Fatalf("usage not summed: %s", u.Raw)
	}
	// The continuation appended the first round's items as they came (the request stores
	// them: their ids kept) and the answer.
	rec, cont := lastModelRequest(t, r.up, wire.Responses)
	items := gjson.GetBytes(rec.Body, "input").Array()
	if len(items) != 5 || items[1].Raw != spliceMsg1 || items[2].Raw != spliceRs1 || items[3].Raw != spliceQuery ||
		items[4].Get("type").Str != "function_call_output" || items[4].Get("call_id").Str != "call_q" || len(cont.Messages) != 3 {
		t.Fatalf("continuation input: %s", gjson.GetBytes(rec.Body, "input").Raw)
	}
}

// TestResponsesAPIJSONSplice: the same recovery answered as JSON: one response, the last
// round's, with the items the client sees and the usage summed, reasoning tokens included.
func TestResponsesAPIJSONSplice(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	r.up.Enqueue(
		upstreamfake.Reply{Raw: []byte(`{"id":"resp_j1","object":"response","status":"completed","output":[` + spliceMsg1 + `,` + spliceRs1 + `,` + spliceQuery + `],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":15}}`)},
		upstreamfake.Reply{Raw: []byte(`{"id":"resp_j2","object":"response","status":"completed","output":[` + spliceRs2 + `,` + spliceMsg2 + `],"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":8},"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":26},"extra":true}`)},
	)
	resp, b := post(t, r.http.URL+"/v1/responses", `{"model":"gpt-5","input":"what does line 42 say?"}`, map[string]string{HeaderSession: "splice-json"})
	v := gjson.ParseBytes(b)
	if resp.StatusCode != 200 || v.Get("id").Str != "resp_j2" || v.Get("output").Raw != "["+spliceMsg1+","+spliceRs2+","+spliceMsg2+"]" || !v.Get("extra").Bool() {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if u := v.Get("usage"); u.Get("input_tokens").Int() != 30 || u.Get("input_tokens_details.cached_tokens").Int() != 12 ||
		u.Get("output_tokens").Int() != 11 || u.Get("output_tokens_details.reasoning_tokens").Int() != 5 || u.Get("total_tokens").Int() != 41 {
		t.Fatalf("usage not summed: %s", u.Raw)
	}
}

// readSSE splits a relayed stream into its events.
func readSSE(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(b))
	var evs []sseEvent
	for {
		ev, err := readEvent(br, 1<<20)
		if len(ev.data) > 0 {
			evs = append(evs, ev)
		}
		if err != nil {
			return evs
		}
	}
}

// TestResponsesAPIBrokenStreamEndsWithErrorEvent: a provider stream that breaks off ends the
// client's stream with an error event numbered after the last relayed one, then the
// connection is aborted.
func TestResponsesAPIBrokenStreamEndsWithErrorEvent(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	raw := spliceRounds[1]
	r.up.Enqueue(upstreamfake.Reply{Raw: []byte(raw), ContentType: "text/event-stream", Cut: strings.Index(raw, "event: response.output_item.done")})
	resp, body, err := postRaw(t, r.http.URL+"/v1/responses", `{"model":"gpt-5","stream":true,"input":"hi"}`)
	if err == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the client's read of a broken stream did not fail: %d %v", resp.StatusCode, err)
	}
	evs := readSSE(t, []byte(body))
	last := gjson.ParseBytes(evs[len(evs)-1].data)
	if last.Get("type").Str != "error" || last.Get("code").Str != "upstream_read_failed" || last.Get("sequence_number").Int() != gjson.ParseBytes(evs[len(evs)-2].data).Get("sequence_number").Int()+1 {
		t.Fatalf("stream ended with %s", evs[len(evs)-1].raw)
	}
}

// TestResponsesAPIErrorEventAfterHeldReasoning: a reasoning item held for the item after it
// goes out before an error event that ends the stream, in order and numbered on.
func TestResponsesAPIErrorEventAfterHeldReasoning(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	raw := rawEvents(
		[2]string{"response.created", `"response":{"id":"resp_e","status":"in_progress","output":[]}`},
		[2]string{"response.output_item.added", `"output_index":0,"item":{"id":"rs_e","type":"reasoning","summary":[]}`},
		[2]string{"response.output_item.done", `"output_index":0,"item":` + spliceRs2},
		[2]string{"error", `"code":"server_error","message":"boom","param":null`},
	)
	r.up.Enqueue(upstreamfake.Reply{Raw: []byte(raw), ContentType: "text/event-stream"})
	resp, b := post(t, r.http.URL+"/v1/responses", `{"model":"gpt-5","stream":true,"input":"hi"}`, map[string]string{HeaderSession: "held-error"})
	if resp.StatusCode != 200 || string(b) != raw {
		t.Fatalf("%d\n got %q\nwant %q", resp.StatusCode, b, raw)
	}
}

// TestResponsesAPIContinuationWithoutStore: for a request with "store": false the
// continuation sends the model's items without their ids, and leaves out a reasoning item
// without encrypted_content (nothing could bring it back); the client still sees one answer.
func TestResponsesAPIContinuationWithoutStore(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	r.up.Enqueue(
		upstreamfake.Reply{Raw: []byte(`{"id":"resp_s1","object":"response","status":"completed","output":[{"id":"rs_s","type":"reasoning","summary":[]},` + spliceQuery + `],"usage":{"input_tokens":10,"output_tokens":5}}`)},
		upstreamfake.Reply{Raw: []byte(`{"id":"resp_s2","object":"response","status":"completed","output":[` + spliceMsg2 + `],"usage":{"input_tokens":20,"output_tokens":6}}`)},
	)
	resp, b := post(t, r.http.URL+"/v1/responses", `{"model":"gpt-5","store":false,"input":"what does line 42 say?"}`, map[string]string{HeaderSession: "no-store"})
	if resp.StatusCode != 200 || gjson.GetBytes(b, "output").Raw != "["+spliceMsg2+"]" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	rec, _ := lastModelRequest(t, r.up, wire.Responses)
	items := gjson.GetBytes(rec.Body, "input").Array()
	if len(items) != 3 || items[1].Get("type").Str != "function_call" || items[1].Get("id").Exists() || items[1].Get("call_id").Str != "call_q" ||
		items[1].Get("arguments").Raw != gjson.Get(spliceQuery, "arguments").Raw || items[2].Get("type").Str != "function_call_output" {
		t.Fatalf("continuation input: %s", gjson.GetBytes(rec.Body, "input").Raw)
	}
}
