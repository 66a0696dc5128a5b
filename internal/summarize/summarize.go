// Package summarize turns planned flush batches into summary text: Extractive (no LLM, the
// default), LLM (one streaming Anthropic, Chat Completions or Responses call) and Fallback (retry
// on the session's model); Run summarizes in parallel. See docs/summarizer.md.
package summarize

import (
	"context"
	"errors"
	"fmt"
)

// Kind says which prompt shape a Request carries.
type Kind uint8

const (
	// KindBatch is a per-batch prompt: serialized tool calls, each introduced by its
	// [[N:tool]] label (N is 1-based within the batch).
	KindBatch Kind = iota
	// KindRange is a range-fusion prompt: several per-batch summaries of one closed sub-task
	// to be fused into one.
	KindRange
)

// String returns "batch" or "range".
func (k Kind) String() string {
	if k == KindRange {
		return "range"
	}
	return "batch"
}

// Call is one tool call of a batch in structured form. Label is its 1-based [[N:tool]] number.
type Call struct {
	Label   int    `json:"label"`
	Tool    string `json:"tool"`
	Args    []byte `json:"args,omitempty"` // the call's input JSON as sent
	Result  string `json:"result"`
	IsError bool   `json:"isError,omitempty"`
}

// Request is one summarizer call.
type Request struct {
	// ID names the batch; outputs are keyed by it.
	ID string `json:"id"`
	// Kind is the prompt shape.
	Kind Kind `json:"kind"`
	// System is an optional system prompt (sent as the provider's system instruction).
	System string `json:"system,omitempty"`
	// Prompt is the full user message sent to an LLM summarizer.
	Prompt string `json:"prompt"`
	// Calls optionally carries the batch's calls in structured form; when empty, Extractive
	// parses them out of Prompt (the engine's serialization).
	Calls []Call `json:"calls,omitempty"`
	// Parts optionally carries a range request's per-batch summaries; when empty, Extractive
	// parses them out of Prompt.
	Parts []string `json:"parts,omitempty"`
	// Session is the session's own model: the fallback target and the target of the "default"
	// summarizer model; nil disables both. Its APIKey and Header are never serialized.
	Session *Endpoint `json:"session,omitempty"`
}

// Usage is the token usage and cost of one or more summarizer calls.
type Usage struct {
	InputTokens         int64   `json:"inputTokens"`         // uncached input
	OutputTokens        int64   `json:"outputTokens"`        // output, thinking included
	CacheReadTokens     int64   `json:"cacheReadTokens"`     // input read from the prompt cache
	CacheCreationTokens int64   `json:"cacheCreationTokens"` // input written to the prompt cache
	CostUSD             float64 `json:"costUSD"`             // priced with internal/cost
	Calls               int64   `json:"calls"`               // provider calls made (0 for extractive)
}

// Add accumulates o into u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheCreationTokens += o.CacheCreationTokens
	u.CostUSD += o.CostUSD
	u.Calls += o.Calls
}

// Result is a successful summary.
type Result struct {
	// Text is the summary, still carrying the [[N:tool]] labels for the engine to decorate.
	Text string
	// Usage is what producing Text cost (the successful attempt only).
	Usage Usage
	// Model names what produced Text ("extractive" for the built-in summarizer).
	Model string
	// Fallback is true when Text came from the session's own model.
	Fallback bool
}

// Summarizer produces a summary for one request. Implementations are safe for concurrent use.
type Summarizer interface {
	Summarize(ctx context.Context, req *Request) (*Result, error)
}

// ErrorKind classifies a summarizer failure.
type ErrorKind uint8

const (
	// KindTransient is a failed call that may succeed later (HTTP 5xx/429, network error,
	// provider stream error, any other unexpected response but KindAuth's and KindRejected's).
	KindTransient ErrorKind = iota + 1
	// KindIdleTimeout: no stream event arrived within the idle timeout.
	KindIdleTimeout
	// KindTotalTimeout: the call exceeded the total (ceiling) timeout.
	KindTotalTimeout
	// KindAuth: the provider rejected the credentials (HTTP 401/403) or none are configured.
	KindAuth
	// KindUnusable: the call succeeded but the text is empty or was cut off at the token limit.
	KindUnusable
	// KindInvalid: the request cannot be summarized (bad input, e.g. an empty prompt).
	KindInvalid
	// KindRejected: the provider refused the request as invalid (HTTP 400, 404, 422). A retry on
	// the same model fails the same way; another model may take it (see failover).
	KindRejected
)

var kindNames = map[ErrorKind]string{
	KindTransient:    "transient",
	KindIdleTimeout:  "idle-timeout",
	KindTotalTimeout: "total-timeout",
	KindAuth:         "auth",
	KindUnusable:     "unusable",
	KindInvalid:      "invalid",
	KindRejected:     "rejected",
}

// String returns the kind's stable name (used as a metric label).
func (k ErrorKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "unknown"
}

// Sentinel errors matching an *Error of the same kind with errors.Is.
var (
	ErrTransient    = &Error{Kind: KindTransient}
	ErrIdleTimeout  = &Error{Kind: KindIdleTimeout}
	ErrTotalTimeout = &Error{Kind: KindTotalTimeout}
	ErrAuth         = &Error{Kind: KindAuth}
	ErrUnusable     = &Error{Kind: KindUnusable}
	ErrInvalid      = &Error{Kind: KindInvalid}
	ErrRejected     = &Error{Kind: KindRejected}
)

// Error is every failure a Summarizer returns (except the caller's own context cancellation,
// which is returned as the context's error).
type Error struct {
	Kind   ErrorKind // the classification
	Model  string    // the model that failed ("" when not applicable)
	Status int       // HTTP status, 0 when none
	Msg    string
	Err    error // underlying cause, may be nil
}

// Error formats the failure with its kind, model and status.
func (e *Error) Error() string {
	s := "summarizer"
	if e.Model != "" {
		s += " " + e.Model
	}
	s += ": " + e.Kind.String()
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error of the same kind (so the sentinels match).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && t.Model == "" && t.Msg == "" && t.Err == nil && t.Status == 0
}

// KindOf returns the ErrorKind of err, or 0 when err is not a summarizer *Error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// failover reports whether a failure of the primary model is retried on the fallback model:
// yes for transient failures, timeouts and rejections (reference §8.5, docs/summarizer.md),
// no for auth and unusable failures.
func failover(err error) bool {
	switch KindOf(err) {
	case KindTransient, KindIdleTimeout, KindTotalTimeout, KindRejected:
		return true
	}
	return false
}
