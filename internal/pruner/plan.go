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
