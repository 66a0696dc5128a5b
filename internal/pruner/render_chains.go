package pruner

import (
	"strconv"
	"strings"

	"github.com/condense-dev/condense/internal/wire"
)

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
