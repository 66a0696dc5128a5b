package pruner

import "github.com/condense-dev/condense/internal/wire"

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
