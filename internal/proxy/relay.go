package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// relay relays a 200 model response to the client and returns what the proxy learned from
// it. It is the one place that picks a relay, by the response's kind and the request's format.
func (s *Server) relay(ctx context.Context, w http.ResponseWriter, t *turn, resp *http.Response) *outcome {
	stream := isEventStream(resp.Header)
	t.recoverText = s.recoversText(t)
	switch {
	case !stream && t.f == wire.OpenAI:
		return s.relayJSON(ctx, w, t, resp, openAIJSON{})
	case !stream && t.f == wire.Responses:
		return s.relayJSON(ctx, w, t, resp, responsesJSON{stripIDs: storeOff(t)})
	case !stream:
		return s.relayJSON(ctx, w, t, resp, anthropicJSON{})
	case manyChoices(t):
		return s.streamOpenAIChoices(ctx, startStream(w, resp), t, resp)
	case t.f == wire.OpenAI:
		return s.streamOpenAI(ctx, startStream(w, resp), t, resp)
	case t.f == wire.Responses:
		return s.streamResponses(ctx, startStream(w, resp), t, resp)
	default:
		return s.streamAnthropic(ctx, startStream(w, resp), t, resp)
	}
}

// isEventStream reports whether a response is a server-sent event stream.
func isEventStream(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
}

// manyChoices reports whether the request asks for several choices (OpenAI n > 1). Their
// response is relayed untouched: the proxy hides and answers nothing in it, and choice 0 is
// the answer the session's transcript continues with.
func manyChoices(t *turn) bool {
	n, ok := t.client.Field("n")
	return ok && t.f == wire.OpenAI && gjson.ParseBytes(n).Int() > 1
}

// usage is provider-reported token usage: input excludes the cache reads and writes;
// reasoning (Responses) is part of output.
type usage struct{ input, output, cacheRead, cacheCreation, reasoning int }

func (u *usage) add(o usage) {
	u.input += o.input
	u.output += o.output
	u.cacheRead += o.cacheRead
	u.cacheCreation += o.cacheCreation
	u.reasoning += o.reasoning
}

func anthropicUsage(v gjson.Result) usage {
	return usage{input: int(v.Get("input_tokens").Int()), output: int(v.Get("output_tokens").Int()),
		cacheRead: int(v.Get("cache_read_input_tokens").Int()), cacheCreation: int(v.Get("cache_creation_input_tokens").Int())}
}

// openAIUsage reads a Chat Completions usage object; input excludes cached tokens.
func openAIUsage(v gjson.Result) usage {
	cached := int(v.Get("prompt_tokens_details.cached_tokens").Int())
	return usage{input: int(v.Get("prompt_tokens").Int()) - cached, output: int(v.Get("completion_tokens").Int()), cacheRead: cached}
}

// outcome is what the proxy learned from a response.
type outcome struct {
	usage usage
	// final: a final answer (no client tool calls, an end-of-turn stop).
	final bool
	// splice is the hidden exchange to store, if any.
	splice *splice
	// viewTail are the model-view messages this response adds to the transcript.
	viewTail []json.RawMessage
}

// call is one tool call of a response.
type call struct {
	id, name string
	input    []byte
}

func (c call) isQuery() bool { return c.name == pruner.QueryToolName }

func splitCalls(calls []call) (query, client []call) {
	for _, c := range calls {
		if c.isQuery() {
			query = append(query, c)
		} else {
			client = append(client, c)
		}
	}
	return
}

// finalAnswer reports whether a response with calls client tool calls and stop is a final
// answer: no calls and an end-of-turn stop, and not a text turn's (its request side says,
// finalReply).
func (t *turn) finalAnswer(calls int, stop string) bool {
	return !t.text && calls == 0 && endTurn(t.f, stop)
}

// toolStop reports whether stop lets the client's tool calls run: Anthropic tool_use, OpenAI
// tool_calls. A Responses answer has no stop reason; its stop is its status, and a completed
// one runs the calls it holds.
func toolStop(f wire.Format, stop string) bool {
	switch f {
	case wire.OpenAI:
		return stop == "tool_calls"
	case wire.Responses:
		return stop == "completed"
	}
	return stop == "tool_use"
}

// deferredStop is the stop a turn ends with when the proxy deferred its query calls.
func deferredStop(f wire.Format) string {
	switch f {
	case wire.OpenAI:
		return "stop"
	case wire.Responses:
		return "completed"
	}
	return "end_turn"
}

// endTurn reports whether stop ends the model's turn normally (Anthropic end_turn or
// stop_sequence, OpenAI stop, Responses completed); an answer cut off (max_tokens, length,
// incomplete), a refusal, a content filter stop or a failed response is never a final answer.
func endTurn(f wire.Format, stop string) bool {
	switch f {
	case wire.OpenAI:
		return stop == "stop"
	case wire.Responses:
		return stop == "completed"
	}
	return stop == "end_turn" || stop == "stop_sequence"
}

func setAnthropicUsage(b []byte, path string, u usage) []byte {
	b, _ = sjson.SetBytes(b, path+".input_tokens", u.input)
	b, _ = sjson.SetBytes(b, path+".output_tokens", u.output)
	b, _ = sjson.SetBytes(b, path+".cache_read_input_tokens", u.cacheRead)
	b, _ = sjson.SetBytes(b, path+".cache_creation_input_tokens", u.cacheCreation)
	return b
}

func setOpenAIUsage(b []byte, path string, u usage) []byte {
	b, _ = sjson.SetBytes(b, path+".prompt_tokens", u.input+u.cacheRead)
	b, _ = sjson.SetBytes(b, path+".completion_tokens", u.output)
	b, _ = sjson.SetBytes(b, path+".total_tokens", u.input+u.cacheRead+u.output)
	b, _ = sjson.SetBytes(b, path+".prompt_tokens_details.cached_tokens", u.cacheRead)
	return b
}
