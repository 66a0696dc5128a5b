package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// sequencer numbers the events of a Responses stream as the client sees them: consecutive
// sequence_numbers from the provider's first, whatever the proxy holds back, drops or adds.
type sequencer struct {
	next  int64
	begun bool
}

// take returns the number the next event that carries one (provider: its own) goes out with.
func (q *sequencer) take(provider gjson.Result) (int64, bool) {
	if !provider.Exists() {
		return 0, false
	}
	if !q.begun {
		q.next, q.begun = provider.Int(), true
	}
	n := q.next
	q.next++
	return n, true
}

// fresh returns the number of an event the proxy adds (0 and on for a nil sequencer).
func (q *sequencer) fresh() int64 {
	if q == nil {
		return 0
	}
	q.begun = true
	n := q.next
	q.next++
	return n
}

// How a streamed output item reaches the client.
type itemMode uint8

const (
	itemShown  itemMode = iota // relayed as it comes, at its client output_index
	itemHeld                   // a reasoning item: held until the item it precedes is known
	itemHidden                 // a context_tree_query call, or the reasoning item before one
)

// streamItem is one output item of a streamed Responses round.
type streamItem struct {
	outItem
	up, client int64      // the provider's and the client's output_index
	mode       itemMode   //
	held       []sseEvent // a held item's events, relayed when it is shown
}

// responsesRound is one upstream stream of a streamed Responses answer.
type responsesRound struct {
	items    map[int64]*streamItem
	order    []int64   // the items' provider output_index, in order
	terminal *sseEvent // response.completed, .incomplete or .failed (held)
	status   string
	u        usage
}

// responsesStream relays one streamed Responses answer, over all its rounds.
type responsesStream struct {
	e       emitter
	round   int
	shown   int64  // client output indexes given
	firstID string // the response id the client got in response.created
	hid     bool   // an item was hidden
	// holdAll holds every item of the round until its end (holdsText).
	holdAll bool
}

// streamResponses relays a Responses event stream, hiding the query calls' items (and the
// reasoning before them), splicing a continuation's items in at contiguous output indexes and
// renumbering events; the last terminal event carries the client's output and summed usage.
func (s *Server) streamResponses(ctx context.Context, e emitter, t *turn, resp *http.Response) *outcome {
	e.seq = &sequencer{}
	rs := &responsesStream{e: e}
	out := &outcome{}
	var replace, visible []json.RawMessage
	strip := storeOff(t)
	for round := 1; ; round++ {
		rs.round, rs.holdAll = round, s.holdsText(t, round)
		r := &responsesRound{items: map[int64]*streamItem{}}
		eof := s.readRound(ctx, e, t, resp, func(ev sseEvent) { rs.event(r, ev) })
		if !rs.holdAll {
			rs.release(r) // a reasoning item the round ended with
		}
		out.usage.add(r.u)
		var all []json.RawMessage
		items := make([]outItem, 0, len(r.order))
		for _, up := range r.order {
			it := r.items[up]
			if it.raw == nil {
				continue // never whole: nothing to hold or show of it
			}
			items = append(items, it.outItem)
			all = append(all, it.raw)
		}
		query, client := splitCalls(itemCalls(items))
		asst := modelView(all, strip)
		next, text := s.continueStream(ctx, e, t, round, asst, query, client, r.status, &replace)
		if text { // a text recovery request: the client sees none of it
			rs.hide(r)
		} else {
			rs.release(r)
		}
		var roundVisible []json.RawMessage
		for _, up := range r.order {
			if it := r.items[up]; it.raw != nil && it.mode == itemShown {
				roundVisible = append(roundVisible, it.raw)
			}
		}
		visible = append(visible, roundVisible...)
		if next != nil {
			resp = next
			continue
		}
		if r.terminal == nil { // the stream ended without its terminal event: nothing more to say
			return out
		}
		deferred, stop, stored := s.settle(t.f, r.status, query, client, asst, modelView(roundVisible, strip))
		replace = append(replace, stored)
		model := modelView(visible, strip)
		if len(visible) == 0 && (round > 1 || len(query) > 0) { // the client saw no item at all
			item := hiddenOnlyItem()
			rs.emitMessage(item, hiddenOnlyText)
			visible, model = append(visible, item), hiddenOnlyView
		}
		s.endRecovery(ctx, t, out, ending{rounds: round, deferred: deferred, client: client, stop: stop, replace: replace,
			dg: responsesDigest(visible), visible: model})
		rs.finish(r, visible, out.usage)
		s.met.FinishSeconds.Observe(time.Since(eof).Seconds())
		return out
	}
}

// event handles one event of a round: the response's opening events go out once, the
// terminal one is held, an item's events follow its item's mode.
func (rs *responsesStream) event(r *responsesRound, ev sseEvent) {
	d := gjson.ParseBytes(ev.data)
	switch typ := d.Get("type").Str; typ {
	case "response.created", "response.queued", "response.in_progress":
		if rs.round > 1 {
			return // the continuation's: the client has the response these announce
		}
		if rs.firstID == "" {
			rs.firstID = d.Get("response.id").Str
		}
		rs.emit(ev, d, nil)
	case "response.completed", "response.incomplete", "response.failed":
		r.terminal = &ev
		resp := d.Get("response")
		r.status, r.u = resp.Get("status").Str, responsesUsage(resp.Get("usage"))
		resp.Get("output").ForEach(func(k, v gjson.Result) bool {
			if it := r.items[k.Int()]; it != nil && it.raw == nil {
				it.whole(v)
			}
			return true
		})
	case "response.output_item.added":
		rs.added(r, ev, d)
	case "error": // the stream fails: what it held goes out before
		rs.release(r)
		rs.emit(ev, d, nil)
	default:
		idx := d.Get("output_index")
		it := r.items[idx.Int()]
		if !idx.Exists() || it == nil {
			rs.emit(ev, d, nil)
			return
		}
		if typ == "response.output_item.done" {
			it.whole(d.Get("item"))
		}
		switch it.mode {
		case itemHeld:
			it.held = append(it.held, ev)
		case itemShown:
			rs.emit(ev, d, it)
		}
	}
}

// added starts an item: a query call is hidden with the reasoning held right before it, any
// other item shows the held reasoning first; a reasoning item is held itself (every item
// with holdAll).
func (rs *responsesStream) added(r *responsesRound, ev sseEvent, d gjson.Result) {
	it := &streamItem{outItem: readOutItem(d.Get("item")), up: d.Get("output_index").Int()}
	it.raw = nil // as announced, not whole
	r.items[it.up] = it
	r.order = append(r.order, it.up)
	if it.isQuery() {
		it.mode, it.hidden, rs.hid = itemHidden, true, true
		for i := len(r.order) - 2; i >= 0; i-- { // the held reasoning right before it
			h := r.items[r.order[i]]
			if h.mode != itemHeld || h.typ != "reasoning" {
				break
			}
			h.mode, h.hidden, h.held = itemHidden, true, nil
		}
		return
	}
	if rs.holdAll {
		it.mode, it.held = itemHeld, []sseEvent{ev}
		return
	}
	rs.release(r)
	if it.typ == "reasoning" {
		it.mode, it.held = itemHeld, []sseEvent{ev}
		return
	}
	rs.show(it)
	rs.emit(ev, d, it)
}

// release shows the round's held items and relays their events.
func (rs *responsesStream) release(r *responsesRound) {
	for _, up := range r.order {
		it := r.items[up]
		if it.mode != itemHeld {
			continue
		}
		rs.show(it)
		for _, ev := range it.held {
			rs.emit(ev, gjson.ParseBytes(ev.data), it)
		}
		it.held = nil
	}
}

// hide drops the round's held items: the client sees none of them.
func (rs *responsesStream) hide(r *responsesRound) {
	for _, up := range r.order {
		if it := r.items[up]; it.mode == itemHeld {
			it.mode, it.hidden, it.held = itemHidden, true, nil
			rs.hid = true
		}
	}
}

// show gives an item the next client output index.
func (rs *responsesStream) show(it *streamItem) {
	it.mode, it.client = itemShown, rs.shown
	rs.shown++
}

// emit relays an event with its sequence number and (for an item's, it non-nil) its output
// index as the client sees them; it is re-encoded only when one of them changes.
func (rs *responsesStream) emit(ev sseEvent, d gjson.Result, it *streamItem) {
	data, changed := ev.data, false
	if it != nil && it.client != it.up {
		data, _ = sjson.SetBytes(data, "output_index", it.client)
		changed = true
	}
	sn := d.Get("sequence_number")
	if n, ok := rs.e.seq.take(sn); ok && n != sn.Int() {
		data, _ = sjson.SetBytes(data, "sequence_number", n)
		changed = true
	}
	if changed {
		rs.e.emit(encodeEvent(ev.name, data))
		return
	}
	rs.e.emit(ev.raw)
}

// emitMessage sends the events of an assistant message item of one output_text part, whole
// as item, at the next client output index (item_id: its id, "" for none).
func (rs *responsesStream) emitMessage(item json.RawMessage, text string) {
	idx := rs.shown
	rs.shown++
	id := gjson.GetBytes(item, "id").Str
	at := fmt.Sprintf(`"item_id":%s,"output_index":%d,"content_index":0`, jsonStr(id), idx)
	txt := string(jsonStr(text))
	for _, ev := range [][2]string{
		{"response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":{"type":"message","status":"in_progress","content":[],"role":"assistant"}`, idx)},
		{"response.content_part.added", at + `,"part":{"type":"output_text","annotations":[],"text":""}`},
		{"response.output_text.delta", at + `,"delta":` + txt + `,"logprobs":[]`},
		{"response.output_text.done", at + `,"text":` + txt + `,"logprobs":[]`},
		{"response.content_part.done", at + `,"part":{"type":"output_text","annotations":[],"text":` + txt + `}`},
		{"response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, idx, item)},
	} {
		rs.e.emit(encodeEvent(ev[0], fmt.Appendf(nil, `{"type":%q,%s,"sequence_number":%d}`, ev[0], ev[1], rs.e.seq.fresh())))
	}
}

// finish sends the held terminal event: as it came when nothing was hidden in a one-round
// answer, else with the output the client saw (visible), the first round's response id and
// the usage summed over the rounds (total).
func (rs *responsesStream) finish(r *responsesRound, visible []json.RawMessage, total usage) {
	ev := *r.terminal
	if rs.round > 1 || rs.hid {
		data, _ := sjson.SetRawBytes(ev.data, "response.output", joinRaw("[", visible, "]"))
		if rs.round > 1 {
			if rs.firstID != "" {
				data, _ = sjson.SetBytes(data, "response.id", rs.firstID)
			}
			data = setResponsesUsage(data, "response.usage", total)
		}
		ev = sseEvent{raw: encodeEvent(ev.name, data), name: ev.name, data: data}
	}
	rs.emit(ev, gjson.ParseBytes(ev.data), nil)
}
