package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/condense-dev/condense/internal/pruner"
)

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
	for round := 1; ; round++ {
		r := &anthropicRound{blocks: map[int64]*blockAcc{}}
		re := e.held(s.holdsText(t, round)) // the round's content, held while it may be a text recovery request
		firstIdx := clientIdx
		eof := s.readRound(ctx, re, t, resp, func(ev sseEvent) {
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
					return
				}
				a.client = clientIdx
				clientIdx++
				re.emit(reindex(ev, a.client, idx))
			case "content_block_delta", "content_block_stop":
				idx := d.Get("index").Int()
				a := r.blocks[idx]
				if a == nil {
					re.emit(ev.raw)
					return
				}
				a.delta(d.Get("delta"))
				if !a.held {
					re.emit(reindex(ev, a.client, idx))
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
				re.emit(ev.raw)
			}
		})
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
			if !a.held {
				roundVisible = append(roundVisible, fb)
			}
		}
		asst := json.RawMessage(`{"role":"assistant","content":[` + strings.Join(all, ",") + `]}`)
		query, client := splitCalls(calls)
		next, text := s.continueStream(ctx, e, t, round, asst, query, client, r.stop, &replace)
		re.release(text)
		if text { // a text recovery request: the client saw none of it
			roundVisible, clientIdx = nil, firstIdx
		}
		for _, fb := range roundVisible {
			visible = append(visible, string(fb))
			v := gjson.ParseBytes(fb)
			switch v.Get("type").Str {
			case "text":
				dg.text(v.Get("text").Str)
			case "tool_use":
				dg.call(v.Get("id").Str)
			}
		}
		if next != nil {
			resp = next
			continue
		}
		if r.deltaData == nil { // the stream ended without its message_delta: nothing more to say
			return out
		}
		deferred, stop, stored := s.settle(t.f, r.stop, query, client, asst, anthropicAssistant(roundVisible))
		replace = append(replace, stored)
		if len(visible) == 0 && (round > 1 || len(query) > 0) { // the client saw no block at all
			e.emit(encodeEvent("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)))
			e.emit(encodeEvent("content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(jsonStr(hiddenOnlyText))+`}}`)))
			e.emit(encodeEvent("content_block_stop", []byte(`{"type":"content_block_stop","index":0}`)))
			visible = append(visible, string(hiddenOnlyBlock))
			dg.text(hiddenOnlyText)
		}
		s.endRecovery(ctx, t, out, ending{rounds: round, deferred: deferred, client: client, stop: stop, replace: replace, dg: dg,
			visible: json.RawMessage(`{"role":"assistant","content":[` + strings.Join(visible, ",") + `]}`)})
		if round == 1 && len(deferred) == 0 { // nothing hidden: the provider's events as they came
			e.emit(r.deltaRaw)
			if r.stopRaw != nil {
				e.emit(r.stopRaw)
			}
		} else {
			d, _ := sjson.SetBytes(r.deltaData, "delta.stop_reason", stop)
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
