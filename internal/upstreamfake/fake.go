// Package upstreamfake is a local stand-in for the LLM providers (Anthropic Messages, OpenAI Chat
// Completions and Responses; SSE or not): it replies from scripted turns, answers 400 where they
// would (a non-JSON body, an unsupported reasoning_effort) and records every request it receives.
package upstreamfake

import (
	"bytes"
	"encoding/json"
	"fmt"
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

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	s.idn++
	n := s.idn
	s.mu.Unlock()
	return fmt.Sprintf("%sfake%06d", prefix, n)
}

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
