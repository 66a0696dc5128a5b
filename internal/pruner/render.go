package pruner

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	"github.com/condense-dev/condense/internal/identity"
	"github.com/condense-dev/condense/internal/wire"
)

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

// stubReplace is phase 1: summarized results outside chain ranges become stubs, except protected
// records and recovery results not in State.GraceOver. A record with no summary of its own
// (backfilled) is stubbed only when an applied chain lists it (chainKeys).
func (r *renderer) stubReplace(inRange []bool, chainKeys map[string]bool) {
	st, pol := r.st, r.pol
	for _, res := range r.v.results {
		if res.call == nil || inRange[res.msg] || len(st.byID[res.b.ID]) == 0 {
			continue
		}
		key := res.occKey()
		e, ok := st.stubOf(key)
		if !ok {
			continue
		}
		rk, rec := e.rk, e.rec
		if pol.IsProtected(rec.Tool, rec.Path, rec.HasPath) {
			continue
		}
		if res.call.b.Name == QueryToolName && !st.GraceOver[key] {
			continue
		}
		if !rec.Spilled {
			si := e.si
			if si < 0 && !chainKeys[key] && !chainKeys[rk] {
				continue // nothing in the request names its ref
			}
			if si >= 0 {
				if r.stubAt == nil {
					r.stubAt = make([]stubPos, len(st.Summaries))
				}
				p := r.stubAt[si]
				if !p.seen {
					p = stubPos{seen: true, own: -1, any: res.call.msg}
				}
				if rk == key && p.own < 0 {
					p.own = res.call.msg
				}
				r.stubAt[si] = p
			}
		}
		text := e.text
		if rec.Spilled {
			r.res.Stats.SpillStubs++
		} else {
			r.res.Stats.Stubbed++
		}
		if res.obs != nil {
			r.stubObservation(res, e)
			continue
		}
		nb := res.b.WithResultText(text)
		if nb.CacheControl == nil {
			if cc := innerCC(res.b); cc != nil {
				nb = nb.WithCacheControl(cc)
				r.res.Stats.CacheMarkersMoved++
			}
		}
		r.blk(res.msg)[res.blk] = nb
	}
}

// stubObservation replaces an observation's text block with its stub, framed by the
// observation's pattern (the block's cache_control marker kept).
func (r *renderer) stubObservation(res *result, e stubEntry) {
	stub := ObservationStubText(e.ref)
	if e.rec.Spilled {
		stub = ObservationSpillStubText(e.rec.Tool, e.ref, e.rec.Bytes, e.rec.Preview)
	}
	old := r.v.msgs[res.msg].Blocks[res.blk]
	nb := textBlock(r.v.f, old.IsStringForm(), res.obs.frame(stub))
	if old.CacheControl != nil {
		nb = nb.WithCacheControl(old.CacheControl)
	}
	r.blk(res.msg)[res.blk] = nb
}

// innerCC returns the last cache_control marker inside a tool result's content.
func innerCC(b *wire.Block) []byte {
	var cc []byte
	for _, c := range b.Content {
		if c.CacheControl != nil {
			cc = c.CacheControl
		}
	}
	return cc
}

// blockCC returns a block's own or inner marker.
func blockCC(b *wire.Block) []byte {
	if b.CacheControl != nil {
		return b.CacheControl
	}
	return innerCC(b)
}

// purgeErrors is phase 2: it replaces the arguments of every errored call listed in State.Purged
// (by occurrence key, so each error pairs with its own call).
func (r *renderer) purgeErrors(inRange []bool) {
	if !r.pol.PurgeErrors.Enabled || len(r.st.Purged) == 0 {
		return
	}
	for _, c := range r.v.calls {
		if c.res == nil || c.res.obs != nil || !c.res.b.IsError || inRange[c.msg] || !r.st.Purged[c.res.occKey()] {
			continue
		}
		size := utf16Len(compactJSON(c.b.Input))
		nb := c.b.WithInput(PurgedArgs(size))
		if nb == c.b {
			continue // a call whose input cannot be rewritten (a Responses local_shell_call)
		}
		r.blk(c.msg)[c.blk] = nb
		r.res.Stats.Purged++
	}
}

// acceptedRange is a chain entry resolved to message indices.
type acceptedRange struct {
	c    *Chain
	s, e int
}

// resolveChains resolves chain entries to ranges, failing closed (reference §10.5 steps 2-3).
func (r *renderer) resolveChains() []acceptedRange {
	if !r.pol.Chain.Enabled || len(r.st.Chains) == 0 {
		return nil
	}
	v := r.v
	var finals []int
	for _, ai := range v.assistants {
		if !v.toolUsing(ai) {
			finals = append(finals, ai)
		}
	}
	pIdx, fIdx := v.locator(v.prompts), v.locator(finals)
	var resolved []acceptedRange
	var present map[string]bool // tool-call and tool-result ids of the request, built on demand
	var keys map[string]bool    // occurrence keys of its paired results, built on demand
	for _, c := range r.st.Chains {
		s, e := pIdx.resolve(c.Start), fIdx.resolve(c.Final)
		if s < 0 || e < 0 || s >= e {
			if present == nil {
				present = v.toolIDs()
			}
			// Is a recorded occurrence still present? Match by occurrence key when the entry has keys
			// (ids restart per response, see docs/engine.md), by bare id otherwise.
			held := anyIn(c.DroppedIDs, present)
			if held && len(c.DroppedKeys) > 0 {
				if keys == nil {
					keys = v.resultKeys()
				}
				held = anyIn(c.DroppedKeys, keys)
			}
			if !held && (s < 0 || e < 0) {
				// The range is gone (docs/engine.md "Diagnostics on the corpus"): retired silently.
				r.res.Stats.AbsentRanges++
				continue
			}
			r.diags = append(r.diags, Diagnostic{Kind: DiagUnresolvedRange, Key: c.Block,
				Detail: "blockId=" + c.Block + " start=" + fpString(c.Start) + " final=" + fpString(c.Final) +
					" (start: " + pIdx.explain(c.Start, s) + "; final: " + fIdx.explain(c.Final, e) + "; " +
					strconv.Itoa(countIn(c.DroppedIDs, present)) + "/" + strconv.Itoa(len(c.DroppedIDs)) + " recorded calls present)"})
			continue
		}
		if n, ok := v.rangeHoldsChain(s, e, c); !ok {
			// Both boundaries matched but the span holds none of the chain's recorded occurrences
			// (repeated messages after a compaction): fail closed.
			r.diags = append(r.diags, Diagnostic{Kind: DiagUnresolvedRange, Key: c.Block,
				Detail: "blockId=" + c.Block + " start=" + fpString(c.Start) + " final=" + fpString(c.Final) +
					" resolved to messages " + strconv.Itoa(s) + ".." + strconv.Itoa(e) + " holding none of its " +
					strconv.Itoa(n) + " tool call(s)"})
			continue
		}
		resolved = append(resolved, acceptedRange{c: c, s: s, e: e})
	}
	var out []acceptedRange
	claimed := map[int]bool{}
	for _, a := range resolved {
		nested := ""
		for _, o := range resolved {
			if o.c != a.c && a.s > o.s && a.s < o.e {
				nested = o.c.Block
				break
			}
		}
		if nested != "" {
			r.diags = append(r.diags, Diagnostic{Kind: DiagUnresolvedRange, Key: "overlap:" + a.c.Block,
				Detail: "blockId=" + a.c.Block + " skipped: range nests inside blockId=" + nested})
			continue
		}
		if claimed[a.s] {
			r.diags = append(r.diags, Diagnostic{Kind: DiagUnresolvedRange, Key: "overlap:" + a.c.Block,
				Detail: "blockId=" + a.c.Block + " skipped: range duplicates startIndex=" + strconv.Itoa(a.s) + " already claimed"})
			continue
		}
		claimed[a.s] = true
		out = append(out, a)
	}
	return out
}

// resultKeys returns the occurrence keys of the transcript's paired tool results.
func (v *analysis) resultKeys() map[string]bool {
	keys := make(map[string]bool, len(v.results))
	for _, res := range v.results {
		if k := res.occKey(); k != "" {
			keys[k] = true
		}
	}
	return keys
}

// toolIDs returns the ids of every tool call and tool result of the transcript.
func (v *analysis) toolIDs() map[string]bool {
	ids := make(map[string]bool, len(v.calls)+len(v.results))
	for _, c := range v.calls {
		ids[c.b.ID] = true
	}
	for _, r := range v.results {
		if r.b.ID != "" {
			ids[r.b.ID] = true
		}
	}
	return ids
}

// rangeHoldsChain reports whether the span strictly between messages s and e holds a paired
// tool result among c.DroppedKeys (bare ids only when the entry has no keys; neither: true).
// n is the number of recorded items compared, for the diagnostic.
func (v *analysis) rangeHoldsChain(s, e int, c *Chain) (n int, ok bool) {
	if len(c.DroppedKeys) == 0 {
		return len(c.DroppedIDs), len(c.DroppedIDs) == 0 || v.rangeHolds(s, e, c.DroppedIDs)
	}
	for i := s + 1; i < e; i++ {
		sp := v.resultSpan[i]
		for _, res := range v.results[sp.lo:sp.hi] {
			k := res.occKey()
			if k == "" {
				continue
			}
			for _, dk := range c.DroppedKeys {
				if k == dk {
					return len(c.DroppedKeys), true
				}
			}
		}
	}
	return len(c.DroppedKeys), false
}

// rangeHolds reports whether a tool call or result strictly between messages s and e has one
// of ids. On the recorded range the first call matches ids[0], so this is O(1) in practice.
func (v *analysis) rangeHolds(s, e int, ids []string) bool {
	for i := s + 1; i < e; i++ {
		for _, b := range v.msgs[i].Blocks {
			if b.Kind != wire.KindToolUse && b.Kind != wire.KindToolResult {
				continue
			}
			for _, id := range ids {
				if b.ID == id {
					return true
				}
			}
		}
	}
	return false
}

// anyIn reports whether one of ids is in set.
func anyIn(ids []string, set map[string]bool) bool {
	return countIn(ids, set) > 0
}

// countIn counts the ids in set.
func countIn(ids []string, set map[string]bool) int {
	n := 0
	for _, id := range ids {
		if set[id] {
			n++
		}
	}
	return n
}

// explain says how fp resolved (at: the resolved index or -1) for an unresolved-range
// detail: "message i", "no match", or "n messages share its hash, none at ordinal k".
func (l *locator) explain(fp Fingerprint, at int) string {
	if at >= 0 {
		return "message " + strconv.Itoa(at)
	}
	n := 0
	for _, j := range l.idx {
		if identity.MessageHash(l.v.msgs[j]) == fp.Hash {
			n++
		}
	}
	if n == 0 {
		return "no match"
	}
	return strconv.Itoa(n) + " message(s) share its hash, none unique at ordinal " + strconv.Itoa(fp.Ordinal)
}

// bodyOf returns a chain's body: its range summary or the per-batch summaries it covers.
func (r *renderer) bodyOf(c *Chain) string {
	if c.RangeSummary != "" {
		return c.RangeSummary
	}
	keys := make(map[string]bool, len(c.DroppedKeys))
	for _, k := range c.DroppedKeys {
		keys[k] = true
	}
	var parts []string
	seen := map[string]bool{}
	for _, s := range r.st.summaryCovering(keys) {
		if !seen[s.Text] {
			seen[s.Text] = true
			parts = append(parts, s.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// applyChains is phase 3: it drops chain interiors (assistant turns and tool results), inserts
// the <compressed-chain> synthetic after the opening prompt and strips the final thinking. It
// returns the keys whose per-batch summaries are suppressed (dropped plus the ranges' keys).
func (r *renderer) applyChains(ranges []acceptedRange, dropped map[string]bool) map[string]bool {
	if len(ranges) == 0 {
		return nil
	}
	v := r.v
	suppressed := dropped
	recorded, actual := map[string]bool{}, map[string]bool{} // the dropped call ids, per range
	for _, a := range ranges {
		c := a.c
		prot := make(map[string]bool, len(c.ProtectedIDs))
		for _, id := range c.ProtectedIDs {
			prot[id] = true
		}
		var protKey map[string]bool
		if len(c.ProtectedKeys) > 0 {
			protKey = make(map[string]bool, len(c.ProtectedKeys))
			for _, k := range c.ProtectedKeys {
				protKey[k] = true
			}
		}
		clear(recorded)
		clear(actual)
		for _, id := range c.DroppedIDs {
			recorded[id] = true
		}
		var protected strings.Builder
		var cc []byte
		for i := a.s + 1; i < a.e; i++ {
			m := v.msgs[i]
			switch v.cls[i] {
			case clsAssistant:
				for _, c := range v.callsOf(i) {
					actual[c.b.ID] = true
				}
				for _, b := range m.Blocks {
					if b.CacheControl != nil {
						cc = b.CacheControl
					}
				}
				r.drop[i] = true
				r.res.Stats.Dropped++
			case clsResults:
				var keep []*wire.Block
				for j, b := range r.blk(i) {
					// Phase 1 never touches in-range results, so block j is the original.
					res := v.resultAt(i, j)
					if res == nil {
						keep = append(keep, b)
						continue
					}
					rb := res.b // an observation's synthetic result stands for its text block
					actual[rb.ID] = true
					if x := blockCC(b); x != nil {
						cc = x
					}
					if !prot[rb.ID] || protKey != nil && !protKey[res.occKey()] {
						continue
					}
					name := rb.Name
					if name == "" {
						name = "unknown"
					}
					protected.WriteString("\n\n<protected-output tool=\"" + name + "\">\n" + rb.ResultText() + "\n</protected-output>")
				}
				if len(keep) == 0 || v.f != wire.Anthropic {
					r.drop[i] = true
					r.res.Stats.Dropped++
				} else {
					r.blocks[i] = keep
				}
			}
		}
		if v.f == wire.Responses {
			r.dropAnswersIn(a)
		}
		if !sameSet(recorded, actual) {
			r.diags = append(r.diags, Diagnostic{Kind: DiagRangeIDMismatch, Key: c.Block,
				Detail: "blockId=" + c.Block + " recorded=" + strconv.Itoa(len(recorded)) + " actual=" + strconv.Itoa(len(actual))})
			// The range wins: suppress summaries of what it actually drops.
			for _, res := range v.results {
				if res.msg > a.s && res.msg < a.e {
					if k := res.occKey(); k != "" {
						suppressed[k] = true
					}
				}
			}
		}
		if r.pol.Chain.StripFinalAssistantThinking {
			var keep []*wire.Block
			var tcc []byte
			for _, b := range r.blk(a.e) {
				if b.Kind == wire.KindThinking || b.Kind == wire.KindRedactedThinking {
					r.res.Stats.ThinkingStripped++
					if b.CacheControl != nil {
						tcc = b.CacheControl
					}
					continue
				}
				keep = append(keep, b)
			}
			if len(keep) > 0 {
				if tcc != nil && keep[len(keep)-1].CacheControl == nil {
					keep[len(keep)-1] = keep[len(keep)-1].WithCacheControl(tcc)
					r.res.Stats.CacheMarkersMoved++
				}
				r.blocks[a.e] = keep
			}
		}
		body := substituteBlocks(r.bodyOf(c), c.Block, func(id string) (string, bool) {
			for _, o := range r.st.Chains {
				if o.Block == id {
					return r.bodyOf(o), true
				}
			}
			return "", false
		})
		text := "<compressed-chain id=\"" + c.Block + "\" tools=\"" + strings.Join(c.ToolRefs, ",") + "\">\n" +
			body + protected.String() + "\n</compressed-chain>"
		if cc != nil {
			r.res.Stats.CacheMarkersMoved++
		}
		if v.f == wire.Anthropic {
			tb := wire.NewTextBlock(v.f, text)
			if cc != nil {
				tb = tb.WithCacheControl(cc)
			}
			r.blocks[a.s] = append(r.blk(a.s), tb)
		} else {
			m := wire.NewTextMessage(v.f, wire.RoleUser, text)
			if cc != nil {
				m = m.WithBlocks([]*wire.Block{wire.NewTextBlock(v.f, text).WithCacheControl(cc)})
			}
			r.after[a.s] = append(r.after[a.s], m)
		}
		r.res.Stats.Chains++
	}
	return suppressed
}

// dropAnswersIn drops, inside a compressed Responses range, the items without role that
// answer a model-produced item the range dropped by its call_id (a computer_call_output, a
// tool_search_output, …): an answer left without its call is rejected.
func (r *renderer) dropAnswersIn(a acceptedRange) {
	v := r.v
	var ids map[string]bool
	for i := a.s + 1; i < a.e; i++ {
		if v.cls[i] != clsAssistant {
			continue
		}
		for _, b := range v.msgs[i].Blocks {
			if b.ID != "" {
				if ids == nil {
					ids = map[string]bool{}
				}
				ids[b.ID] = true
			}
		}
	}
	for i := a.s + 1; i < a.e && ids != nil; i++ {
		if m := v.msgs[i]; v.cls[i] == clsOther && m.Role == "" && len(m.Blocks) == 1 && ids[m.Blocks[0].ID] && !r.drop[i] {
			r.drop[i] = true
			r.res.Stats.Dropped++
		}
	}
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// placeSummaries shows each per-batch summary with a result stubbed by phase 1 right after its
// anchor assistant's turn, or after its first stubbed result's turn when the anchor does not
// resolve, comes earlier or has no host yet (docs/engine.md).
func (r *renderer) placeSummaries(suppressed map[string]bool) {
	if len(r.st.Summaries) == 0 {
		return
	}
	v := r.v
	aIdx := v.locator(v.assistants)
	var hostBlocks map[int][]*wire.Block // by host message index (Anthropic)
	var hosts []int
	for i, s := range r.st.Summaries {
		hidden := false
		for _, k := range s.Keys {
			if suppressed[k] {
				hidden = true
				break
			}
		}
		if hidden {
			r.res.Stats.Suppressed++
			continue
		}
		var pos stubPos
		if r.stubAt != nil {
			pos = r.stubAt[i]
		}
		if !pos.seen {
			continue // its results are gone, verbatim or in a range: it stands in for nothing
		}
		// Both kinds of anchor (the batch's turn; the flush's last assistant in older states)
		// lie at or after the batch's own results: an anchor before them was taken over by a
		// repeated message (ordinals count only the messages still present).
		h := -1
		if a := aIdx.resolve(s.Anchor); a >= 0 && a >= pos.own {
			h = r.hostAfter(a)
		}
		if h < 0 {
			at := pos.own
			if at < 0 {
				at = pos.any
			}
			h = r.hostAfter(at)
		}
		if v.f == wire.Anthropic {
			if hostBlocks == nil {
				hostBlocks = map[int][]*wire.Block{}
			}
			if hostBlocks[h] == nil {
				hosts = append(hosts, h)
			}
			hostBlocks[h] = append(hostBlocks[h], s.shownIn(v.f).b)
		} else {
			m := s.shownIn(v.f).m
			if h >= len(v.msgs) {
				r.tail = append(r.tail, m)
			} else {
				r.before[h] = append(r.before[h], m)
			}
		}
		r.res.Stats.Summaries++
	}
	for _, h := range hosts {
		bs := r.blk(h)
		lead := 0
		for lead < len(bs) && bs[lead].Kind == wire.KindToolResult {
			lead++
		}
		if v.cls[h] == clsPrompt && len(bs) > len(v.msgs[h].Blocks) || v.isObservation(h) {
			lead = len(bs) // a prompt holding a synthetic, an observation: append after it
		}
		nb := make([]*wire.Block, 0, len(bs)+len(hostBlocks[h]))
		nb = append(nb, bs[:lead]...)
		nb = append(nb, hostBlocks[h]...)
		nb = append(nb, bs[lead:]...)
		r.blocks[h] = nb
	}
}

// hostAfter returns the message a summary shown after assistant a's turn goes into, or -1.
// Anthropic: the next user message (the nearest surviving earlier one if a chain dropped it);
// OpenAI, Responses: the first message after a's tool messages (len(msgs) at the end).
func (r *renderer) hostAfter(a int) int {
	v := r.v
	h := a + 1
	if v.f != wire.Anthropic {
		for h < len(v.msgs) && v.cls[h] == clsResults {
			h++
		}
		return h
	}
	for h < len(v.msgs) && v.msgs[h].Role != wire.RoleUser {
		h++
	}
	if h >= len(v.msgs) {
		return -1
	}
	for h >= 0 && (r.drop[h] || v.msgs[h].Role != wire.RoleUser) {
		h--
	}
	return h
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

// sweep is phase 4: a per-turn open set of tool-call ids; every message that is neither an
// assistant turn nor a tool result (and the non-result part of a mixed message) is a barrier
// (Responses: only an assistant turn). Results no open call answers are removed.
func (r *renderer) sweep(msgs []*wire.Message) ([]*wire.Message, bool) {
	open := map[string]bool{}
	var swept []string
	var out []*wire.Message
	for i, m := range msgs {
		if m.Role == wire.RoleAssistant {
			clear(open)
			for _, b := range m.Blocks {
				if b.Kind == wire.KindToolUse && b.ID != "" {
					open[b.ID] = true
				}
			}
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if !hasToolResult(m) {
			if r.v.f != wire.Responses {
				clear(open) // Responses outputs may follow other items (only the call must precede them)
			}
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		// keep is made at the first dropped block (almost every message keeps all of its
		// blocks, and this runs over every message on every request).
		var keep []*wire.Block
		var cc []byte
		barrier := false
		dropped := false
		for j, b := range m.Blocks {
			if b.Kind != wire.KindToolResult {
				barrier = true
			} else if open[b.ID] {
				delete(open, b.ID)
			} else {
				if !dropped {
					keep = append(make([]*wire.Block, 0, len(m.Blocks)-1), m.Blocks[:j]...)
					dropped = true
				}
				swept = append(swept, b.ID)
				if x := blockCC(b); x != nil {
					cc = x
				}
				continue
			}
			if dropped {
				keep = append(keep, b)
			}
		}
		if barrier {
			clear(open)
		}
		if !dropped {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil {
			out = append(make([]*wire.Message, 0, len(msgs)), msgs[:i]...)
		}
		if cc != nil {
			if len(keep) > 0 && keep[len(keep)-1].CacheControl == nil {
				keep[len(keep)-1] = keep[len(keep)-1].WithCacheControl(cc)
				r.res.Stats.CacheMarkersMoved++
			} else if len(out) > 0 {
				prev := out[len(out)-1]
				pb := append([]*wire.Block(nil), prev.Blocks...)
				if len(pb) > 0 && pb[len(pb)-1].CacheControl == nil {
					pb[len(pb)-1] = pb[len(pb)-1].WithCacheControl(cc)
					out[len(out)-1] = prev.WithBlocks(pb)
					r.res.Stats.CacheMarkersMoved++
				}
			}
		}
		if len(keep) > 0 {
			out = append(out, m.WithBlocks(keep))
		}
	}
	if len(swept) == 0 {
		return msgs, false
	}
	r.res.Stats.Swept += len(swept)
	sort.Strings(swept)
	sum := sha256.Sum256([]byte(strings.Join(swept, ",")))
	detail := "swept " + strconv.Itoa(len(swept)) + " orphan toolResult(s): "
	if len(swept) > 5 {
		detail += strings.Join(swept[:5], ", ") + " ... +" + strconv.Itoa(len(swept)-5) + " more"
	} else {
		detail += strings.Join(swept, ", ")
	}
	r.diags = append(r.diags, Diagnostic{Kind: DiagOrphanSweep, Key: hex.EncodeToString(sum[:])[:16], Detail: detail})
	return out, true
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
