package pruner

import "github.com/condense-dev/condense/internal/wire"

// RenderStats counts what a render changed.
type RenderStats struct {
	// Stubbed counts results replaced by a summary stub; SpillStubs those replaced by a spill stub.
	Stubbed, SpillStubs int
	// Purged counts errored calls whose arguments were purged.
	Purged int
	// Chains counts compressed chains applied; Dropped the messages they removed.
	Chains, Dropped int
	// Summaries counts per-batch summaries shown; Suppressed those hidden by a chain.
	Summaries, Suppressed int
	// ThinkingStripped counts thinking blocks removed from final assistants.
	ThinkingStripped int
	// Swept counts orphan tool results removed.
	Swept int
	// CacheMarkersMoved counts cache_control markers moved off replaced or dropped blocks.
	CacheMarkersMoved int
	// AbsentRanges counts chain entries skipped silently because their range is gone from the
	// request: a boundary does not resolve and none of their recorded tool calls occurs.
	AbsentRanges int
}

// Result is the outcome of Render.
type Result struct {
	// Unchanged is true when nothing applied: forward the original bytes (Body is req.Raw()).
	Unchanged bool
	// Request is the rendered request (req itself when Unchanged).
	Request *wire.Request
	// Body is the serialized request to forward.
	Body []byte
	// BytesBefore and BytesAfter are the body sizes before and after; both are 0 when
	// Unchanged (nothing was measured, as in the reference's no-op sentinel).
	BytesBefore, BytesAfter int
	// Diagnostics are the degradations found that the state has not recorded yet.
	Diagnostics []Diagnostic
	// Stats counts what changed.
	Stats RenderStats
	// Fallback is non-empty when the rendered request failed validation while the original
	// passed; the original is forwarded (Unchanged) and Fallback says why.
	Fallback string
}

// renderer holds per-render working state.
type renderer struct {
	v      *analysis
	st     *State
	pol    *Policy
	blocks [][]*wire.Block // per message, nil until modified
	drop   []bool
	res    *Result
	diags  []Diagnostic
	// inserts after message i (OpenAI and Responses synthetic / summary messages); Anthropic uses extra blocks.
	after  map[int][]*wire.Message
	before map[int][]*wire.Message
	tail   []*wire.Message
	// stubAt holds, by a summary's index in st.Summaries, where phase 1 stubbed results under
	// it (nil when it stubbed none): only summaries with a stubbed result are shown, after its
	// anchor or else there.
	stubAt []stubPos
}

// stubPos is the assistant message of the first result stubbed under a summary: own counts
// the summary's own results only (-1: only its dedup aliases are stubbed), any all; seen is
// false while none is stubbed. Later stubs never move it.
type stubPos struct {
	own, any int
	seen     bool
}

func (r *renderer) blk(i int) []*wire.Block {
	if r.blocks[i] == nil {
		r.blocks[i] = append([]*wire.Block(nil), r.v.msgs[i].Blocks...)
	}
	return r.blocks[i]
}

// Render applies the state to a transcript (stub-replace, error purge, chain-range prune,
// orphan sweep, summary placement; docs/engine.md). It is pure and deterministic; an empty
// state always renders Unchanged.
func Render(req *wire.Request, st *State, pol Policy) *Result {
	res := RenderRequest(req, st, pol)
	if !res.Unchanged {
		res.Body = res.Request.Bytes()
		res.BytesAfter = len(res.Body)
	}
	return res
}

// RenderRequest is Render without serializing: when the request changed, Result.Request is the
// rendered request and Body is nil (BytesAfter is only an estimate of its size). For callers
// that read the rendered structure and never send it, such as the cache-aware weighing.
func RenderRequest(req *wire.Request, st *State, pol Policy) *Result {
	res := &Result{Unchanged: true, Request: req}
	if req == nil {
		return res
	}
	res.Body = req.Raw()
	if st.Empty() {
		return res
	}
	v := analyse(req.Format, req.Messages, &pol)
	r := &renderer{v: v, st: st, pol: &pol, blocks: make([][]*wire.Block, len(v.msgs)),
		drop: make([]bool, len(v.msgs)), res: res, after: map[int][]*wire.Message{}, before: map[int][]*wire.Message{}}
	ranges := r.resolveChains()
	inRange := make([]bool, len(v.msgs))
	var chainKeys map[string]bool
	if len(ranges) > 0 {
		n := 0
		for _, cr := range ranges {
			n += len(cr.c.DroppedKeys)
		}
		chainKeys = make(map[string]bool, n)
	}
	for _, cr := range ranges {
		for i := cr.s + 1; i < cr.e; i++ {
			inRange[i] = true
		}
		for _, k := range cr.c.DroppedKeys {
			chainKeys[k] = true
		}
	}
	r.stubReplace(inRange, chainKeys)
	r.purgeErrors(inRange)
	r.placeSummaries(r.applyChains(ranges, chainKeys))
	out, changed := r.assemble()
	out, swept := r.sweep(out)
	changed = changed || swept
	if !changed {
		res.Diagnostics = r.freshDiags()
		return res
	}
	if req.Format == wire.Anthropic {
		out = mergeAdjacent(out)
	}
	nreq := req.WithMessages(out)
	if err := wire.Validate(nreq); err != nil {
		if wire.Validate(req) == nil {
			res.Fallback = err.Error()
			res.Diagnostics = r.freshDiags()
			return res
		}
	}
	res.Unchanged = false
	res.Request = nreq
	res.BytesBefore = len(req.Raw())
	res.BytesAfter = outSize(req, out)
	res.Diagnostics = r.freshDiags()
	return res
}

func (r *renderer) freshDiags() []Diagnostic {
	var out []Diagnostic
	seen := map[string]bool{}
	for _, d := range r.diags {
		k := d.seenKey()
		if r.st.Diagnostics.Seen[k] || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}

// assemble builds the output message list.
func (r *renderer) assemble() ([]*wire.Message, bool) {
	changed := len(r.tail) > 0
	out := make([]*wire.Message, 0, len(r.v.msgs)+len(r.after)+len(r.before)+len(r.tail))
	for i, m := range r.v.msgs {
		if ins := r.before[i]; len(ins) > 0 {
			out = append(out, ins...)
			changed = true
		}
		if !r.drop[i] {
			if r.blocks[i] != nil && !sameBlocks(r.blocks[i], m.Blocks) {
				out = append(out, m.WithBlocks(r.blocks[i]))
				changed = true
			} else {
				out = append(out, m)
			}
		} else {
			changed = true
		}
		if ins := r.after[i]; len(ins) > 0 {
			out = append(out, ins...)
			changed = true
		}
	}
	out = append(out, r.tail...)
	return out, changed
}

func sameBlocks(a, b []*wire.Block) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// mergeAdjacent merges consecutive messages of the same role (Anthropic alternation).
func mergeAdjacent(msgs []*wire.Message) []*wire.Message {
	out := make([]*wire.Message, 0, len(msgs))
	for _, m := range msgs {
		if len(out) > 0 && out[len(out)-1].Role == m.Role && (m.Role == wire.RoleUser || m.Role == wire.RoleAssistant) {
			prev := out[len(out)-1]
			nb := append(append([]*wire.Block(nil), prev.Blocks...), m.Blocks...)
			out[len(out)-1] = prev.WithBlocks(nb)
			continue
		}
		out = append(out, m)
	}
	return out
}

// outSize estimates the serialized size of req with messages out (to size the output once).
func outSize(req *wire.Request, out []*wire.Message) int {
	n := len(req.Raw()) + 64
	for _, m := range req.Messages {
		n -= len(m.Bytes()) + 1
	}
	for _, m := range out {
		n += len(m.Bytes()) + 1
	}
	if n < 64 {
		n = 64
	}
	return n
}
