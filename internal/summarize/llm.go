package summarize

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/wire"
)

// bearer reports whether the format authenticates with "Authorization: Bearer" (the OpenAI
// APIs, which share their keys).
func bearer(f wire.Format) bool { return f == wire.OpenAI || f == wire.Responses }

// Endpoint is one model on one provider.
type Endpoint struct {
	// Format is the API: Anthropic Messages (POST {base}/v1/messages), OpenAI Chat Completions
	// (POST {base}/chat/completions) or Responses (POST {base}/responses).
	Format wire.Format `json:"format"`
	// BaseURL is the provider base URL as in the config's upstreams: Anthropic without the
	// version path (https://api.anthropic.com, calls go to {base}/v1/messages), OpenAI with it
	// (https://api.openai.com/v1, calls go to {base}/chat/completions).
	BaseURL string `json:"baseURL"`
	Model   string `json:"model"`
	// APIKey is sent as x-api-key (Anthropic) or "Authorization: Bearer" (OpenAI, Responses).
	APIKey string `json:"-"`
	// Header holds extra headers sent with every call (e.g. anthropic-beta). Never serialized.
	Header http.Header `json:"-"`
}

// Label names the endpoint in errors and metrics: "format/model".
func (e Endpoint) Label() string { return e.Format.String() + "/" + e.Model }

// same reports whether two endpoints address the same model on the same provider.
func (e Endpoint) same(o Endpoint) bool {
	return e.Format == o.Format && strings.TrimRight(e.BaseURL, "/") == strings.TrimRight(o.BaseURL, "/") && e.Model == o.Model
}

// Thinking is the summarizer's reasoning budget.
type Thinking string

// Thinking levels. ThinkingDefault omits the option so the provider decides.
const (
	ThinkingDefault Thinking = ""
	ThinkingOff     Thinking = "off"
	ThinkingMinimal Thinking = "minimal"
	ThinkingLow     Thinking = "low"
	ThinkingMedium  Thinking = "medium"
	ThinkingHigh    Thinking = "high"
	ThinkingXHigh   Thinking = "xhigh"
)

// anthropicBudget maps a thinking level to Anthropic thinking.budget_tokens (≥ 1024 by the API's
// rule). The table is documented in docs/summarizer.md.
var anthropicBudget = map[Thinking]int64{
	ThinkingMinimal: 1024,
	ThinkingLow:     2048,
	ThinkingMedium:  8192,
	ThinkingHigh:    16384,
	ThinkingXHigh:   32768,
}

// ParseThinking validates a configured thinking level; "" and "default" give ThinkingDefault.
func ParseThinking(s string) (Thinking, error) {
	switch t := Thinking(strings.ToLower(strings.TrimSpace(s))); t {
	case "", "default":
		return ThinkingDefault, nil
	case ThinkingOff, ThinkingMinimal, ThinkingLow, ThinkingMedium, ThinkingHigh, ThinkingXHigh:
		return t, nil
	}
	return "", &Error{Kind: KindInvalid, Msg: fmt.Sprintf("thinking %q: want off|minimal|low|medium|high|xhigh|default", s)}
}

// LLMOptions configures an LLM summarizer.
type LLMOptions struct {
	Endpoint Endpoint
	Thinking Thinking
	// MaxOutputTokens caps the summary text (thinking budget comes on top for Anthropic).
	// Zero means 4096.
	MaxOutputTokens int64
	// IdleTimeout bounds the wait for the response headers and between two stream events
	// (time to first token included). Zero disables it.
	IdleTimeout time.Duration
	// TotalTimeout bounds the whole call. Zero disables it.
	TotalTimeout time.Duration
	// Prices is the price table for cost accounting (cost.Prices.Lookup, longest prefix,
	// falling back to the table's default model); nil means cost.DefaultPrices().
	Prices *cost.Prices
	// Client is the HTTP client; nil means a client with no timeout of its own.
	Client *http.Client
}

// LLM summarizes with one streaming call per request. Safe for concurrent use.
type LLM struct {
	opt LLMOptions
}

// NewLLM validates opt and returns an LLM summarizer.
func NewLLM(opt LLMOptions) (*LLM, error) {
	if opt.Endpoint.Format != wire.Anthropic && !bearer(opt.Endpoint.Format) {
		return nil, &Error{Kind: KindInvalid, Msg: fmt.Sprintf("unknown provider format %q", opt.Endpoint.Format)}
	}
	if opt.Endpoint.Model == "" || opt.Endpoint.BaseURL == "" {
		return nil, &Error{Kind: KindInvalid, Msg: "summarizer endpoint needs a model and a base URL"}
	}
	if _, err := ParseThinking(string(opt.Thinking)); err != nil {
		return nil, err
	}
	if opt.MaxOutputTokens <= 0 {
		opt.MaxOutputTokens = 4096
	}
	if opt.IdleTimeout < 0 || opt.TotalTimeout < 0 {
		return nil, &Error{Kind: KindInvalid, Msg: "negative timeout"}
	}
	if opt.Client == nil {
		opt.Client = &http.Client{}
	}
	if opt.Prices == nil {
		opt.Prices = cost.DefaultPrices()
	}
	return &LLM{opt: opt}, nil
}

// Endpoint returns the model this summarizer calls.
func (l *LLM) Endpoint() Endpoint { return l.opt.Endpoint }

// WithEndpoint returns a summarizer with the same settings calling another endpoint (used for
// the fallback to the session's own model). An empty APIKey inherits this one's when the
// provider matches (Anthropic, or either OpenAI API).
func (l *LLM) WithEndpoint(ep Endpoint) *LLM {
	o := l.opt
	if ep.APIKey == "" && (ep.Format == o.Endpoint.Format || bearer(ep.Format) && bearer(o.Endpoint.Format)) {
		ep.APIKey = o.Endpoint.APIKey
	}
	o.Endpoint = ep
	return &LLM{opt: o}
}

// Body returns the exact JSON request body sent for req (exposed for tests and debugging).
func (l *LLM) Body(req *Request) ([]byte, error) {
	if req == nil || strings.TrimSpace(req.Prompt) == "" {
		return nil, &Error{Kind: KindInvalid, Model: l.opt.Endpoint.Label(), Msg: "empty prompt"}
	}
	switch l.opt.Endpoint.Format {
	case wire.Anthropic:
		return l.anthropicBody(req)
	case wire.Responses:
		return l.responsesBody(req)
	}
	return l.openAIBody(req)
}

// errCause values distinguish our timers from the caller's cancellation.
var (
	causeIdle  = errors.New("idle timeout")
	causeTotal = errors.New("total timeout")
)

// streamResult is what a provider stream parser extracts.
type streamResult struct {
	text       strings.Builder
	stopReason string // normalized: "end", "length", or the raw provider value
	usage      Usage
	streamErr  string // an error event inside the stream
}

// Summarize performs one streaming call. The caller's cancellation returns ctx.Err(); every
// other failure is an *Error.
func (l *LLM) Summarize(ctx context.Context, req *Request) (*Result, error) {
	ep := l.opt.Endpoint
	body, err := l.Body(req)
	if err != nil {
		return nil, err
	}
	if ep.APIKey == "" && ep.Header.Get("Authorization") == "" && ep.Header.Get("x-api-key") == "" {
		return nil, &Error{Kind: KindAuth, Model: ep.Label(), Msg: "no API key configured"}
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if l.opt.TotalTimeout > 0 {
		t := time.AfterFunc(l.opt.TotalTimeout, func() { cancel(causeTotal) })
		defer t.Stop()
	}
	idle := newIdleTimer(l.opt.IdleTimeout, func() { cancel(causeIdle) })
	defer idle.stop()

	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, l.url(), bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Kind: KindInvalid, Model: ep.Label(), Msg: "build request", Err: err}
	}
	l.setHeaders(hreq)
	res, err := l.opt.Client.Do(hreq)
	if err != nil {
		return nil, l.classify(ctx, callCtx, err)
	}
	defer res.Body.Close()
	idle.reset()
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		k := KindTransient
		switch res.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			k = KindAuth
		case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity:
			k = KindRejected
		}
		if e := l.classify(ctx, callCtx, nil); e != nil {
			return nil, e
		}
		return nil, &Error{Kind: k, Model: ep.Label(), Status: res.StatusCode, Msg: providerMessage(msg)}
	}
	var sr streamResult
	switch ep.Format {
	case wire.Anthropic:
		err = readSSE(res.Body, idle.reset, func(event string, data []byte) error { return parseAnthropicEvent(&sr, event, data) })
	case wire.Responses:
		err = readSSE(res.Body, idle.reset, func(event string, data []byte) error { return parseResponsesEvent(&sr, event, data) })
	default:
		err = readSSE(res.Body, idle.reset, func(_ string, data []byte) error { return parseOpenAIChunk(&sr, data) })
	}
	if err != nil {
		return nil, l.classify(ctx, callCtx, err)
	}
	if sr.stopReason == "" || sr.streamErr != "" {
		// Incomplete stream: a timer (or the caller) cutting it short explains it best.
		if e := l.classify(ctx, callCtx, nil); e != nil {
			return nil, e
		}
	}
	if sr.streamErr != "" {
		return nil, &Error{Kind: KindTransient, Model: ep.Label(), Msg: "stream error: " + sr.streamErr}
	}
	if sr.stopReason == "" {
		return nil, &Error{Kind: KindTransient, Model: ep.Label(), Msg: "stream ended without a stop reason"}
	}
	text := sr.text.String()
	if sr.stopReason == "length" {
		return nil, &Error{Kind: KindUnusable, Model: ep.Label(), Msg: "summary cut off at the output token limit"}
	}
	if strings.TrimSpace(text) == "" {
		return nil, &Error{Kind: KindUnusable, Model: ep.Label(), Msg: "empty summary"}
	}
	u := sr.usage
	u.Calls = 1
	p, _ := l.opt.Prices.Lookup(ep.Model)
	u.CostUSD = cost.Usage{Input: u.InputTokens, CacheRead: u.CacheReadTokens, CacheWrite5m: u.CacheCreationTokens, Output: u.OutputTokens}.Cost(p)
	return &Result{Text: text, Usage: u, Model: ep.Label()}, nil
}

// classify maps a transport error (or nil, to check only the timers) to the right outcome:
// the caller's cancellation wins, then our timers, then a transient error.
func (l *LLM) classify(parent, call context.Context, err error) error {
	if parent.Err() != nil {
		return parent.Err()
	}
	label := l.opt.Endpoint.Label()
	switch context.Cause(call) {
	case causeIdle:
		return &Error{Kind: KindIdleTimeout, Model: label, Msg: fmt.Sprintf("stalled (no output for %s)", l.opt.IdleTimeout)}
	case causeTotal:
		return &Error{Kind: KindTotalTimeout, Model: label, Msg: fmt.Sprintf("exceeded %s ceiling", l.opt.TotalTimeout)}
	}
	if err == nil {
		return nil
	}
	var pe *protocolError
	if errors.As(err, &pe) {
		return &Error{Kind: KindTransient, Model: label, Msg: "malformed stream", Err: err}
	}
	return &Error{Kind: KindTransient, Model: label, Err: err}
}

func (l *LLM) url() string {
	base := strings.TrimRight(l.opt.Endpoint.BaseURL, "/")
	switch l.opt.Endpoint.Format {
	case wire.Anthropic:
		return base + "/v1/messages"
	case wire.Responses:
		return base + "/responses"
	}
	return base + "/chat/completions"
}

func (l *LLM) setHeaders(r *http.Request) {
	ep := l.opt.Endpoint
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "text/event-stream")
	if ep.Format == wire.Anthropic {
		r.Header.Set("anthropic-version", "2023-06-01")
		if ep.APIKey != "" {
			r.Header.Set("x-api-key", ep.APIKey)
		}
	} else if ep.APIKey != "" {
		r.Header.Set("Authorization", "Bearer "+ep.APIKey)
	}
	for k, vs := range ep.Header {
		r.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
}

// providerMessage extracts error.message from a provider error body, else returns it trimmed.
func providerMessage(body []byte) string {
	var v struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && v.Error.Message != "" {
		return v.Error.Message
	}
	return strings.TrimSpace(string(body))
}

// protocolError is a malformed stream (bad JSON in a data line).
type protocolError struct{ msg string }

// Error implements error.
func (e *protocolError) Error() string { return e.msg }

// readSSE reads a server-sent-event stream, calling tick on every line received (so keep-alive
// pings and thinking deltas keep the idle timer alive) and fn once per complete event. A
// "[DONE]" data payload ends the stream.
func readSSE(r io.Reader, tick func(), fn func(event string, data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var event string
	var data []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Very long line: accumulate it.
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if len(line) > 0 {
			tick()
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0 && len(line) > 0: // blank line: dispatch
			if len(data) > 0 {
				if bytes.Equal(data, []byte("[DONE]")) {
					return nil
				}
				if e := fn(event, data); e != nil {
					return e
				}
			}
			event, data = "", data[:0]
		case bytes.HasPrefix(trimmed, []byte(":")): // comment
		case bytes.HasPrefix(trimmed, []byte("event:")):
			event = string(bytes.TrimSpace(trimmed[len("event:"):]))
		case bytes.HasPrefix(trimmed, []byte("data:")):
			d := trimmed[len("data:"):]
			if len(d) > 0 && d[0] == ' ' {
				d = d[1:]
			}
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(data) > 0 && !bytes.Equal(data, []byte("[DONE]")) {
					return fn(event, data)
				}
				return nil
			}
			return err
		}
	}
}

// idleTimer fires fn when reset is not called for d. d == 0 disables it.
type idleTimer struct {
	mu sync.Mutex
	d  time.Duration
	t  *time.Timer
}

func newIdleTimer(d time.Duration, fn func()) *idleTimer {
	it := &idleTimer{d: d}
	if d > 0 {
		it.t = time.AfterFunc(d, fn)
	}
	return it
}

func (it *idleTimer) reset() {
	if it.t == nil {
		return
	}
	it.mu.Lock()
	it.t.Reset(it.d)
	it.mu.Unlock()
}

func (it *idleTimer) stop() {
	if it.t != nil {
		it.t.Stop()
	}
}
