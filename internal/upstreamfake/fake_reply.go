package upstreamfake

import (
	"net/http"
	"strings"
	"time"
)

// ToolCall is one tool call the scripted model makes.
type ToolCall struct {
	// ID is the provider tool call id; empty means one is generated.
	ID string
	// Name is the tool name, for example "bash" or "context_tree_query".
	Name string
	// Input is the JSON object of arguments; empty means {}. For a Custom call it is the
	// freeform input text.
	Input string
	// Custom makes the call a Responses API custom_tool_call (freeform input, e.g. Codex's
	// apply_patch); the other formats ignore it.
	Custom bool
}

// Usage is the token usage the scripted model reports.
type Usage struct {
	// InputTokens is the uncached prompt token count; zero means estimated from the body size.
	InputTokens int
	// OutputTokens is the completion token count; zero means estimated from the reply.
	OutputTokens int
	// CacheReadTokens is reported as cache_read_input_tokens / prompt_tokens_details.cached_tokens.
	CacheReadTokens int
	// CacheCreationTokens is reported as cache_creation_input_tokens (Anthropic only).
	CacheCreationTokens int
}

// Reply is one scripted model turn. With Status ≥ 400 it is an error response in the
// provider's error shape; with Raw set, Raw is sent as the body verbatim.
type Reply struct {
	// Thinking, when non-empty, is sent as a thinking block before the text (Anthropic only).
	Thinking string
	// Text is the assistant text; may be empty when ToolCalls is not.
	Text string
	// ToolCalls are the tool calls, after the text.
	ToolCalls []ToolCall
	// Usage is the reported usage.
	Usage Usage
	// Stop, when non-empty, is sent as the stop reason (Anthropic stop_reason, OpenAI
	// finish_reason) instead of the one the reply implies (tool_use / tool_calls with tool
	// calls, else end_turn / stop), e.g. "max_tokens" or "length" for a truncated reply.
	Stop string
	// Status, when ≥ 400, makes this an error response with ErrorType and ErrorMessage.
	Status int
	// ErrorType is the provider error type ("overloaded_error", "rate_limit_error", ...).
	ErrorType string
	// ErrorMessage is the error message.
	ErrorMessage string
	// Raw, when non-nil, is sent verbatim with Status (default 200) and ContentType.
	Raw []byte
	// ContentType goes with Raw; default application/json.
	ContentType string
	// Header holds extra response headers.
	Header http.Header
	// Delay is slept before the response starts.
	Delay time.Duration
	// ChunkDelay is slept between streamed events.
	ChunkDelay time.Duration
	// Hold, when non-nil, pauses a streamed reply after its first event until Hold is closed
	// (tests use it to see events relayed before the stream ends).
	Hold <-chan struct{}
	// Cut, when > 0, sends only the first Cut bytes of the response body and then drops the
	// connection without ending the response, as when a provider's connection breaks: the
	// client's read fails (unexpected EOF) instead of reaching the body's end.
	Cut int
	// Stall, when > 0, sends only the first Stall bytes of the response body and then sends
	// nothing more until the client gives up (the request's context ends), as a provider
	// that stalls mid-response.
	Stall int
}

func (s *Server) fillIDs(rep *Reply) {
	calls := make([]ToolCall, len(rep.ToolCalls))
	copy(calls, rep.ToolCalls)
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = s.nextID("toolu_")
		}
		if strings.TrimSpace(calls[i].Input) == "" {
			calls[i].Input = "{}"
		}
	}
	rep.ToolCalls = calls
}

// fillUsage estimates the usage a reply leaves zero: input tokens from the request body size,
// output tokens from the reply's text, thinking and tool calls.
func fillUsage(rep *Reply, bodyLen int) {
	if rep.Usage.InputTokens == 0 {
		rep.Usage.InputTokens = estimateTokens(bodyLen)
	}
	if rep.Usage.OutputTokens == 0 {
		n := len(rep.Text) + len(rep.Thinking)
		for _, c := range rep.ToolCalls {
			n += len(c.Input) + len(c.Name)
		}
		rep.Usage.OutputTokens = estimateTokens(n)
	}
}

func estimateTokens(n int) int { return n/4 + 1 }

// stopReason returns the stop reason of a reply: Reply.Stop when set, else tool when it makes
// tool calls, else end.
func stopReason(rep Reply, tool, end string) string {
	switch {
	case rep.Stop != "":
		return rep.Stop
	case len(rep.ToolCalls) > 0:
		return tool
	}
	return end
}
