package pruner

import (
	"errors"
	"strconv"
	"time"

	"github.com/condense-dev/condense/internal/wire"
)

// itemKind classifies a captured batch after dedup and the trivial check.
type itemKind uint8

const (
	itemSummarize itemKind = iota
	itemTrivial
	itemDeduped
)

// pendingCall is a captured call with the record it becomes at Apply.
type pendingCall struct {
	c   *call
	rec *Record
}

// planItem is one captured batch in flush order.
type planItem struct {
	kind     itemKind
	batch    *Batch
	calls    []pendingCall // post-dedup calls
	aliases  [][2]string   // duplicate key, original key
	rawChars int           // post-dedup raw chars
	allChars int           // including deduped calls
	allCalls int
	lastKey  string
	lastTool string
	turn     int
	asstFP   Fingerprint
	group    int
}

// chainTask is one chain compression a flush performs.
type chainTask struct {
	ch       *Chain
	keys     []string
	fusion   *Batch
	backfill []*Record // fresh records for members no record covers (covered and uncovered chains)
	members  []string  // uncovered chains: keys of the records (indexed or fresh) composing the deterministic body
	turns    int
}

// Plan is everything a flush does except the summarizer calls. Run every Batch through a
// summarizer, write Blobs to the store, then call Apply with the outputs.
type Plan struct {
	// Batches are the summarizer calls to make (per-batch first, then range fusion).
	Batches []Batch
	// Blobs must be stored before the state returned by Apply is persisted (it references
	// them). Some may end up unreferenced when a batch fails; writing them is harmless.
	Blobs []Blob
	// Diagnostics found while planning (e.g. backfill-empty); Apply records them in the state.
	Diagnostics []Diagnostic
	// Followup is true when chain compression was deferred because the chain holds calls
	// summarized by this plan: plan again on the same transcript after committing.
	Followup bool
	// Captured counts calls captured (before dedup and trivial skip); Spilled counts spills.
	Captured, Spilled int

	st     *State
	pol    Policy
	now    time.Time
	items  []*planItem
	spills []*Record
	salias [][2]string
	chains []*chainTask
	// purge and graceOver are the flush-time decisions not yet in the state (State.Purged,
	// State.GraceOver; graceOver keys are kept at Apply only when indexed).
	purge, graceOver []string
}

// UnknownBatchError reports an output keyed by an id that is not a batch of the plan.
type UnknownBatchError struct {
	// ID is the unknown batch id.
	ID string
}

// Error implements error.
func (e *UnknownBatchError) Error() string {
	return "pruner: output for unknown batch " + strconv.Quote(e.ID)
}

// ErrNilRequest is returned for a nil request.
var ErrNilRequest = errors.New("pruner: nil request")

// Empty reports whether the plan does nothing at all.
func (p *Plan) Empty() bool {
	return len(p.items) == 0 && len(p.spills) == 0 && len(p.salias) == 0 && len(p.chains) == 0 && len(p.Diagnostics) == 0 &&
		len(p.purge) == 0 && len(p.graceOver) == 0
}

// PlanFlush captures every tool result of req not yet indexed or attempted, applies protection,
// spill, frontier trim, batching, dedup and the trivial skip, and plans chain compression.
// It never modifies st. now stamps chain entries and the frontier.
func PlanFlush(req *wire.Request, st *State, pol Policy, now time.Time) (*Plan, error) {
	if req == nil {
		return nil, ErrNilRequest
	}
	if st == nil {
		st = NewState()
	}
	v := analyse(req.Format, req.Messages, &pol)
	p := &Plan{st: st, pol: pol, now: now.UTC()}
	afps := v.fingerprints(v.assistants)
	fpOf := make(map[int]Fingerprint, len(afps))
	for i, ai := range v.assistants {
		fpOf[ai] = afps[i]
	}
	aloc := v.locator(v.assistants)
	taken := map[string]bool{}
	// Frontier position (fail open: unresolvable means no positional trim). Ordinals count
	// only the messages still present, so after a compaction or rewind a repeated turn can
	// take over the fingerprint: it is trusted only when its turn holds the frontier's call.
	fIdx := -1
	if st.Frontier != nil {
		fIdx = aloc.resolve(st.Frontier.Assistant)
		if fIdx >= 0 && !v.turnHolds(fIdx, st.Frontier.LastKey) {
			fIdx = -1
		}
	}
	var items []*planItem
	var cur *planItem
	promptsBefore := 0
	pi := 0
	for _, ai := range v.assistants {
		for pi < len(v.prompts) && v.prompts[pi] < ai {
			pi++
		}
		promptsBefore = pi
		if !v.toolUsing(ai) {
			continue
		}
		var calls []pendingCall
		for _, c := range v.callsOf(ai) {
			if c.res == nil {
				continue
			}
			key := c.res.occKey()
			if key == "" || taken[key] || st.IsSummarized(key) || st.Skipped[key] {
				continue
			}
			path, hasPath := c.pathArg()
			if pol.IsProtected(c.b.Name, path, hasPath) {
				continue
			}
			taken[key] = true
			text := c.res.b.ResultText()
			rec := &Record{Key: key, ID: c.b.ID, Tool: c.b.Name, Path: path, HasPath: hasPath,
				ArgsExcerpt: argsExcerpt(c.b.Input), IsError: c.res.b.IsError, Chars: utf16Len(text),
				Bytes: len(text), Hash: ContentHash(c.b.Name, text), Turn: v.turnOf[ai]}
			p.Captured++
			if pol.SpillThreshold > 0 && rec.Chars >= pol.SpillThreshold {
				if orig, ok := st.Hashes[rec.Hash]; pol.Dedup && ok && orig != key {
					p.salias = append(p.salias, [2]string{key, orig})
					continue
				}
				rec.Spilled = true
				rec.Preview = HeadPreview(text, pol.SpillPreviewChars)
				p.spills = append(p.spills, rec)
				p.Spilled++
				p.addBlobs(rec, c.b.Input, text)
				continue
			}
			calls = append(calls, pendingCall{c: c, rec: rec})
		}
		// Frontier trim.
		if fIdx >= 0 {
			if ai < fIdx {
				continue
			}
			if ai == fIdx {
				for i, pc := range calls {
					if pc.rec.Key == st.Frontier.LastKey {
						calls = calls[i+1:]
						break
					}
				}
			}
		}
		if len(calls) == 0 {
			continue
		}
		it := &planItem{calls: calls, turn: v.turnOf[ai], asstFP: fpOf[ai], group: promptsBefore}
		if pol.BatchingMode == BatchAgentMessage && cur != nil && cur.group == it.group {
			cur.calls = append(cur.calls, it.calls...)
			cur.turn, cur.asstFP = it.turn, it.asstFP
			continue
		}
		items = append(items, it)
		cur = it
	}
	for _, it := range items {
		p.finishItem(v, it)
	}
	p.items = items
	p.decide(v, taken)
	if pol.Chain.Enabled {
		p.planChains(v)
	}
	return p, nil
}

// decide makes the render decisions that change already-sent messages, so they change only
// with the state: errored calls to purge and recovery results whose grace has ended
// (indexed already, or taken by this plan). See docs/engine.md, "Decided at flush time".
func (p *Plan) decide(v *analysis, taken map[string]bool) {
	st, pol := p.st, &p.pol
	if pp := pol.PurgeErrors; pp.Enabled {
		for _, c := range v.calls {
			if c.res == nil || c.res.obs != nil || !c.res.b.IsError || len(v.assistants)-c.turn < pp.CooldownTurns {
				continue
			}
			if key := c.res.occKey(); key != "" && !st.Purged[key] && utf16Len(compactJSON(c.b.Input)) >= pp.MinArgChars {
				p.purge = append(p.purge, key)
			}
		}
	}
	grace := v.graceKeys(pol.RecoveryGraceTurns)
	for _, r := range v.results {
		if r.call == nil || r.call.b.Name != QueryToolName {
			continue
		}
		if key := r.occKey(); !grace[key] && !st.GraceOver[key] && (taken[key] || st.IsSummarized(key)) {
			p.graceOver = append(p.graceOver, key)
		}
	}
}

func (p *Plan) addBlobs(rec *Record, args []byte, text string) {
	p.Blobs = append(p.Blobs, Blob{Key: BlobKeyResult(rec.Key), Data: []byte(text)},
		Blob{Key: BlobKeyArgs(rec.Key), Data: append([]byte(nil), args...)})
}

// observes reports whether the batch holds a text observation: its summary then tells how to
// ask for the originals in text.
func (it *planItem) observes() bool {
	for _, pc := range it.calls {
		if pc.c.res.obs != nil {
			return true
		}
	}
	return false
}

// finishItem applies dedup and the trivial check and builds the summarizer batch.
func (p *Plan) finishItem(v *analysis, it *planItem) {
	st, pol := p.st, &p.pol
	var kept []pendingCall
	for _, pc := range it.calls {
		it.allCalls++
		it.allChars += pc.rec.Chars
		it.lastKey, it.lastTool = pc.rec.Key, pc.rec.Tool
		if orig, ok := st.Hashes[pc.rec.Hash]; pol.Dedup && ok && orig != pc.rec.Key {
			it.aliases = append(it.aliases, [2]string{pc.rec.Key, orig})
			continue
		}
		kept = append(kept, pc)
		it.rawChars += pc.rec.Chars
	}
	it.calls = kept
	switch {
	case len(kept) == 0:
		it.kind = itemDeduped
		return
	case it.rawChars < pol.MinBatchChars:
		it.kind = itemTrivial
		return
	}
	it.kind = itemSummarize
	// Frontier of a summarized batch is its last kept call.
	it.lastKey, it.lastTool = kept[len(kept)-1].rec.Key, kept[len(kept)-1].rec.Tool
	b := &Batch{ID: "batch-" + strconv.Itoa(len(p.Batches)+1), Kind: KindBatch, System: SummarizerSystemPrompt, RawChars: it.rawChars}
	var texts []string
	lastMsg := -1
	for i, pc := range kept {
		if pc.c.msg != lastMsg {
			lastMsg = pc.c.msg
			if t := assistantText(v.msgs[pc.c.msg]); t != "" {
				texts = append(texts, t)
			}
		}
		text := pc.c.res.b.ResultText()
		b.Keys = append(b.Keys, pc.rec.Key)
		b.Calls = append(b.Calls, BatchCall{Label: i + 1, Key: pc.rec.Key, Tool: pc.rec.Tool, Args: pc.c.b.Input, Result: text, IsError: pc.rec.IsError})
		p.addBlobs(pc.rec, pc.c.b.Input, text)
	}
	at := ""
	for i, t := range texts {
		if i > 0 {
			at += "\n\n"
		}
		at += t
	}
	b.Prompt = BatchPrompt(at, b.Calls)
	p.Batches = append(p.Batches, *b)
	it.batch = &p.Batches[len(p.Batches)-1]
}

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
