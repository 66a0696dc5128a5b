package upstreamfake

import (
	"context"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

func responsesParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
}

// TestResponsesSDKNonStreaming: openai-go decodes the fake's response body: reasoning,
// message, function and custom calls in order, usage with cached tokens.
func TestResponsesSDKNonStreaming(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Thinking: "plan", Text: "done", ToolCalls: []ToolCall{{ID: "call_1", Name: "exec_command", Input: `{"cmd":"pwd"}`},
		{ID: "call_2", Name: "apply_patch", Input: "*** Begin Patch", Custom: true}}, Usage: Usage{InputTokens: 5, CacheReadTokens: 3, OutputTokens: 2}})
	r, err := oc(s).Responses.New(context.Background(), responsesParams())
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, o := range r.Output {
		types = append(types, o.Type)
	}
	if got := types; len(got) != 4 || got[0] != "reasoning" || got[1] != "message" || got[2] != "function_call" || got[3] != "custom_tool_call" {
		t.Fatalf("output types = %v", got)
	}
	if r.OutputText() != "done" || r.Output[2].CallID != "call_1" || r.Output[2].Arguments.OfString != `{"cmd":"pwd"}` || r.Output[3].Input != "*** Begin Patch" {
		t.Fatalf("response = %s", r.RawJSON())
	}
	if r.Usage.InputTokens != 8 || r.Usage.InputTokensDetails.CachedTokens != 3 || r.Usage.OutputTokens != 2 || r.Status != "completed" {
		t.Fatalf("usage/status = %+v %s", r.Usage, r.Status)
	}
	if rec, _ := s.Last(); rec.Format != wire.Responses || rec.Path != "/v1/responses" {
		t.Fatalf("recorded %+v", rec)
	}
}

// TestResponsesSDKStreaming: the streamed events decode, carry consecutive sequence numbers,
// and end in response.completed holding every item the deltas built.
func TestResponsesSDKStreaming(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Thinking: "think first", Text: "streamed answer", ToolCalls: []ToolCall{{ID: "call_9", Name: "read", Input: `{"path":"a"}`}}})
	st := oc(s).Responses.NewStreaming(context.Background(), responsesParams())
	var (
		seq       int64
		text, arg string
		final     responses.Response
		added     []string
	)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.function_call_arguments.delta":
			arg += ev.Delta
		case "response.output_item.added":
			added = append(added, ev.Item.Type)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "streamed answer" || arg != `{"path":"a"}` || len(added) != 3 || added[0] != "reasoning" {
		t.Fatalf("text %q args %q added %v", text, arg, added)
	}
	if final.Status != "completed" || len(final.Output) != 3 || final.Output[2].CallID != "call_9" || final.Usage.TotalTokens == 0 ||
		gjson.Get(final.RawJSON(), "output.0.encrypted_content").String() == "" {
		t.Fatalf("final = %s", final.RawJSON())
	}
}

// TestResponsesIncompleteAndErrors: a max_output_tokens stop ends the stream in
// response.incomplete; an error reply has the OpenAI error shape.
func TestResponsesIncompleteAndErrors(t *testing.T) {
	s := Start()
	defer s.Close()
	s.Enqueue(Reply{Text: "cut", Stop: "max_output_tokens"}, Reply{Status: 429, ErrorType: "rate_limit_error", ErrorMessage: "slow down"})
	st := oc(s).Responses.NewStreaming(context.Background(), responsesParams())
	var last string
	var reason string
	for st.Next() {
		last = st.Current().Type
		reason = st.Current().Response.IncompleteDetails.Reason
	}
	if last != "response.incomplete" || reason != "max_output_tokens" {
		t.Fatalf("last event %q reason %q", last, reason)
	}
	_, err := oc(s).Responses.New(context.Background(), responsesParams())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Message != "slow down" || apiErr.Type != "rate_limit_error" {
		t.Fatalf("err = %v", err)
	}
}
