package pruner

import "strconv"

// planChains selects eligible closed chains (rolling window, recovery grace, pending calls) and
// plans their compression.
func (p *Plan) planChains(v *analysis) {
	st, pol := p.st, &p.pol
	chains := v.detectChains(pol)
	if len(chains) == 0 {
		return
	}
	var finals []int
	for _, ai := range v.assistants {
		if !v.toolUsing(ai) {
			finals = append(finals, ai)
		}
	}
	pfp := map[int]Fingerprint{}
	for i, fp := range v.fingerprints(v.prompts) {
		pfp[v.prompts[i]] = fp
	}
	ffp := map[int]Fingerprint{}
	for i, fp := range v.fingerprints(finals) {
		ffp[finals[i]] = fp
	}
	done := compressedChains(st.Chains)
	var cands []*chainRange
	for _, ch := range chains {
		if ch.end < 0 || len(ch.ids) == 0 || done.has(ch, pfp[ch.start], ffp[ch.end]) {
			continue
		}
		cands = append(cands, ch)
	}
	k := pol.Chain.RollingWindow
	if k < 0 {
		k = 0
	}
	n := len(cands) - k
	if n <= 0 {
		return
	}
	grace := v.graceKeys(pol.RecoveryGraceTurns)
	pending := map[string]bool{}
	for _, it := range p.items {
		for _, pc := range it.calls {
			pending[pc.rec.Key] = true
		}
		for _, a := range it.aliases {
			pending[a[0]] = true
		}
	}
	spilled := map[string]*Record{}
	for _, r := range p.spills {
		spilled[r.Key] = r
	}
	for _, ch := range cands[:n] {
		inGrace, isPending := false, false
		for _, key := range ch.keys {
			inGrace = inGrace || grace[key]
			isPending = isPending || pending[key]
		}
		if inGrace {
			continue
		}
		if isPending {
			p.Followup = true
			continue
		}
		entry := &Chain{Start: pfp[ch.start], Final: ffp[ch.end], DroppedIDs: ch.ids,
			DroppedKeys: ch.keys, ProtectedIDs: ch.protected, ProtectedKeys: ch.protKeys, CompressedAt: p.now}
		task := &chainTask{ch: entry, keys: ch.keys, turns: ch.turns}
		keyset := make(map[string]bool, len(ch.keys))
		for _, k := range ch.keys {
			keyset[k] = true
		}
		prot := map[string]bool{}
		for _, k := range ch.protKeys {
			prot[k] = true
		}
		if covering := st.summaryCovering(keyset); len(covering) > 0 {
			// The range drops every result in it: a member no record covers (its batch was
			// skipped as trivial or oversized) is backfilled, so context_tree_query still
			// returns it and the synthetic's tools attribute lists it.
			fresh := map[string]bool{}
			for _, c := range ch.calls {
				if c.res == nil {
					continue
				}
				key := c.res.occKey()
				if prot[key] || fresh[key] || st.IsSummarized(key) || spilled[key] != nil {
					continue
				}
				fresh[key] = true
				task.backfill = append(task.backfill, p.backfillRecord(c))
			}
			entry.ToolRefs = st.toolRefs(ch.keys)
			var parts []string
			seen := map[string]bool{}
			for _, s := range covering {
				if !seen[s.Text] {
					seen[s.Text] = true
					parts = append(parts, s.Text)
				}
			}
			if pol.Chain.FuseRangeSummary && len(parts) >= 2 {
				b := Batch{ID: "range-" + strconv.Itoa(len(p.chains)+1), Kind: KindRangeFusion,
					System: RangeFusionSystemPrompt, Prompt: RangeFusionPrompt(parts), Keys: ch.keys, Parts: parts}
				for _, s := range parts {
					b.RawChars += utf16Len(s)
				}
				p.Batches = append(p.Batches, b)
				task.fusion = &p.Batches[len(p.Batches)-1]
			}
			p.chains = append(p.chains, task)
			continue
		}
		// Uncovered: compose a deterministic body from indexed and backfilled records.
		for _, c := range ch.calls {
			if c.res == nil || prot[c.res.occKey()] {
				continue
			}
			key := c.res.occKey()
			if _, ok := st.Records[key]; ok {
				task.members = append(task.members, key)
				continue
			}
			if r, ok := spilled[key]; ok {
				task.members = append(task.members, r.Key)
				continue
			}
			task.backfill = append(task.backfill, p.backfillRecord(c))
			task.members = append(task.members, key)
		}
		if len(task.members) == 0 {
			if len(ch.protected) < len(ch.ids) {
				p.Diagnostics = append(p.Diagnostics, Diagnostic{Kind: DiagBackfillEmpty,
					Key: fpString(entry.Start), Detail: "middles=" + strconv.Itoa(len(ch.ids))})
			}
			continue
		}
		p.chains = append(p.chains, task)
	}
}

// compressed says which detected chains stored entries already compress: an entry with the
// same span (start and final fingerprints) that shares one of the chain's occurrence keys;
// the span alone decides where keys are missing.
type compressed map[[2]Fingerprint][]*Chain

func compressedChains(chains []*Chain) compressed {
	d := compressed{}
	for _, c := range chains {
		sp := spanOf(c.Start, c.Final)
		d[sp] = append(d[sp], c)
	}
	return d
}

// has reports whether ch (with boundary fingerprints start and final) is compressed already.
func (d compressed) has(ch *chainRange, start, final Fingerprint) bool {
	for _, c := range d[spanOf(start, final)] {
		if len(c.DroppedKeys) == 0 || len(ch.keys) == 0 {
			return true
		}
		for _, k := range ch.keys {
			for _, dk := range c.DroppedKeys {
				if k == dk {
					return true
				}
			}
		}
	}
	return false
}

// spanOf is a chain's span key: its boundary fingerprints without the signatures.
func spanOf(start, final Fingerprint) [2]Fingerprint {
	start.Sig, final.Sig = 0, 0
	return [2]Fingerprint{start, final}
}

// backfillRecord indexes a chain member that no record covers (Turn -1, Backfilled; spilled
// when it reaches SpillThreshold) and adds its blobs. Its tN is allocated at Apply.
func (p *Plan) backfillRecord(c *call) *Record {
	path, hasPath := c.pathArg()
	text := c.res.b.ResultText()
	rec := &Record{Key: c.res.occKey(), ID: c.b.ID, Tool: c.b.Name, Path: path, HasPath: hasPath,
		ArgsExcerpt: argsExcerpt(c.b.Input), IsError: c.res.b.IsError, Chars: utf16Len(text),
		Bytes: len(text), Hash: ContentHash(c.b.Name, text), Turn: -1, Backfilled: true}
	if p.pol.SpillThreshold > 0 && rec.Chars >= p.pol.SpillThreshold {
		rec.Spilled = true
		rec.Preview = HeadPreview(text, p.pol.SpillPreviewChars)
	}
	p.addBlobs(rec, c.b.Input, text)
	return rec
}

func fpString(fp Fingerprint) string { return fp.Hash + ":" + strconv.Itoa(fp.Ordinal) }
