package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// usage is provider-reported token usage.
type usage struct{ input, output, cacheRead, cacheCreation int }

func (u *usage) add(o usage) {
	u.input += o.input
	u.output += o.output
	u.cacheRead += o.cacheRead
	u.cacheCreation += o.cacheCreation
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

func jsonStr(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// answer answers context_tree_query calls from the session state. cont are the messages
// that carry the results in a continuation request; results are the same results in the
// stored splice form (Anthropic tool_result blocks, OpenAI tool messages).
func (s *Server) answer(ctx context.Context, t *turn, calls []call) (cont, results []json.RawMessage) {
	for _, c := range calls {
		text := s.queryText(ctx, t, c.input)
		if t.f == wire.OpenAI {
			m, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.id, "content": text})
			results = append(results, m)
		} else {
			b, _ := json.Marshal(map[string]string{"type": "tool_result", "tool_use_id": c.id, "content": text})
			results = append(results, b)
		}
	}
	if t.f == wire.OpenAI {
		return results, results
	}
	return []json.RawMessage{joinRaw(`{"role":"user","content":[`, results, `]}`)}, results
}

// queryText answers one context_tree_query input.
func (s *Server) queryText(ctx context.Context, t *turn, input []byte) string {
	ids, err := pruner.ParseQueryInput(input)
	if err != nil {
		return "context_tree_query: " + err.Error()
	}
	if t.state == nil {
		return "context_tree_query: the pruning state of this session is unavailable right now; retry later."
	}
	lookup := func(key string) ([]byte, bool) {
		c, cancel := s.storeCtx(ctx)
		defer cancel()
		b, err := s.opt.Store.GetBlob(c, t.sid, key)
		return b, err == nil
	}
	return pruner.QueryAll(t.state, ids, lookup)
}

// continuation is a recovery round's continuation upstream: the response (200, of the wanted
// kind), the request that was sent and the messages it appended.
type continuation struct {
	resp     *http.Response
	next     *wire.Request
	appended []json.RawMessage
}

// contFailure is a recovery continuation the provider did not answer: its error response
// (resp: status, headers and unread body, as it came), or err when none came (unreachable,
// no headers in time, a response of another kind than the client's).
type contFailure struct {
	resp *http.Response
	err  error
}

// continueWith sends a continuation of the forwarded request with msgs appended. It returns
// nil, nil when it cannot be built (the caller then defers the queries), and a failure when
// the provider did not answer it: the client then gets that error, never the previous
// rounds' answer with the queries deferred, which may leave it an empty message.
func (s *Server) continueWith(ctx context.Context, t *turn, msgs []json.RawMessage, wantStream bool) (*continuation, *contFailure) {
	extra, err := parseMessages(t.f, msgs)
	if err != nil {
		t.log.Warn("building the recovery continuation failed", "err", err)
		return nil, nil
	}
	next := t.fwd.WithMessages(append(append([]*wire.Message(nil), t.fwd.Messages...), extra...))
	resp, err := s.send(ctx, t, next.Segments())
	if err != nil {
		return nil, s.continuationFailed(t, &contFailure{err: err})
	}
	if resp.StatusCode != http.StatusOK {
		return nil, s.continuationFailed(t, &contFailure{resp: resp})
	}
	if isStream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"); isStream != wantStream {
		resp.Body.Close()
		return nil, s.continuationFailed(t, &contFailure{err: fmt.Errorf("the provider answered the recovery continuation with %q", resp.Header.Get("Content-Type"))})
	}
	s.met.Recoveries.WithLabelValues("answered").Inc()
	return &continuation{resp: resp, next: next, appended: msgs}, nil
}

// continuationFailed counts and logs a failed recovery continuation and returns it.
func (s *Server) continuationFailed(t *turn, f *contFailure) *contFailure {
	s.met.Recoveries.WithLabelValues("failed").Inc()
	if f.resp != nil {
		t.log.Warn("the provider refused the recovery continuation; relaying its error", "status", f.resp.StatusCode)
	} else {
		s.countLimit(t.ep, f.err)
		t.log.Warn("the recovery continuation failed; failing the request", "err", f.err)
	}
	return f
}

// writeJSONFailure answers a non-streamed request with a failed continuation: the provider's
// error as it came, or a 502.
func (s *Server) writeJSONFailure(ctx context.Context, w http.ResponseWriter, t *turn, f *contFailure) {
	if f.resp == nil {
		s.upstreamFailed(w, t.f, t.log, t.ep, f.err)
		return
	}
	defer f.resp.Body.Close()
	if err := relayRaw(w, f.resp); err != nil {
		s.abortBroken(ctx, w, t.log, t.ep, nil, err)
	}
}

// abortStreamFailure ends a stream whose continuation failed: an Anthropic stream gets an
// error event (the provider's own error when it sent one), then the client's connection is
// aborted, so the client sees an error, not a cleanly ended answer. It does not return.
func (s *Server) abortStreamFailure(ctx context.Context, e emitter, t *turn, f *contFailure) {
	var event []byte
	if t.f == wire.Anthropic {
		var body []byte
		if f.resp != nil {
			body, _ = readAllMax(f.resp.Body, 1<<20)
			if v := gjson.ParseBytes(body); v.Get("type").Str != "error" || !v.Get("error.type").Exists() {
				body = ErrorBody(wire.Anthropic, f.resp.StatusCode, "", "condense proxy: the provider refused the recovery continuation: "+http.StatusText(f.resp.StatusCode))
			}
		} else {
			body = ErrorBody(wire.Anthropic, http.StatusBadGateway, "", "condense proxy: the recovery continuation failed: "+f.err.Error())
		}
		event = encodeEvent("error", body)
	}
	if f.resp != nil {
		f.resp.Body.Close()
	}
	abortResponse(ctx, e.w, event)
}

// continueRecovery answers a round's context_tree_query calls in the proxy and continues
// upstream with the round's assistant message and the answers appended. It returns nil, nil
// when the round may not continue (mixed with the client's own calls, not a tool stop, out of
// rounds; the caller then defers the queries), and a failure when the provider did not answer
// the continuation.
func (s *Server) continueRecovery(ctx context.Context, t *turn, round int, asst json.RawMessage, query, client []call, toolStop, wantStream bool) (*continuation, *contFailure) {
	if !s.canContinue(round, query, client, toolStop) {
		return nil, nil
	}
	cont, _ := s.answer(ctx, t, query)
	return s.continueWith(ctx, t, append([]json.RawMessage{asst}, cont...), wantStream)
}

// canContinue reports whether a round's queries may be answered in the proxy.
func (s *Server) canContinue(rounds int, query, client []call, toolStop bool) bool {
	return len(query) > 0 && len(client) == 0 && toolStop && rounds <= s.opt.MaxRecoveryRounds
}

// ---- non-streaming -------------------------------------------------------------------

type jsonRound struct {
	data    []byte
	asst    json.RawMessage
	vasst   json.RawMessage // asst without the query calls
	calls   []call
	visible []json.RawMessage // Anthropic: visible content blocks
	text    string            // OpenAI: content text
	stop    string
	u       usage
}

func parseJSONRound(f wire.Format, data []byte) (*jsonRound, error) {
	if !gjson.ValidBytes(data) {
		return nil, errors.New("response is not JSON")
	}
	r := &jsonRound{data: data}
	root := gjson.ParseBytes(data)
	if f == wire.Anthropic {
		content := root.Get("content")
		if !content.IsArray() {
			return nil, errors.New("no content array")
		}
		var all []string
		content.ForEach(func(_, b gjson.Result) bool {
			all = append(all, b.Raw)
			if b.Get("type").Str == "tool_use" {
				c := call{id: b.Get("id").Str, name: b.Get("name").Str, input: []byte(b.Get("input").Raw)}
				r.calls = append(r.calls, c)
				if c.isQuery() {
					return true
				}
			}
			r.visible = append(r.visible, json.RawMessage(b.Raw))
			return true
		})
		r.asst = json.RawMessage(`{"role":"assistant","content":[` + strings.Join(all, ",") + `]}`)
		r.vasst = anthropicAssistant(r.visible)
		r.stop = root.Get("stop_reason").Str
		r.u = anthropicUsage(root.Get("usage"))
		return r, nil
	}
	msg := root.Get("choices.0.message")
	if !msg.IsObject() {
		return nil, errors.New("no choices[0].message")
	}
	r.text = msg.Get("content").Str
	var tcs, vtcs []string
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		c := call{id: tc.Get("id").Str, name: tc.Get("function.name").Str, input: []byte(tc.Get("function.arguments").Str)}
		r.calls = append(r.calls, c)
		tcs = append(tcs, tc.Raw)
		if !c.isQuery() {
			vtcs = append(vtcs, tc.Raw)
		}
		return true
	})
	r.asst = openAIAssistant(r.text, tcs)
	r.vasst = openAIAssistant(r.text, vtcs)
	r.stop = root.Get("choices.0.finish_reason").Str
	r.u = openAIUsage(root.Get("usage"))
	return r, nil
}

// anthropicAssistant returns an Anthropic assistant message of content blocks.
func anthropicAssistant(blocks []json.RawMessage) json.RawMessage {
	return joinRaw(`{"role":"assistant","content":[`, blocks, `]}`)
}

func openAIAssistant(text string, toolCalls []string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"role":"assistant","content":`)
	if text == "" {
		b.WriteString("null")
	} else {
		b.Write(jsonStr(text))
	}
	if len(toolCalls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		b.WriteString(strings.Join(toolCalls, ","))
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.Bytes()
}

func toolStop(f wire.Format, stop string) bool {
	if f == wire.OpenAI {
		return stop == "tool_calls"
	}
	return stop == "tool_use"
}

// endTurn reports whether stop ends the model's turn normally (Anthropic end_turn or
// stop_sequence, OpenAI stop); an answer cut off (max_tokens, length), a refusal or a
// content filter stop is never a final answer.
func endTurn(f wire.Format, stop string) bool {
	if f == wire.OpenAI {
		return stop == "stop"
	}
	return stop == "end_turn" || stop == "stop_sequence"
}

// settle decides what becomes of the query calls of a response's last round (one that did
// not continue upstream), whose model message is asst, or visible without the query calls.
// After a tool stop the calls are deferred: answered now and stored with the splice, asst
// with them. After any other stop (max_tokens, length: the answer was cut off, the calls
// perhaps with it) they are dropped unanswered, and the round's message is visible. It
// returns the deferred calls and the round's message to store.
func (s *Server) settle(f wire.Format, stop string, query []call, asst, visible json.RawMessage) ([]call, json.RawMessage) {
	if len(query) == 0 || toolStop(f, stop) {
		return query, asst
	}
	s.met.Recoveries.WithLabelValues("dropped").Inc()
	return nil, visible
}

// hiddenOnlyText is the text of an assistant message that would otherwise be empty because the
// proxy hid the context_tree_query calls that were all the model sent: an empty assistant
// message is invalid for the provider when a client sends it back.
const hiddenOnlyText = "[condense: the model only asked to retrieve pruned context]"

// hiddenOnlyBlock is hiddenOnlyText as an Anthropic text block.
var hiddenOnlyBlock = json.RawMessage(`{"type":"text","text":` + string(jsonStr(hiddenOnlyText)) + `}`)

// nonEmpty returns an assistant message the proxy builds (to store or to show) with
// hiddenOnlyText as its content when it has none: no content blocks (Anthropic), no text and
// no tool calls (OpenAI).
func nonEmpty(f wire.Format, msg json.RawMessage) json.RawMessage {
	m := gjson.ParseBytes(msg)
	if f == wire.Anthropic {
		if len(m.Get("content").Array()) == 0 {
			return anthropicAssistant([]json.RawMessage{hiddenOnlyBlock})
		}
		return msg
	}
	if m.Get("content").Str == "" && len(m.Get("tool_calls").Array()) == 0 {
		return openAIAssistant(hiddenOnlyText, nil)
	}
	return msg
}

func (s *Server) relayJSON(ctx context.Context, w http.ResponseWriter, t *turn, resp *http.Response) *outcome {
	out := &outcome{}
	hdr := resp.Header.Clone()
	data, err := readAllMax(resp.Body, s.opt.MaxResponseBytes)
	eof := time.Now()
	if err != nil {
		s.readFailed(ctx, w, t, err)
		return out
	}
	if manyChoices(t) { // relayed untouched; choice 0 is the session's answer
		if r, err := parseJSONRound(t.f, data); err == nil {
			out.usage, out.final = r.u, len(r.calls) == 0 && endTurn(t.f, r.stop)
			out.viewTail = []json.RawMessage{r.asst}
			s.onFinal(t, out)
		}
		s.writeJSON(w, hdr, data, eof)
		return out
	}
	var rounds []*jsonRound
	var replace []json.RawMessage
	for {
		r, err := parseJSONRound(t.f, data)
		if err != nil && len(rounds) == 0 { // not a shape we know: relay untouched
			s.writeJSON(w, hdr, data, eof)
			return out
		}
		if err != nil {
			s.writeJSONFailure(ctx, w, t, s.continuationFailed(t, &contFailure{err: fmt.Errorf("the provider's answer to the recovery continuation: %w", err)}))
			return out
		}
		rounds = append(rounds, r)
		out.usage.add(r.u)
		query, client := splitCalls(r.calls)
		c, fail := s.continueRecovery(ctx, t, len(rounds), r.asst, query, client, toolStop(t.f, r.stop), false)
		if fail != nil {
			s.writeJSONFailure(ctx, w, t, fail)
			return out
		}
		if c == nil {
			break
		}
		data, err = readAllMax(c.resp.Body, s.opt.MaxResponseBytes)
		eof = time.Now()
		c.resp.Body.Close()
		if err != nil {
			s.readFailed(ctx, w, t, err)
			return out
		}
		replace = append(replace, c.appended...)
		t.fwd = c.next
	}
	last := rounds[len(rounds)-1]
	query, lastClient := splitCalls(last.calls)
	deferred, lastAsst := s.settle(t.f, last.stop, query, last.asst, last.vasst)
	lastAsst = nonEmpty(t.f, lastAsst)
	hid := len(rounds) > 1 || len(query) > 0
	var results []json.RawMessage
	if len(deferred) > 0 {
		s.met.Recoveries.WithLabelValues("deferred").Inc()
		_, results = s.answer(ctx, t, deferred)
	}
	replace = append(replace, lastAsst)

	var dg digester
	var body []byte
	var visibleMsg json.RawMessage
	stop := last.stop
	if len(deferred) > 0 && len(lastClient) == 0 {
		stop = map[wire.Format]string{wire.Anthropic: "end_turn", wire.OpenAI: "stop"}[t.f]
	}
	if t.f == wire.Anthropic {
		var vis []string
		for _, r := range rounds {
			for _, b := range r.visible {
				vis = append(vis, string(b))
				v := gjson.ParseBytes(b)
				switch v.Get("type").Str {
				case "text":
					dg.text(v.Get("text").Str)
				case "tool_use":
					dg.call(v.Get("id").Str)
				}
			}
		}
		if len(vis) == 0 && hid {
			vis = append(vis, string(hiddenOnlyBlock))
			dg.text(hiddenOnlyText)
		}
		content := "[" + strings.Join(vis, ",") + "]"
		body, _ = sjson.SetRawBytes(last.data, "content", []byte(content))
		body, _ = sjson.SetBytes(body, "stop_reason", stop)
		if len(rounds) > 1 {
			body = setAnthropicUsage(body, "usage", out.usage)
		}
		visibleMsg = json.RawMessage(`{"role":"assistant","content":` + content + `}`)
	} else {
		var texts []string
		for _, r := range rounds {
			if r.text != "" {
				texts = append(texts, r.text)
			}
		}
		text := strings.Join(texts, "\n\n")
		var tcs []string
		gjson.GetBytes(last.data, "choices.0.message.tool_calls").ForEach(func(_, tc gjson.Result) bool {
			if tc.Get("function.name").Str != pruner.QueryToolName {
				tcs = append(tcs, tc.Raw)
			}
			return true
		})
		if text == "" && len(tcs) == 0 && hid {
			text = hiddenOnlyText
		}
		dg.text(text)
		for _, tc := range tcs {
			dg.call(gjson.Get(tc, "id").Str)
		}
		body = last.data
		if text != last.text {
			body, _ = sjson.SetBytes(body, "choices.0.message.content", text)
		}
		if len(tcs) != len(last.calls) {
			if len(tcs) == 0 {
				body, _ = sjson.DeleteBytes(body, "choices.0.message.tool_calls")
			} else {
				body, _ = sjson.SetRawBytes(body, "choices.0.message.tool_calls", []byte("["+strings.Join(tcs, ",")+"]"))
			}
		}
		body, _ = sjson.SetBytes(body, "choices.0.finish_reason", stop)
		if len(rounds) > 1 {
			body = setOpenAIUsage(body, "usage", out.usage)
		}
		visibleMsg = openAIAssistant(text, tcs)
	}
	if len(rounds) > 1 || len(deferred) > 0 {
		out.splice = &splice{At: len(t.client.Messages), Digest: dg.sum(), Replace: replace, Results: results}
	} else if len(query) == 0 {
		body = data // nothing hidden: the provider's bytes as they came
	}
	out.final = len(lastClient) == 0 && endTurn(t.f, stop)
	if out.splice != nil && len(deferred) == 0 {
		out.viewTail = replace
	} else {
		out.viewTail = []json.RawMessage{visibleMsg}
	}
	if out.splice != nil {
		s.persistSplice(ctx, t, out.splice)
	}
	s.onFinal(t, out)
	s.writeJSON(w, hdr, body, eof)
	return out
}

// readFailed answers a JSON request whose provider response could not be read whole (it
// broke off, stalled past UpstreamIdleTimeout or exceeded MaxResponseBytes): a 502 in the
// provider's error shape, counted and logged.
func (s *Server) readFailed(ctx context.Context, w http.ResponseWriter, t *turn, err error) {
	if ctx.Err() == nil {
		s.met.UpstreamBroken.WithLabelValues(string(t.ep)).Inc()
		s.countLimit(t.ep, err)
		t.log.Warn("the provider's response could not be read whole", "err", err)
	}
	writeError(w, t.f, http.StatusBadGateway, "upstream_read_failed", "condense proxy: reading upstream response: "+err.Error())
}

// writeJSON writes a 200 JSON response: the provider's headers hdr and body, then finishes
// it (the client has the whole response then, not after the request's bookkeeping).
func (s *Server) writeJSON(w http.ResponseWriter, hdr http.Header, body []byte, eof time.Time) {
	copyResponseHeaders(w.Header(), hdr)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	s.finished(w, eof)
}

// finished flushes what the handler wrote and records the proxy's own time since eof, when
// it had read the provider's last byte (condense_response_finish_seconds).
func (s *Server) finished(w http.ResponseWriter, eof time.Time) {
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	s.met.FinishSeconds.Observe(time.Since(eof).Seconds())
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

// ---- streaming -----------------------------------------------------------------------

// sseEvent is one server-sent event: its exact bytes, its name and its data.
type sseEvent struct {
	raw  []byte
	name string
	data []byte
}

// readEvent reads one event (up to and including its blank line) of at most max bytes
// (an *upstreamLimit past that).
func readEvent(br *bufio.Reader, max int) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := readLine(br, max-len(ev.raw))
		if errors.Is(err, errLineTooLong) {
			return ev, &upstreamLimit{limitEventSize, max}
		}
		ev.raw = append(ev.raw, line...)
		trim := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trim) == 0 && len(line) > 0:
			if len(ev.raw) > len(line) {
				return ev, nil
			}
			ev.raw = ev.raw[:0] // stray blank line
		case bytes.HasPrefix(trim, []byte("event:")):
			ev.name = string(bytes.TrimSpace(trim[6:]))
		case bytes.HasPrefix(trim, []byte("data:")):
			d := trim[5:]
			if len(d) > 0 && d[0] == ' ' {
				d = d[1:]
			}
			if ev.data != nil {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, d...)
		}
		if err != nil {
			return ev, err
		}
	}
}

func encodeEvent(name string, data []byte) []byte {
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: ")
		b.WriteString(name)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

type emitter struct {
	w  http.ResponseWriter
	fl http.Flusher
}

// readEvent reads the next event of a relayed stream. When reading the provider's body fails
// before its end it aborts the client's response (abortBroken; an Anthropic stream first
// gets an error event), closing body; a partial last event is not relayed then.
func (s *Server) readEvent(ctx context.Context, e emitter, t *turn, br *bufio.Reader, body io.Closer) (sseEvent, error) {
	ev, err := readEvent(br, int(s.opt.MaxResponseBytes))
	if err == nil || errors.Is(err, io.EOF) {
		return ev, err
	}
	body.Close()
	var event []byte
	if t.f == wire.Anthropic {
		msg := "condense proxy: the provider's response broke off: "
		var ul *upstreamLimit
		if errors.As(err, &ul) {
			msg = "condense proxy: "
		}
		event = encodeEvent("error", ErrorBody(wire.Anthropic, http.StatusBadGateway, "", msg+err.Error()))
	}
	s.abortBroken(ctx, e.w, t.log, t.ep, event, err)
	return ev, err
}

func (e emitter) emit(b []byte) {
	_, _ = e.w.Write(b)
	if e.fl != nil {
		e.fl.Flush()
	}
}

func (s *Server) relayStream(ctx context.Context, w http.ResponseWriter, t *turn, resp *http.Response) *outcome {
	copyResponseHeaders(w.Header(), resp.Header)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	e := emitter{w: w, fl: fl}
	if manyChoices(t) {
		return s.streamOpenAIChoices(ctx, e, t, resp)
	}
	if t.f == wire.OpenAI {
		return s.streamOpenAI(ctx, e, t, resp)
	}
	return s.streamAnthropic(ctx, e, t, resp)
}

// manyChoices reports whether the request asks for several choices (OpenAI n > 1). Their
// response is relayed untouched: the proxy hides and answers nothing in it, and choice 0 is
// the answer the session's transcript continues with.
func manyChoices(t *turn) bool {
	n, ok := t.client.Field("n")
	return ok && t.f == wire.OpenAI && gjson.ParseBytes(n).Int() > 1
}

// blockAcc accumulates one streamed Anthropic content block.
type blockAcc struct {
	start                   gjson.Result
	text, thinking, sig, in strings.Builder
	hasInput                bool
	held                    bool
	client                  int
}

func (a *blockAcc) delta(d gjson.Result) {
	switch d.Get("type").Str {
	case "text_delta":
		a.text.WriteString(d.Get("text").Str)
	case "thinking_delta":
		a.thinking.WriteString(d.Get("thinking").Str)
	case "signature_delta":
		a.sig.WriteString(d.Get("signature").Str)
	case "input_json_delta":
		a.hasInput = true
		a.in.WriteString(d.Get("partial_json").Str)
	}
}

func (a *blockAcc) final() []byte {
	b := []byte(a.start.Raw)
	switch a.start.Get("type").Str {
	case "text":
		b, _ = sjson.SetBytes(b, "text", a.start.Get("text").Str+a.text.String())
	case "thinking":
		b, _ = sjson.SetBytes(b, "thinking", a.start.Get("thinking").Str+a.thinking.String())
		b, _ = sjson.SetBytes(b, "signature", a.start.Get("signature").Str+a.sig.String())
	}
	if a.hasInput {
		in := strings.TrimSpace(a.in.String())
		if in == "" || !gjson.Valid(in) {
			in = "{}"
		}
		b, _ = sjson.SetRawBytes(b, "input", []byte(in))
	}
	return b
}

type anthropicRound struct {
	blocks    map[int64]*blockAcc
	order     []int64
	stop      string
	deltaData []byte
	deltaRaw  []byte
	stopRaw   []byte
	u         usage
}

func (s *Server) streamAnthropic(ctx context.Context, e emitter, t *turn, resp *http.Response) *outcome {
	out := &outcome{}
	var replace []json.RawMessage
	var visible []string
	var dg digester
	clientIdx := 0
	var last *anthropicRound
	for round := 1; ; round++ {
		r := &anthropicRound{blocks: map[int64]*blockAcc{}}
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			ev, err := s.readEvent(ctx, e, t, br, resp.Body)
			if len(ev.raw) > 0 && len(ev.data) == 0 {
				e.emit(ev.raw) // comments, retry hints: as they came
			}
			if len(ev.raw) > 0 && len(ev.data) > 0 {
				d := gjson.ParseBytes(ev.data)
				switch d.Get("type").Str {
				case "message_start":
					r.u = anthropicUsage(d.Get("message.usage"))
					r.u.output = 0
					if round == 1 {
						e.emit(ev.raw)
					}
				case "content_block_start":
					idx := d.Get("index").Int()
					a := &blockAcc{start: d.Get("content_block")}
					r.blocks[idx] = a
					r.order = append(r.order, idx)
					if a.start.Get("type").Str == "tool_use" && a.start.Get("name").Str == pruner.QueryToolName {
						a.held = true
						continue
					}
					a.client = clientIdx
					clientIdx++
					e.emit(reindex(ev, a.client, idx))
				case "content_block_delta", "content_block_stop":
					idx := d.Get("index").Int()
					a := r.blocks[idx]
					if a == nil {
						e.emit(ev.raw)
						continue
					}
					a.delta(d.Get("delta"))
					if !a.held {
						e.emit(reindex(ev, a.client, idx))
					}
				case "message_delta":
					r.stop = d.Get("delta.stop_reason").Str
					r.deltaData, r.deltaRaw = ev.data, ev.raw
					u := d.Get("usage")
					r.u.output = int(u.Get("output_tokens").Int())
					if v := u.Get("input_tokens"); v.Exists() && int(v.Int()) > r.u.input {
						r.u.input = int(v.Int())
					}
				case "message_stop":
					r.stopRaw = ev.raw
				default:
					e.emit(ev.raw)
				}
			}
			if err != nil {
				break
			}
		}
		eof := time.Now()
		resp.Body.Close()
		out.usage.add(r.u)
		var all []string
		var calls []call
		var roundVisible []json.RawMessage
		for _, idx := range r.order {
			a := r.blocks[idx]
			fb := a.final()
			all = append(all, string(fb))
			v := gjson.ParseBytes(fb)
			if v.Get("type").Str == "tool_use" {
				calls = append(calls, call{id: v.Get("id").Str, name: v.Get("name").Str, input: []byte(v.Get("input").Raw)})
			}
			if a.held {
				continue
			}
			roundVisible = append(roundVisible, fb)
			visible = append(visible, string(fb))
			switch v.Get("type").Str {
			case "text":
				dg.text(v.Get("text").Str)
			case "tool_use":
				dg.call(v.Get("id").Str)
			}
		}
		asst := json.RawMessage(`{"role":"assistant","content":[` + strings.Join(all, ",") + `]}`)
		query, client := splitCalls(calls)
		if next := s.continueStream(ctx, e, t, round, asst, query, client, r.deltaData != nil && r.stop == "tool_use", &replace); next != nil {
			resp = next
			continue
		}
		last = r
		_, lastClient := splitCalls(calls)
		if last.deltaData == nil { // the stream ended without its message_delta: nothing more to say
			return out
		}
		deferred, lastAsst := s.settle(t.f, last.stop, query, asst, anthropicAssistant(roundVisible))
		replace = append(replace, nonEmpty(t.f, lastAsst))
		if len(visible) == 0 && (round > 1 || len(query) > 0) { // the client saw no block at all
			e.emit(encodeEvent("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)))
			e.emit(encodeEvent("content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(jsonStr(hiddenOnlyText))+`}}`)))
			e.emit(encodeEvent("content_block_stop", []byte(`{"type":"content_block_stop","index":0}`)))
			visible = append(visible, string(hiddenOnlyBlock))
			dg.text(hiddenOnlyText)
		}
		stop := last.stop
		if len(deferred) > 0 && len(lastClient) == 0 {
			stop = "end_turn"
		}
		var results []json.RawMessage
		if len(deferred) > 0 {
			s.met.Recoveries.WithLabelValues("deferred").Inc()
			_, results = s.answer(ctx, t, deferred)
		}
		if round > 1 || len(deferred) > 0 {
			out.splice = &splice{At: len(t.client.Messages), Digest: dg.sum(), Replace: replace, Results: results}
			s.persistSplice(ctx, t, out.splice)
		}
		out.final = len(lastClient) == 0 && endTurn(t.f, stop)
		if out.splice != nil && len(deferred) == 0 {
			out.viewTail = replace
		} else {
			out.viewTail = []json.RawMessage{json.RawMessage(`{"role":"assistant","content":[` + strings.Join(visible, ",") + `]}`)}
		}
		s.onFinal(t, out)
		if round == 1 && len(deferred) == 0 { // nothing hidden: the provider's events as they came
			e.emit(last.deltaRaw)
			if last.stopRaw != nil {
				e.emit(last.stopRaw)
			}
		} else {
			d, _ := sjson.SetBytes(last.deltaData, "delta.stop_reason", stop)
			d, _ = sjson.SetBytes(d, "usage.output_tokens", out.usage.output)
			if round > 1 {
				d = setAnthropicUsage(d, "usage", out.usage)
			}
			e.emit(encodeEvent("message_delta", d))
			e.emit(encodeEvent("message_stop", []byte(`{"type":"message_stop"}`)))
		}
		s.met.FinishSeconds.Observe(time.Since(eof).Seconds())
		return out
	}
}

// continueStream continues a streamed response upstream after a round of context_tree_query
// calls (continueRecovery): it returns the continuation's response, after adding the messages
// it appended to replace, or nil when the round does not continue. When the provider does not
// answer the continuation it aborts the client's stream and does not return.
func (s *Server) continueStream(ctx context.Context, e emitter, t *turn, round int, asst json.RawMessage, query, client []call, toolStop bool, replace *[]json.RawMessage) *http.Response {
	c, fail := s.continueRecovery(ctx, t, round, asst, query, client, toolStop, true)
	if fail != nil {
		s.abortStreamFailure(ctx, e, t, fail)
	}
	if c == nil {
		return nil
	}
	*replace = append(*replace, c.appended...)
	t.fwd = c.next
	return c.resp
}

// reindex rewrites an event's "index" member when the client sees another index.
func reindex(ev sseEvent, client int, upstream int64) []byte {
	if int64(client) == upstream {
		return ev.raw
	}
	d, err := sjson.SetBytes(ev.data, "index", client)
	if err != nil {
		return ev.raw
	}
	return encodeEvent(ev.name, d)
}

type oaCall struct {
	id, name string
	args     strings.Builder
	held     bool
	mapped   bool
	client   int
}

type openAIRound struct {
	calls       map[int64]*oaCall
	order       []int64
	text        strings.Builder
	finish      string
	finishChunk []byte
	finishRaw   []byte
	usageChunk  []byte
	usageRaw    []byte
	done        bool
	u           usage
}

func (s *Server) streamOpenAI(ctx context.Context, e emitter, t *turn, resp *http.Response) *outcome {
	out := &outcome{}
	var replace []json.RawMessage
	var visibleText strings.Builder
	clientCalls := 0
	firstID := ""
	for round := 1; ; round++ {
		r := &openAIRound{calls: map[int64]*oaCall{}}
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			ev, err := s.readEvent(ctx, e, t, br, resp.Body)
			if len(ev.raw) > 0 && len(ev.data) == 0 {
				e.emit(ev.raw) // comments, retry hints: as they came
			}
			if len(ev.raw) > 0 && len(ev.data) > 0 {
				s.openAIChunk(e, r, ev, round, &visibleText, &clientCalls, &firstID)
			}
			if err != nil {
				break
			}
		}
		eof := time.Now()
		resp.Body.Close()
		out.usage.add(r.u)
		tcs, calls := r.toolCalls()
		var roundVisible []string
		for i, idx := range r.order {
			if !r.calls[idx].held {
				roundVisible = append(roundVisible, tcs[i])
			}
		}
		asst := openAIAssistant(r.text.String(), tcs)
		query, client := splitCalls(calls)
		if next := s.continueStream(ctx, e, t, round, asst, query, client, r.finishChunk != nil && r.finish == "tool_calls", &replace); next != nil {
			resp = next
			continue
		}
		if r.finishChunk == nil { // no finish chunk: the rest, as it came
			r.emitTail(e, round, out.usage)
			return out
		}
		deferred, lastAsst := s.settle(t.f, r.finish, query, asst, openAIAssistant(r.text.String(), roundVisible))
		replace = append(replace, nonEmpty(t.f, lastAsst))
		if visibleText.Len() == 0 && clientCalls == 0 && (round > 1 || len(query) > 0) { // the client saw nothing
			ch, _ := sjson.SetRawBytes(r.finishChunk, "choices.0.delta", []byte(`{"content":`+string(jsonStr(hiddenOnlyText))+`}`))
			ch, _ = sjson.SetRawBytes(ch, "choices.0.finish_reason", []byte("null"))
			ch, _ = sjson.DeleteBytes(ch, "usage")
			e.emit(encodeEvent("", ch))
			visibleText.WriteString(hiddenOnlyText)
		}
		stop := r.finish
		if len(deferred) > 0 && len(client) == 0 {
			stop = "stop"
		}
		var dg digester
		dg.text(visibleText.String())
		for _, c := range client {
			dg.call(c.id)
		}
		var results []json.RawMessage
		if len(deferred) > 0 {
			s.met.Recoveries.WithLabelValues("deferred").Inc()
			_, results = s.answer(ctx, t, deferred)
		}
		if round > 1 || len(deferred) > 0 {
			out.splice = &splice{At: len(t.client.Messages), Digest: dg.sum(), Replace: replace, Results: results}
			s.persistSplice(ctx, t, out.splice)
		}
		out.final = len(client) == 0 && endTurn(t.f, stop)
		if out.splice != nil && len(deferred) == 0 {
			out.viewTail = replace
		} else {
			var vc []string
			for _, c := range client {
				raw, _ := json.Marshal(map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": string(c.input)}})
				vc = append(vc, string(raw))
			}
			out.viewTail = []json.RawMessage{openAIAssistant(visibleText.String(), vc)}
		}
		s.onFinal(t, out)
		if stop == r.finish {
			e.emit(r.finishRaw)
		} else {
			fc, _ := sjson.SetBytes(r.finishChunk, "choices.0.finish_reason", stop)
			e.emit(encodeEvent("", fc))
		}
		r.emitTail(e, round, out.usage)
		s.met.FinishSeconds.Observe(time.Since(eof).Seconds())
		return out
	}
}

// emitTail sends what the round held after its finish chunk: the usage chunk (after a hidden
// round, with total, the usage summed over the rounds) and [DONE].
func (r *openAIRound) emitTail(e emitter, round int, total usage) {
	if r.usageChunk != nil {
		if round > 1 {
			e.emit(encodeEvent("", setOpenAIUsage(r.usageChunk, "usage", total)))
		} else {
			e.emit(r.usageRaw)
		}
	}
	if r.done {
		e.emit([]byte("data: [DONE]\n\n"))
	}
}

// callDelta adds one streamed tool_calls entry to the round's calls and returns the call's
// index and the call (held when it is a context_tree_query call).
func (r *openAIRound) callDelta(tc gjson.Result) (int64, *oaCall) {
	idx := tc.Get("index").Int()
	c := r.calls[idx]
	if c == nil {
		c = &oaCall{}
		r.calls[idx] = c
		r.order = append(r.order, idx)
	}
	if v := tc.Get("id"); v.Str != "" {
		c.id = v.Str
	}
	if v := tc.Get("function.name"); v.Str != "" {
		c.name += v.Str
		if c.name == pruner.QueryToolName {
			c.held = true
		}
	}
	c.args.WriteString(tc.Get("function.arguments").Str)
	return idx, c
}

// toolCalls returns the round's tool calls as Chat Completions tool_calls entries, and as
// calls.
func (r *openAIRound) toolCalls() (raws []string, calls []call) {
	for _, idx := range r.order {
		c := r.calls[idx]
		raw, _ := json.Marshal(map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": c.args.String()}})
		raws = append(raws, string(raw))
		calls = append(calls, call{id: c.id, name: c.name, input: []byte(c.args.String())})
	}
	return raws, calls
}

// streamOpenAIChoices relays a stream of several choices (manyChoices) event by event as it
// came; only [DONE] is held until the final-answer flush was started. On the way it reads
// the usage and choice 0, the session's answer.
func (s *Server) streamOpenAIChoices(ctx context.Context, e emitter, t *turn, resp *http.Response) *outcome {
	out := &outcome{}
	r := &openAIRound{calls: map[int64]*oaCall{}}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		ev, err := s.readEvent(ctx, e, t, br, resp.Body)
		if bytes.Equal(bytes.TrimSpace(ev.data), []byte("[DONE]")) {
			r.done = true
		} else if len(ev.raw) > 0 {
			e.emit(ev.raw)
			ch := gjson.ParseBytes(ev.data)
			if u := ch.Get("usage"); u.IsObject() {
				r.u = openAIUsage(u)
			}
			ch.Get("choices").ForEach(func(_, c gjson.Result) bool {
				if c.Get("index").Int() == 0 {
					r.text.WriteString(c.Get("delta.content").Str)
					c.Get("delta.tool_calls").ForEach(func(_, tc gjson.Result) bool { r.callDelta(tc); return true })
					if fr := c.Get("finish_reason"); fr.Type == gjson.String {
						r.finish = fr.Str
					}
				}
				return true
			})
		}
		if err != nil {
			break
		}
	}
	eof := time.Now()
	tcs, _ := r.toolCalls()
	out.usage, out.final = r.u, len(tcs) == 0 && endTurn(t.f, r.finish)
	out.viewTail = []json.RawMessage{openAIAssistant(r.text.String(), tcs)}
	s.onFinal(t, out)
	r.emitTail(e, 1, out.usage)
	s.met.FinishSeconds.Observe(time.Since(eof).Seconds())
	return out
}

// openAIChunk processes one Chat Completions stream chunk: it accumulates the round, hides
// context_tree_query calls, renumbers the client's tool call indexes, holds the finish and
// usage chunks and [DONE], and relays everything else at once.
func (s *Server) openAIChunk(e emitter, r *openAIRound, ev sseEvent, round int, visible *strings.Builder, clientCalls *int, firstID *string) {
	if bytes.Equal(bytes.TrimSpace(ev.data), []byte("[DONE]")) {
		r.done = true
		return
	}
	ch := gjson.ParseBytes(ev.data)
	if id := ch.Get("id").Str; id != "" {
		if *firstID == "" {
			*firstID = id
		} else if id != *firstID { // a continuation: clients accumulate chunks of one id
			if d, err := sjson.SetBytes(ev.data, "id", *firstID); err == nil {
				ev.data = d
				ev.raw = encodeEvent(ev.name, d)
				ch = gjson.ParseBytes(d)
			}
		}
	}
	if u := ch.Get("usage"); u.IsObject() {
		r.u = openAIUsage(u)
	}
	choices := ch.Get("choices")
	if !choices.IsArray() || len(choices.Array()) == 0 {
		if ch.Get("usage").IsObject() {
			r.usageChunk, r.usageRaw = ev.data, ev.raw
			return
		}
		e.emit(ev.raw)
		return
	}
	c0 := choices.Get("0")
	delta := c0.Get("delta")
	data := ev.data
	changed := false
	hasTools := false
	if tcs := delta.Get("tool_calls"); tcs.IsArray() {
		var keep []string
		tcs.ForEach(func(_, tc gjson.Result) bool {
			idx, c := r.callDelta(tc)
			if c.held {
				changed = true
				return true
			}
			if !c.mapped {
				c.mapped, c.client = true, *clientCalls
				*clientCalls++
			}
			raw := tc.Raw
			if int64(c.client) != idx {
				nb, _ := sjson.Set(raw, "index", c.client)
				raw, changed = nb, true
			}
			keep = append(keep, raw)
			return true
		})
		hasTools = len(keep) > 0
		if changed {
			if len(keep) == 0 {
				data, _ = sjson.DeleteBytes(data, "choices.0.delta.tool_calls")
			} else {
				data, _ = sjson.SetRawBytes(data, "choices.0.delta.tool_calls", []byte("["+strings.Join(keep, ",")+"]"))
			}
		}
	}
	content := delta.Get("content")
	if content.Type == gjson.String && content.Str != "" {
		if round > 1 && r.text.Len() == 0 && visible.Len() > 0 {
			data, _ = sjson.SetBytes(data, "choices.0.delta.content", "\n\n"+content.Str)
			visible.WriteString("\n\n")
			changed = true
		}
		r.text.WriteString(content.Str)
		visible.WriteString(content.Str)
	}
	if fr := c0.Get("finish_reason"); fr.Type == gjson.String {
		r.finish = fr.Str
		r.finishChunk = data
		r.finishRaw = ev.raw
		if changed {
			r.finishRaw = encodeEvent("", data)
		}
		return
	}
	if changed && !hasTools && !(content.Type == gjson.String && content.Str != "") {
		return // only hidden calls in this chunk
	}
	if round > 1 && delta.Get("role").Exists() && content.Str == "" && !hasTools {
		return // the continuation's opening role chunk
	}
	if changed {
		e.emit(encodeEvent("", data))
		return
	}
	e.emit(ev.raw)
}

// errLineTooLong is readLine's error past its bound.
var errLineTooLong = errors.New("line too long")

// readLine reads one line (up to and including '\n') of at most max bytes, failing with
// errLineTooLong past that: unlike bufio.Reader.ReadBytes it never holds more.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
