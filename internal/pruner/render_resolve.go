package pruner

import (
	"strconv"

	"github.com/condense-dev/condense/internal/identity"
	"github.com/condense-dev/condense/internal/wire"
)

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
