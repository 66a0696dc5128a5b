package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/condense-dev/condense/internal/pruner"
)

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
	sh := &openAIShown{}
	for round := 1; ; round++ {
		r := &openAIRound{calls: map[int64]*oaCall{}}
		re := e.held(s.holdsText(t, round)) // the round, held while it may be a text recovery request
		mark := sh.mark()
		eof := s.readRound(ctx, re, t, resp, func(ev sseEvent) {
			s.openAIChunk(re, r, ev, round, sh)
		})
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
		next, text := s.continueStream(ctx, e, t, round, asst, query, client, r.finish, &replace)
		re.release(text)
		if text { // a text recovery request: the client saw none of it
			sh.reset(mark)
		}
		if next != nil {
			resp = next
			continue
		}
		if r.finishChunk == nil { // no finish chunk: the rest, as it came
			r.emitTail(e, round, out.usage)
			return out
		}
		deferred, stop, stored := s.settle(t.f, r.finish, query, client, asst, openAIAssistant(r.text.String(), roundVisible))
		replace = append(replace, stored)
		if sh.text.Len() == 0 && sh.calls == 0 && (round > 1 || len(query) > 0) { // the client saw nothing
			ch, _ := sjson.SetRawBytes(r.finishChunk, "choices.0.delta", []byte(`{"content":`+string(jsonStr(hiddenOnlyText))+`}`))
			ch, _ = sjson.SetRawBytes(ch, "choices.0.finish_reason", []byte("null"))
			ch, _ = sjson.DeleteBytes(ch, "usage")
			e.emit(encodeEvent("", ch))
			sh.text.WriteString(hiddenOnlyText)
		}
		var dg digester
		dg.text(sh.text.String())
		for _, c := range client {
			dg.call(c.id)
		}
		var vc []string
		for _, c := range client {
			raw, _ := json.Marshal(map[string]any{"id": c.id, "type": "function", "function": map[string]string{"name": c.name, "arguments": string(c.input)}})
			vc = append(vc, string(raw))
		}
		s.endRecovery(ctx, t, out, ending{rounds: round, deferred: deferred, client: client, stop: stop, replace: replace, dg: dg,
			visible: openAIAssistant(sh.text.String(), vc)})
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

// openAIShown is what the client was shown of a streamed Chat Completions answer over its
// rounds.
type openAIShown struct {
	text    strings.Builder // the content
	calls   int             // client tool calls, numbered from 0
	firstID string          // the chunk id the client got first
	opened  bool            // a role chunk went out
}

// shownMark is what openAIShown held before a round.
type shownMark struct {
	text   int
	opened bool
}

func (sh *openAIShown) mark() shownMark { return shownMark{sh.text.Len(), sh.opened} }

// reset forgets what a round the client did not see added (a text recovery request: no calls).
func (sh *openAIShown) reset(m shownMark) {
	kept := sh.text.String()[:m.text]
	sh.text.Reset()
	sh.text.WriteString(kept)
	sh.opened = m.opened
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
	out.usage, out.final = r.u, t.finalAnswer(len(tcs), r.finish)
	out.viewTail = []json.RawMessage{openAIAssistant(r.text.String(), tcs)}
	s.onFinal(t, out)
	r.emitTail(e, 1, out.usage)
	s.met.FinishSeconds.Observe(time.Since(eof).Seconds())
	return out
}

// openAIChunk processes one Chat Completions stream chunk: it accumulates the round, hides
// context_tree_query calls, renumbers the client's tool call indexes, holds the finish and
// usage chunks and [DONE], and relays everything else at once.
func (s *Server) openAIChunk(e emitter, r *openAIRound, ev sseEvent, round int, sh *openAIShown) {
	if bytes.Equal(bytes.TrimSpace(ev.data), []byte("[DONE]")) {
		r.done = true
		return
	}
	ch := gjson.ParseBytes(ev.data)
	if id := ch.Get("id").Str; id != "" {
		if sh.firstID == "" {
			sh.firstID = id
		} else if id != sh.firstID { // a continuation: clients accumulate chunks of one id
			if d, err := sjson.SetBytes(ev.data, "id", sh.firstID); err == nil {
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
				c.mapped, c.client = true, sh.calls
				sh.calls++
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
		if round > 1 && r.text.Len() == 0 && sh.text.Len() > 0 {
			data, _ = sjson.SetBytes(data, "choices.0.delta.content", "\n\n"+content.Str)
			sh.text.WriteString("\n\n")
			changed = true
		}
		r.text.WriteString(content.Str)
		sh.text.WriteString(content.Str)
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
	if delta.Get("role").Exists() && content.Str == "" && !hasTools {
		if round > 1 && sh.opened {
			return // the continuation's opening role chunk
		}
		sh.opened = true
	}
	if changed {
		e.emit(encodeEvent("", data))
		return
	}
	e.emit(ev.raw)
}
