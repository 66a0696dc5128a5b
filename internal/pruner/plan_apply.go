package pruner

import "strconv"

// usable reports whether summarizer output can be used (non-blank).
func usable(out string, ok bool) bool { return ok && jsTrim(out) != "" }

// Apply turns summarizer outputs (batch ID -> labelled text) into the next state without
// modifying the plan's: it records spills and aliases, commits batches in order up to the first
// missing or blank output, then the chain compressions (docs/engine.md, "Flush planning").
func (p *Plan) Apply(outputs map[string]string) (*State, error) {
	known := make(map[string]bool, len(p.Batches))
	for _, b := range p.Batches {
		known[b.ID] = true
	}
	for id := range outputs {
		if !known[id] {
			return nil, &UnknownBatchError{ID: id}
		}
	}
	n := p.st.clone()
	seed := func(r *Record) {
		if _, ok := n.Hashes[r.Hash]; !ok && !r.Backfilled {
			n.Hashes[r.Hash] = r.Key
		}
	}
	for _, r := range p.spills {
		n.Records[r.Key] = r
		seed(r)
		n.Stats.Spilled++
	}
	for _, a := range p.salias {
		n.Aliases[a[0]] = a[1]
		n.Stats.Deduped++
	}
	processed, stopped := 0, false
	var last *planItem
	calls, raw, sumChars := 0, 0, 0
	outcome := ""
	rank := map[string]int{"skipped-trivial": 1, "skipped-deduped": 2, "skipped-oversized": 3, "summarized": 4}
	setOutcome := func(o string) {
		if rank[o] > rank[outcome] {
			outcome = o
		}
	}
	for _, it := range p.items {
		for _, a := range it.aliases {
			n.Aliases[a[0]] = a[1]
			n.Stats.Deduped++
		}
		if stopped {
			continue
		}
		switch it.kind {
		case itemTrivial:
			for _, pc := range it.calls {
				n.Skipped[pc.rec.Key] = true
			}
			n.Stats.SkippedTrivial++
			setOutcome("skipped-trivial")
		case itemDeduped:
			setOutcome("skipped-deduped")
		case itemSummarize:
			out, ok := outputs[it.batch.ID]
			if !usable(out, ok) {
				stopped = true
				continue
			}
			n.Stats.SummarizerCalls++
			refs := make([]string, len(it.calls))
			tools := make([]string, len(it.calls))
			for i, pc := range it.calls {
				refs[i] = "t" + strconv.Itoa(n.NextRef)
				n.NextRef++
				tools[i] = pc.rec.Tool
			}
			footer := SummaryFooter(refs)
			if it.observes() {
				footer = ObservationSummaryFooter(refs)
			}
			text := DecorateRefs(out, refs, tools) + footer
			tl := utf16Len(text)
			if tl > it.rawChars {
				for _, pc := range it.calls {
					n.Skipped[pc.rec.Key] = true
				}
				n.Stats.SkippedOversized++
				setOutcome("skipped-oversized")
				break
			}
			keys := make([]string, len(it.calls))
			for i, pc := range it.calls {
				r := *pc.rec
				r.Ref = refs[i]
				n.Records[r.Key] = &r
				seed(&r)
				keys[i] = r.Key
			}
			// Anchored on the batch's own last assistant turn: it is in every transcript that
			// holds the summary's last result, so the stubs never show without the summary.
			sm := &Summary{ID: "s" + strconv.Itoa(n.NextSummary), Keys: keys, Refs: refs, Tools: tools, Text: text,
				Anchor: it.asstFP, Turn: it.turn}
			n.NextSummary++
			for _, k := range keys {
				n.Records[k].Summary = sm.ID
			}
			n.Summaries = append(n.Summaries, sm)
			n.Stats.BatchesSummarized++
			n.Stats.ResultsSummarized += int64(len(keys))
			n.Stats.RawChars += int64(it.rawChars)
			n.Stats.SummaryChars += int64(tl)
			sumChars += tl
			setOutcome("summarized")
		}
		processed++
		last = it
		calls += it.allCalls
		raw += it.allChars
	}
	if last != nil {
		n.Frontier = &Frontier{Assistant: last.asstFP, LastKey: last.lastKey, LastTool: last.lastTool,
			Turn: last.turn, Batches: processed, Calls: calls, RawChars: raw, SummaryChars: sumChars,
			Outcome: outcome, At: p.now}
	}
	n.rebuild()
	for _, t := range p.chains {
		entry := *t.ch
		entry.Block = "b" + strconv.Itoa(n.NextBlock)
		n.NextBlock++
		if t.fusion != nil {
			if out, ok := outputs[t.fusion.ID]; usable(out, ok) {
				entry.RangeSummary = out
				n.Stats.RangesSummarized++
				n.Stats.SummarizerCalls++
			}
		}
		for _, r := range t.backfill {
			rc := *r
			rc.Ref = "t" + strconv.Itoa(n.NextRef)
			n.NextRef++
			n.Records[rc.Key] = &rc
		}
		if len(t.backfill) > 0 {
			n.rebuild()
			entry.ToolRefs = n.toolRefs(t.keys)
		}
		if t.members != nil {
			recs := make([]*Record, 0, len(t.members))
			for _, k := range t.members {
				if r := n.Records[k]; r != nil {
					recs = append(recs, r)
				}
			}
			entry.ToolRefs = n.toolRefs(t.keys)
			entry.RangeSummary = deterministicBody(recs, entry.ToolRefs, t.turns)
			entry.BodySource = "deterministic"
		}
		n.Chains = append(n.Chains, &entry)
		n.Stats.ChainsCompressed++
	}
	for _, k := range p.purge {
		n.Purged[k] = true
	}
	for _, k := range p.graceOver {
		if n.IsSummarized(k) {
			n.GraceOver[k] = true
		}
	}
	if processed > 0 || len(p.chains) > 0 || len(p.spills) > 0 {
		n.Stats.Flushes++
	}
	n.rebuild()
	out, _ := n.WithDiagnostics(p.Diagnostics)
	return out, nil
}
