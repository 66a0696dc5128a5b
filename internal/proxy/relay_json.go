package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/condense-dev/condense/internal/pruner"
)

// jsonFormat reads and rewrites the non-streamed answers of one wire format.
type jsonFormat interface {
	// read fills r from the answer root, or fails when the answer has no shape it knows.
	read(r *jsonRound, root gjson.Result) error
	// shown returns the last round's answer as the client sees all rounds (query calls hidden,
	// the stop set, usage summed over several rounds), the assistant message it holds, and its digest.
	shown(rounds []*jsonRound, stop string, hid bool, total usage) (body []byte, visible json.RawMessage, dg digester)
}

// anthropicJSON is the Messages API's jsonFormat; openAIJSON is Chat Completions'.
type (
	anthropicJSON struct{}
	openAIJSON    struct{}
)

// responsesJSON is the Responses API's jsonFormat; with stripIDs the model's view of the
// output items goes without their ids (storeOff).
type responsesJSON struct{ stripIDs bool }

// jsonRound is one round of a non-streamed answer.
type jsonRound struct {
	data    []byte
	asst    json.RawMessage
	vasst   json.RawMessage // asst without the query calls
	calls   []call
	visible []json.RawMessage // Anthropic: visible content blocks; Responses: visible output items
	text    string            // OpenAI: content text
	stop    string            // Responses: the status
	u       usage
}

func (s *Server) relayJSON(ctx context.Context, w http.ResponseWriter, t *turn, resp *http.Response, fm jsonFormat) *outcome {
	out := &outcome{}
	hdr := resp.Header.Clone()
	data, err := readAllMax(resp.Body, s.opt.MaxResponseBytes)
	eof := time.Now()
	if err != nil {
		s.readFailed(ctx, w, t, err)
		return out
	}
	if manyChoices(t) { // relayed untouched; choice 0 is the session's answer
		if r, err := parseJSONRound(fm, data); err == nil {
			out.usage, out.final = r.u, t.finalAnswer(len(r.calls), r.stop)
			out.viewTail = []json.RawMessage{r.asst}
			s.onFinal(t, out)
		}
		s.writeJSON(w, hdr, data, eof)
		return out
	}
	var rounds []*jsonRound
	var replace []json.RawMessage
	for {
		r, err := parseJSONRound(fm, data)
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
		c, fail := s.continueRecovery(ctx, t, len(rounds), r.asst, query, client, r.stop, false)
		if fail != nil {
			s.writeJSONFailure(ctx, w, t, fail)
			return out
		}
		if c == nil {
			break
		}
		if c.text { // the client sees nothing of a text recovery request
			r.visible, r.text = nil, ""
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
	query, client := splitCalls(last.calls)
	deferred, stop, stored := s.settle(t.f, last.stop, query, client, last.asst, last.vasst)
	replace = append(replace, stored)
	body, visible, dg := fm.shown(rounds, stop, len(rounds) > 1 || len(query) > 0, out.usage)
	s.endRecovery(ctx, t, out, ending{rounds: len(rounds), deferred: deferred, client: client, stop: stop,
		replace: replace, dg: dg, visible: visible})
	if out.splice == nil && len(query) == 0 {
		body = data // nothing hidden: the provider's bytes as they came
	}
	s.writeJSON(w, hdr, body, eof)
	return out
}

// parseJSONRound reads one round of a non-streamed answer.
func parseJSONRound(fm jsonFormat, data []byte) (*jsonRound, error) {
	if !gjson.ValidBytes(data) {
		return nil, errors.New("response is not JSON")
	}
	r := &jsonRound{data: data}
	if err := fm.read(r, gjson.ParseBytes(data)); err != nil {
		return nil, err
	}
	return r, nil
}

func (anthropicJSON) read(r *jsonRound, root gjson.Result) error {
	content := root.Get("content")
	if !content.IsArray() {
		return errors.New("no content array")
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
	return nil
}

func (anthropicJSON) shown(rounds []*jsonRound, stop string, hid bool, total usage) (body []byte, visible json.RawMessage, dg digester) {
	last := rounds[len(rounds)-1]
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
		body = setAnthropicUsage(body, "usage", total)
	}
	return body, json.RawMessage(`{"role":"assistant","content":` + content + `}`), dg
}

func (openAIJSON) read(r *jsonRound, root gjson.Result) error {
	msg := root.Get("choices.0.message")
	if !msg.IsObject() {
		return errors.New("no choices[0].message")
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
	return nil
}

func (openAIJSON) shown(rounds []*jsonRound, stop string, hid bool, total usage) (body []byte, visible json.RawMessage, dg digester) {
	last := rounds[len(rounds)-1]
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
		body = setOpenAIUsage(body, "usage", total)
	}
	return body, openAIAssistant(text, tcs), dg
}

func (f responsesJSON) read(r *jsonRound, root gjson.Result) error {
	output := root.Get("output")
	if !output.IsArray() {
		return errors.New("no output array")
	}
	var items []outItem
	output.ForEach(func(_, v gjson.Result) bool {
		items = append(items, readOutItem(v))
		return true
	})
	hideQueries(items)
	all := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		all = append(all, it.raw)
		if !it.hidden {
			r.visible = append(r.visible, it.raw)
		}
	}
	r.calls = itemCalls(items)
	r.asst, r.vasst = modelView(all, f.stripIDs), modelView(r.visible, f.stripIDs)
	r.stop = root.Get("status").Str
	r.u = responsesUsage(root.Get("usage"))
	return nil
}

func (f responsesJSON) shown(rounds []*jsonRound, stop string, hid bool, total usage) (body []byte, visible json.RawMessage, dg digester) {
	last := rounds[len(rounds)-1]
	var vis []json.RawMessage
	for _, r := range rounds {
		vis = append(vis, r.visible...)
	}
	model := modelView(vis, f.stripIDs)
	if len(vis) == 0 && hid {
		vis, model = []json.RawMessage{hiddenOnlyItem()}, hiddenOnlyView
	}
	body, _ = sjson.SetRawBytes(last.data, "output", joinRaw("[", vis, "]"))
	if stop != last.stop {
		body, _ = sjson.SetBytes(body, "status", stop)
	}
	if len(rounds) > 1 {
		body = setResponsesUsage(body, "usage", total)
	}
	return body, model, responsesDigest(vis)
}

// readFailed answers a JSON request whose provider response could not be read whole (it
// broke off, stalled past UpstreamIdleTimeout or exceeded MaxResponseBytes): a 502 in the
// provider's error shape, counted and logged.
func (s *Server) readFailed(ctx context.Context, w http.ResponseWriter, t *turn, err error) {
	if ctx.Err() == nil {
		s.met.UpstreamBroken.WithLabelValues(string(t.ep)).Inc()
		s.countLimit(t.ep, err)
		t.err = err
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
