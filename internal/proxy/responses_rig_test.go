package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// codexTools are tools as Codex CLI sends them: a function tool, a namespace of tools and a
// hosted web search.
var codexTools = []responses.ToolUnionParam{
	{OfFunction: &responses.FunctionToolParam{Name: "exec_command", Strict: openai.Bool(false),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}},
	param.Override[responses.ToolUnionParam](json.RawMessage(codexNamespaceTool)),
	param.Override[responses.ToolUnionParam](json.RawMessage(`{"type":"web_search"}`)),
}

const codexNamespaceTool = `{"type":"namespace","name":"mcp__fs","description":"file tools","tools":[{"type":"function","name":"read","parameters":{"type":"object"}}]}`

// codexSession is a Responses conversation as Codex CLI holds it: its input items, sent with
// store false, encrypted reasoning included, a prompt_cache_key and client_metadata; the
// output items it gets back are sent again without their ids (as Codex serializes them).
type codexSession struct {
	c      *openai.Client
	up     *upstreamfake.Server
	items  []json.RawMessage
	stream bool
	// keepIDs sends output items back as they came (ids included) and leaves store unset,
	// as an openai-go user who appends response.Output does.
	keepIDs bool
}

func (r *rig) codex(session string, stream bool) *codexSession {
	return &codexSession{c: r.openai(session), up: r.up, stream: stream,
		items: []json.RawMessage{json.RawMessage(`{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>sandboxed</permissions>"}]}`)}}
}

func (cs *codexSession) params() responses.ResponseNewParams {
	list := make(responses.ResponseInputParam, len(cs.items))
	for i, it := range cs.items {
		list[i] = param.Override[responses.ResponseInputItemUnionParam](it)
	}
	p := responses.ResponseNewParams{Model: "gpt-5.2-codex", Instructions: openai.String("You are Codex, a coding agent."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: list}, Tools: codexTools, PromptCacheKey: openai.String("thread-1")}
	if !cs.keepIDs {
		p.Store = openai.Bool(false)
		p.Include = []responses.ResponseIncludable{"reasoning.encrypted_content"}
		p.SetExtraFields(map[string]any{"client_metadata": map[string]string{"originator": "codex_exec"}})
	}
	return p
}

// user appends a user message.
func (cs *codexSession) user(text string) {
	b, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": []map[string]string{{"type": "input_text", "text": text}}})
	cs.items = append(cs.items, b)
}

// output appends a tool's output.
func (cs *codexSession) output(callID, text string) {
	b, _ := json.Marshal(map[string]string{"type": "function_call_output", "call_id": callID, "output": text})
	cs.items = append(cs.items, b)
}

// turn sends the items and appends the output items the client got; every request the
// provider received meanwhile must be valid.
func (cs *codexSession) turn(t *testing.T) *responses.Response {
	t.Helper()
	before := len(cs.up.Requests())
	resp := rTurn(t, cs.c, cs.params(), cs.stream)
	for _, rec := range cs.up.Requests()[before:] {
		if rec.Format == wire.Responses {
			mustValid(t, wire.Responses, rec.Body)
		}
	}
	for _, o := range resp.Output {
		raw := []byte(o.RawJSON())
		if !cs.keepIDs {
			raw, _ = sjson.DeleteBytes(raw, "id")
			raw, _ = sjson.DeleteBytes(raw, "status")
		}
		cs.items = append(cs.items, raw)
	}
	return resp
}

// rTurn sends one Responses request, streamed or not, and returns the response the client
// ends up with: a streamed one is its terminal event's, once checkStream found it coherent.
func rTurn(t *testing.T, c *openai.Client, p responses.ResponseNewParams, stream bool) *responses.Response {
	t.Helper()
	if !stream {
		resp, err := c.Responses.New(context.Background(), p)
		if err != nil {
			t.Fatalf("responses.new: %v", err)
		}
		return resp
	}
	st := c.Responses.NewStreaming(context.Background(), p)
	var evs []responses.ResponseStreamEventUnion
	for st.Next() {
		evs = append(evs, st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return checkStream(t, evs)
}

// checkStream checks a Responses event stream as a client sees it — one response.created
// first, sequence numbers consecutive, output indexes contiguous in order of their items,
// each item's text the sum of its deltas, one terminal event last whose output is the items
// of the output_item.done events, byte for byte, and whose id is response.created's — and
// returns the terminal event's response.
func checkStream(t *testing.T, evs []responses.ResponseStreamEventUnion) *responses.Response {
	t.Helper()
	if len(evs) == 0 || evs[0].Type != "response.created" {
		t.Fatalf("the stream does not start with response.created: %d events", len(evs))
	}
	var done []string
	texts := map[int64]string{}
	added := int64(0)
	for i, ev := range evs {
		if i > 0 && ev.SequenceNumber != evs[i-1].SequenceNumber+1 {
			t.Fatalf("event %d (%s) has sequence_number %d after %d", i, ev.Type, ev.SequenceNumber, evs[i-1].SequenceNumber)
		}
		if i > 0 && ev.Type == "response.created" {
			t.Fatalf("a second response.created at event %d", i)
		}
		if terminal := ev.Type == "response.completed" || ev.Type == "response.incomplete" || ev.Type == "response.failed"; terminal != (i == len(evs)-1) {
			t.Fatalf("event %d of %d is %s", i, len(evs), ev.Type)
		}
		idx := gjson.Get(ev.RawJSON(), "output_index")
		switch {
		case ev.Type == "response.output_item.added":
			if ev.OutputIndex != added {
				t.Fatalf("item added at output_index %d, want %d", ev.OutputIndex, added)
			}
			added++
		case idx.Exists() && idx.Int() >= added:
			t.Fatalf("%s for output_index %d before its item was added", ev.Type, idx.Int())
		}
		switch ev.Type {
		case "response.output_text.delta":
			texts[ev.OutputIndex] += ev.Delta
		case "response.output_item.done":
			if int64(len(done)) != ev.OutputIndex {
				t.Fatalf("item %d done out of order (%d done)", ev.OutputIndex, len(done))
			}
			raw := gjson.Get(ev.RawJSON(), "item").Raw
			if want := texts[ev.OutputIndex]; ev.Item.Type == "message" && gjson.Get(raw, "content.0.text").String() != want {
				t.Fatalf("message %d is %s, its deltas say %q", ev.OutputIndex, raw, want)
			}
			done = append(done, raw)
		}
	}
	last := evs[len(evs)-1]
	var out []string
	gjson.Get(last.RawJSON(), "response.output").ForEach(func(_, v gjson.Result) bool { out = append(out, v.Raw); return true })
	if fmt.Sprint(out) != fmt.Sprint(done) {
		t.Fatalf("the terminal event's output\n%v\nis not the items done\n%v", out, done)
	}
	if last.Response.ID != evs[0].Response.ID {
		t.Fatalf("terminal response id %s, created %s", last.Response.ID, evs[0].Response.ID)
	}
	resp := last.Response
	return &resp
}

// outputTypes lists the types of a response's output items.
func outputTypes(resp *responses.Response) []string {
	var ts []string
	for _, o := range resp.Output {
		ts = append(ts, o.Type)
	}
	return ts
}

// codexOutput is a shell output as Codex's unified exec tool reports it.
func codexOutput(code int, body string) string {
	return fmt.Sprintf("Chunk ID: 4f1c\nWall time: 0.8 seconds\nProcess exited with code %d\nOriginal token count: %d\nOutput:\n%s", code, len(body)/4, body)
}

// codexConversation drives a tool-using Codex-like conversation cs: a reasoning item and a
// shell call with a large output, then a final answer, which starts a flush.
func codexConversation(t *testing.T, r *rig, cs *codexSession) *codexSession {
	t.Helper()
	r.up.Enqueue(
		upstreamfake.Reply{Thinking: "I should build first.", ToolCalls: []upstreamfake.ToolCall{{ID: "call_b1", Name: "exec_command", Input: `{"cmd":"make build"}`}}},
		upstreamfake.Reply{Text: "The build passed."},
	)
	cs.user("Please build the project.")
	resp := cs.turn(t)
	if got := fmt.Sprint(outputTypes(resp)); got != "[reasoning function_call]" || resp.Output[1].CallID != "call_b1" {
		t.Fatalf("turn 1: %s", got)
	}
	cs.output("call_b1", codexOutput(0, bigOutput("build", 60)))
	if resp = cs.turn(t); resp.OutputText() != "The build passed." || resp.Status != "completed" {
		t.Fatalf("turn 2: %s", resp.RawJSON())
	}
	return cs
}

// inputPrefix returns a Responses body's raw input array without its closing bracket.
func inputPrefix(body []byte) string {
	return strings.TrimSuffix(strings.TrimSpace(gjson.GetBytes(body, "input").Raw), "]")
}
