package pruner

import "github.com/condense-dev/condense/internal/wire"

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
