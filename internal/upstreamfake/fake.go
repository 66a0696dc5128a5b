// Package upstreamfake is a local stand-in for the LLM providers (Anthropic Messages, OpenAI Chat
// Completions and Responses; SSE or not): it replies from scripted turns, answers 400 where they
// would (a non-JSON body, an unsupported reasoning_effort) and records every request it receives.
package upstreamfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

// Other is the Format of a request to any path but the APIs' (no wire format); it is
// answered with 404 unless a Reply says otherwise.
const Other wire.Format = 0

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

// Recorded is one request the fake received.
type Recorded struct {
	// Seq is the 1-based arrival order.
	Seq int
	// Method is the HTTP method.
	Method string
	// Path is the URL path.
	Path string
	// RawQuery is the URL query string.
	RawQuery string
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the exact request body.
	Body []byte
	// Format is derived from Path: wire.Anthropic for /v1/messages and
	// /v1/messages/count_tokens, wire.OpenAI for /v1/chat/completions, wire.Responses for
	// /v1/responses, Other for any other path.
	Format wire.Format
}

// Stream reports whether the request asked for a streamed response.
func (r Recorded) Stream() bool { return gjson.GetBytes(r.Body, "stream").Bool() }

// HeaderSlept is the response header carrying, in microseconds, the fake's modeled provider time
// from reading the request body to writing the response headers (Reply.Delay plus Latency); the
// fake's own handling runs inside it. Load tests subtract it from end-to-end times.
const HeaderSlept = "Upstreamfake-Slept-Us"

// Latency models a provider's answer time: TTFT before anything is sent, then the reply's output
// tokens at TokensPerSecond. A non-streamed reply is sent after both; a streamed one sends its
// first event after TTFT and its closing events after generation. The zero value adds no delay.
type Latency struct {
	// TTFT is the time to first token.
	TTFT time.Duration
	// TokensPerSecond is the output generation speed (<= 0: generation takes no time).
	TokensPerSecond float64
}

// Generation returns the time to generate n output tokens.
func (l Latency) Generation(n int) time.Duration {
	if l.TokensPerSecond <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / l.TokensPerSecond * float64(time.Second))
}

// Total returns the modeled time of a whole reply with n output tokens.
func (l Latency) Total(n int) time.Duration { return l.TTFT + l.Generation(n) }

// Responder chooses the reply to a request when the script queue is empty.
type Responder func(req Recorded) Reply

// Server is a running fake upstream. Its zero value is not usable; call Start.
type Server struct {
	// URL is the base URL (http://127.0.0.1:port), without a trailing slash.
	URL string

	srv       *httptest.Server
	mu        sync.Mutex
	queue     []Reply
	responder Responder
	reqs      []Recorded
	seq       int
	idn       int
	record    bool
	latency   Latency
	observer  func(Recorded, Timing)
}

// Timing is when the fake handled one request, by this process's clock.
type Timing struct {
	// Received is when the fake had read the whole request body.
	Received time.Time
	// Answered is when the fake had handed its whole response to the server, just before it
	// was flushed to the connection.
	Answered time.Time
}

// Start starts a fake upstream on a free loopback port. The default responder answers
// every request with a short final text reply ("ok").
func Start() *Server {
	s := &Server{record: true}
	s.responder = func(Recorded) Reply { return Reply{Text: "ok"} }
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server and closes its connections.
func (s *Server) Close() { s.srv.Close() }

// SetRecording turns request recording on or off (load tests turn it off to save memory).
func (s *Server) SetRecording(on bool) {
	s.mu.Lock()
	s.record = on
	s.mu.Unlock()
}

// SetLatency sets the response-time model applied to every successful model reply (error,
// Raw and count_tokens replies are not delayed by it; Reply.Delay still applies on top).
func (s *Server) SetLatency(l Latency) {
	s.mu.Lock()
	s.latency = l
	s.mu.Unlock()
}

// SetObserver sets f to be called once per request read, with the request and its timing, after
// the whole response is written and before it is flushed to the client; nil removes it.
func (s *Server) SetObserver(f func(Recorded, Timing)) {
	s.mu.Lock()
	s.observer = f
	s.mu.Unlock()
}

// observe reports a handled request to the observer, if one is set.
func (s *Server) observe(w http.ResponseWriter, rec Recorded, received time.Time) {
	s.mu.Lock()
	f := s.observer
	s.mu.Unlock()
	if f == nil {
		return
	}
	f(rec, Timing{Received: received, Answered: time.Now()}) // before the client can see the end
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// Enqueue appends scripted replies; each request to a model endpoint consumes the next one.
// count_tokens and unknown paths never consume replies.
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	s.queue = append(s.queue, r...)
	s.mu.Unlock()
}

// SetResponder sets the function that answers model requests when the queue is empty.
func (s *Server) SetResponder(f Responder) {
	s.mu.Lock()
	s.responder = f
	s.mu.Unlock()
}

// Requests returns a copy of every recorded request, in arrival order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.reqs...)
}

// Last returns the most recent recorded request and false when there is none.
func (s *Server) Last() (Recorded, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		return Recorded{}, false
	}
	return s.reqs[len(s.reqs)-1], true
}

// Reset forgets recorded requests and scripted replies.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs, s.queue = nil, nil
	s.mu.Unlock()
}

// readAll reads a request body into one buffer sized from Content-Length when it is known
// (io.ReadAll would grow and copy a large body several times).
func readAll(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 || r.ContentLength > 1<<30 {
		return io.ReadAll(r.Body)
	}
	buf := bytes.NewBuffer(make([]byte, 0, r.ContentLength+bytes.MinRead))
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

func formatOf(path string) wire.Format {
	switch {
	case strings.HasSuffix(path, "/v1/messages"), strings.HasSuffix(path, "/v1/messages/count_tokens"):
		return wire.Anthropic
	case strings.HasSuffix(path, "/v1/chat/completions"):
		return wire.OpenAI
	case strings.HasSuffix(path, "/v1/responses"):
		return wire.Responses
	}
	return Other
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := readAll(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	received := time.Now()
	rec := Recorded{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Format: formatOf(r.URL.Path)}
	s.mu.Lock()
	s.seq++
	rec.Seq = s.seq
	if s.record {
		s.reqs = append(s.reqs, rec)
	}
	s.mu.Unlock()
	defer s.observe(w, rec, received)

	if rec.Format == wire.Anthropic && strings.HasSuffix(rec.Path, "/count_tokens") {
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"input_tokens":%d}`, estimateTokens(len(body))))
		return
	}
	if rec.Format == Other || r.Method != http.MethodPost {
		writeJSON(w, http.StatusNotFound, fmt.Sprintf(`{"type":"error","error":{"type":"not_found_error","message":"fake upstream: no route for %s %s"}}`, r.Method, jsonEscape(r.URL.Path)))
		return
	}
	// gjson's validator takes the same grammar as encoding/json's at about three times the
	// speed (TestValidatorMatchesEncodingJSON, FuzzValidatorMatchesEncodingJSON): the fake shares
	// the machine with what it measures, and checks every body it receives.
	if !gjson.ValidBytes(body) {
		s.writeError(w, rec.Format, Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "fake upstream: request body is not valid JSON"})
		return
	}
	if rec.Format == wire.OpenAI {
		if msg, param, code, bad := openAIParamRejection(body); bad {
			writeJSON(w, http.StatusBadRequest, fmt.Sprintf(`{"error":{"message":%s,"type":"invalid_request_error","param":%s,"code":%s}}`,
				jsonString(msg), jsonString(param), jsonString(code)))
			return
		}
	}

	s.mu.Lock()
	var rep Reply
	if len(s.queue) > 0 {
		rep = s.queue[0]
		s.queue = s.queue[1:]
	} else {
		rep = s.responder(rec)
	}
	lat := s.latency
	s.mu.Unlock()

	modeled := rep.Raw == nil && rep.Status < 400
	if !modeled {
		lat = Latency{}
	}
	stream := rec.Stream()
	if modeled {
		s.fillIDs(&rep)
		fillUsage(&rep, len(body))
	}
	gen := lat.Generation(rep.Usage.OutputTokens)
	wait := rep.Delay + lat.TTFT
	if !stream {
		wait += gen
		gen = 0
	}
	if wait > 0 {
		timer := time.NewTimer(time.Until(received.Add(wait)))
		select {
		case <-timer.C:
		case <-r.Context().Done(): // the client gave up waiting
			timer.Stop()
			return
		}
		w.Header().Set(HeaderSlept, strconv.FormatInt(time.Since(received).Microseconds(), 10))
	}
	for k, vs := range rep.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if rep.Cut > 0 {
		w = &cutWriter{ResponseWriter: w, left: rep.Cut}
	}
	if rep.Stall > 0 {
		w = &cutWriter{ResponseWriter: w, left: rep.Stall, stall: r.Context().Done()}
	}
	switch {
	case rep.Raw != nil:
		ct := rep.ContentType
		if ct == "" {
			ct = "application/json"
		}
		st := rep.Status
		if st == 0 {
			st = 200
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(st)
		_, _ = w.Write(rep.Raw)
	case rep.Status >= 400:
		s.writeError(w, rec.Format, rep)
	default:
		model := gjson.GetBytes(body, "model").String()
		switch {
		case rec.Format == wire.Anthropic && stream:
			s.streamAnthropic(w, model, rep, gen)
		case rec.Format == wire.Anthropic:
			writeJSON(w, 200, string(AnthropicMessage(s.nextID("msg_"), model, rep)))
		case rec.Format == wire.Responses && stream:
			s.streamResponses(w, model, rep, gen)
		case rec.Format == wire.Responses:
			writeJSON(w, 200, string(s.ResponsesBody(s.nextID("resp_"), model, rep)))
		case stream:
			s.streamOpenAI(w, model, rep, gen, gjson.GetBytes(body, "stream_options.include_usage").Bool())
		default:
			writeJSON(w, 200, string(OpenAICompletion(s.nextID("chatcmpl-"), model, rep)))
		}
	}
}

// openAIParamRejection reports the 400 Chat Completions answers for a reasoning_effort the model
// does not take: gpt-3.5, gpt-4*, chatgpt-* and gpt-5-chat* reject the parameter, the o-series
// and gpt-5 before gpt-5.1 reject "none"; other names accept every value.
func openAIParamRejection(body []byte) (msg, param, code string, bad bool) {
	effort := gjson.GetBytes(body, "reasoning_effort")
	if !effort.Exists() {
		return "", "", "", false
	}
	model := gjson.GetBytes(body, "model").String()
	has := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(model, p) {
				return true
			}
		}
		return false
	}
	switch {
	case has("gpt-3.5", "gpt-4", "chatgpt-", "gpt-5-chat"):
		return "Unsupported parameter: 'reasoning_effort' is not supported with this model.", "reasoning_effort", "unsupported_parameter", true
	case effort.String() == "none" && has("o1", "o3", "o4", "gpt-5") && !has("gpt-5."):
		return "Unsupported value: 'reasoning_effort' does not support 'none' with this model. Supported values are: 'minimal', 'low', 'medium', and 'high'.",
			"reasoning_effort", "unsupported_value", true
	}
	return "", "", "", false
}

// cutWriter passes on the first left bytes of a response body, then flushes them and drops
// the connection (Reply.Cut) — with stall set, only once stall is closed (Reply.Stall).
type cutWriter struct {
	http.ResponseWriter
	left  int
	stall <-chan struct{}
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if len(p) < c.left {
		c.left -= len(p)
		return c.ResponseWriter.Write(p)
	}
	_, _ = c.ResponseWriter.Write(p[:c.left])
	c.Flush()
	if c.stall != nil {
		<-c.stall
	}
	panic(http.ErrAbortHandler) // net/http closes the connection without the response's end
}

// Flush sends what was written so far.
func (c *cutWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	s.idn++
	n := s.idn
	s.mu.Unlock()
	return fmt.Sprintf("%sfake%06d", prefix, n)
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

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (s *Server) writeError(w http.ResponseWriter, f wire.Format, rep Reply) {
	typ := rep.ErrorType
	if typ == "" {
		typ = "api_error"
	}
	if f == wire.OpenAI || f == wire.Responses {
		writeJSON(w, rep.Status, fmt.Sprintf(`{"error":{"message":%s,"type":%s,"param":null,"code":null}}`, jsonString(rep.ErrorMessage), jsonString(typ)))
		return
	}
	writeJSON(w, rep.Status, fmt.Sprintf(`{"type":"error","error":{"type":%s,"message":%s},"request_id":%s}`, jsonString(typ), jsonString(rep.ErrorMessage), jsonString(s.nextID("req_"))))
}

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

// anthropicStop returns the Anthropic stop_reason of a reply.
func anthropicStop(rep Reply) string { return stopReason(rep, "tool_use", "end_turn") }

// finishReason returns the OpenAI finish_reason of a reply.
func finishReason(rep Reply) string { return stopReason(rep, "tool_calls", "stop") }

// AnthropicMessage renders a Reply as a non-streaming Messages API response body.
func AnthropicMessage(id, model string, rep Reply) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%s,"type":"message","role":"assistant","model":%s,"content":[`, jsonString(id), jsonString(model))
	n := 0
	sep := func() {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
	}
	if rep.Thinking != "" {
		sep()
		fmt.Fprintf(&b, `{"type":"thinking","thinking":%s,"signature":%s}`, jsonString(rep.Thinking), jsonString(signature(rep.Thinking)))
	}
	if rep.Text != "" {
		sep()
		fmt.Fprintf(&b, `{"type":"text","text":%s}`, jsonString(rep.Text))
	}
	for _, c := range rep.ToolCalls {
		sep()
		fmt.Fprintf(&b, `{"type":"tool_use","id":%s,"name":%s,"input":%s}`, jsonString(c.ID), jsonString(c.Name), c.Input)
	}
	fmt.Fprintf(&b, `],"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d}}`,
		anthropicStop(rep), rep.Usage.InputTokens, rep.Usage.CacheCreationTokens, rep.Usage.CacheReadTokens, rep.Usage.OutputTokens)
	return b.Bytes()
}

func signature(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("fakesig%016x", h.Sum64())
}

// OpenAICompletion renders a Reply as a non-streaming Chat Completions response body.
func OpenAICompletion(id, model string, rep Reply) []byte {
	var b bytes.Buffer
	content := "null"
	if rep.Text != "" {
		content = jsonString(rep.Text)
	}
	fmt.Fprintf(&b, `{"id":%s,"object":"chat.completion","created":%d,"model":%s,"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null`,
		jsonString(id), time.Now().Unix(), jsonString(model), content)
	finish := finishReason(rep)
	if len(rep.ToolCalls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, c := range rep.ToolCalls {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`, jsonString(c.ID), jsonString(c.Name), jsonString(c.Input))
		}
		b.WriteByte(']')
	}
	fmt.Fprintf(&b, `},"logprobs":null,"finish_reason":%q}],"usage":%s}`, finish, openAIUsage(rep.Usage))
	return b.Bytes()
}

func openAIUsage(u Usage) string {
	prompt := u.InputTokens + u.CacheReadTokens
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		prompt, u.OutputTokens, prompt+u.OutputTokens, u.CacheReadTokens)
}

// sse writes events and flushes after each one.
type sse struct {
	w     http.ResponseWriter
	f     http.Flusher
	delay time.Duration
	hold  <-chan struct{}
}

func newSSE(w http.ResponseWriter, rep Reply) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f, delay: rep.ChunkDelay, hold: rep.Hold}
}

func (s *sse) event(name, data string) {
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.f != nil {
		s.f.Flush()
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if s.hold != nil {
		<-s.hold
		s.hold = nil
	}
}

// chunks splits s into up to three pieces so deltas are really incremental.
func chunks(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	a, b := len(s)/3, 2*len(s)/3
	// keep UTF-8 sequences whole
	for a > 0 && s[a]&0xC0 == 0x80 {
		a--
	}
	for b > a && s[b]&0xC0 == 0x80 {
		b--
	}
	out := []string{}
	for _, p := range []string{s[:a], s[a:b], s[b:]} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *Server) streamAnthropic(w http.ResponseWriter, model string, rep Reply, gen time.Duration) {
	e := newSSE(w, rep)
	e.event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%s,"type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`,
		jsonString(s.nextID("msg_")), jsonString(model), rep.Usage.InputTokens, rep.Usage.CacheCreationTokens, rep.Usage.CacheReadTokens))
	idx := 0
	if rep.Thinking != "" {
		e.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, idx))
		for _, p := range chunks(rep.Thinking) {
			e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, idx, jsonString(p)))
		}
		e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%s}}`, idx, jsonString(signature(rep.Thinking))))
		e.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx))
		idx++
	}
	e.event("ping", `{"type": "ping"}`)
	if rep.Text != "" {
		e.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, idx))
		for _, p := range chunks(rep.Text) {
			e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, idx, jsonString(p)))
		}
		e.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx))
		idx++
	}
	for _, c := range rep.ToolCalls {
		e.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`, idx, jsonString(c.ID), jsonString(c.Name)))
		for _, p := range chunks(c.Input) {
			e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, idx, jsonString(p)))
		}
		e.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx))
		idx++
	}
	time.Sleep(gen)
	e.event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, anthropicStop(rep), rep.Usage.OutputTokens))
	e.event("message_stop", `{"type":"message_stop"}`)
}

func (s *Server) streamOpenAI(w http.ResponseWriter, model string, rep Reply, gen time.Duration, includeUsage bool) {
	e := newSSE(w, rep)
	id := s.nextID("chatcmpl-")
	created := time.Now().Unix()
	head := fmt.Sprintf(`{"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":[`, jsonString(id), created, jsonString(model))
	tail := `]}`
	if includeUsage {
		tail = `],"usage":null}`
	}
	e.event("", head+`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`+tail)
	for _, p := range chunks(rep.Text) {
		if p == "" {
			continue
		}
		e.event("", head+fmt.Sprintf(`{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null}`, jsonString(p))+tail)
	}
	for i, c := range rep.ToolCalls {
		e.event("", head+fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]},"logprobs":null,"finish_reason":null}`, i, jsonString(c.ID), jsonString(c.Name))+tail)
		for _, p := range chunks(c.Input) {
			e.event("", head+fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null}`, i, jsonString(p))+tail)
		}
	}
	time.Sleep(gen)
	e.event("", head+fmt.Sprintf(`{"index":0,"delta":{},"logprobs":null,"finish_reason":%q}`, finishReason(rep))+tail)
	if includeUsage {
		e.event("", head+`],"usage":`+openAIUsage(rep.Usage)+`}`)
	}
	e.event("", "[DONE]")
}
