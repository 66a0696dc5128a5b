package pruner

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/condense-dev/condense/internal/identity"
)

// StateVersion is the schema version MarshalBinary writes and UnmarshalBinary accepts
// (docs/state.md).
const StateVersion = 1

// Fingerprint locates one message of a transcript: identity.MessageHash plus an ordinal
// among the messages of the same role class with that hash (see docs/engine.md), and a cheap
// structural signature that lets resolution hash only the messages that can match.
type Fingerprint struct {
	// Hash is identity.MessageHash of the message.
	Hash string `json:"h"`
	// Ordinal counts earlier messages of the class with the same Hash.
	Ordinal int `json:"o"`
	// Sig is a structural signature implied by the hash (equal hashes have equal Sig);
	// 0 means unknown (every message of the class is hashed).
	Sig uint64 `json:"s,omitempty"`
}

// Record is one indexed tool-result occurrence. Its full result text and full arguments are
// not kept in the state: they live in blobs (BlobKeyResult, BlobKeyArgs).
type Record struct {
	// Key is the occurrence key (identity.OccurrenceKeyOf).
	Key string `json:"key"`
	// ID is the provider tool-call id.
	ID string `json:"id"`
	// Tool is the tool name.
	Tool string `json:"tool"`
	// Ref is the short ref "tN"; empty for spilled records (they are recovered by key or id).
	Ref string `json:"ref,omitempty"`
	// Path is the call's "path" argument when it was a string (for the protection re-check).
	Path string `json:"path,omitempty"`
	// HasPath says Path was present.
	HasPath bool `json:"hasPath,omitempty"`
	// ArgsExcerpt is the compact argument JSON, cut at 200 UTF-16 units plus "...".
	ArgsExcerpt string `json:"args,omitempty"`
	// IsError is the result's error flag.
	IsError bool `json:"isError,omitempty"`
	// Chars is the result text length in UTF-16 code units.
	Chars int `json:"chars"`
	// Bytes is the result text length in UTF-8 bytes.
	Bytes int `json:"bytes"`
	// Hash is the content hash of (tool, normalized result text).
	Hash string `json:"hash"`
	// Turn is the assistant ordinal of the call's turn at capture; -1 for backfilled records.
	Turn int `json:"turn"`
	// Spilled marks a result moved out of context whole (no summary, no tN).
	Spilled bool `json:"spilled,omitempty"`
	// Preview is a spilled result's UTF-8-safe head preview.
	Preview string `json:"preview,omitempty"`
	// Backfilled marks a record indexed by an uncovered chain's deterministic compression.
	Backfilled bool `json:"backfilled,omitempty"`
	// Summary is the id of the per-batch summary that covers the record ("" for spilled and
	// backfilled records).
	Summary string `json:"summary,omitempty"`
}

// Summary is one per-batch summary.
type Summary struct {
	// ID is the batch id it answered.
	ID string `json:"id"`
	// Keys are the occurrence keys it covers, in label order.
	Keys []string `json:"keys"`
	// Refs are the tN refs allocated to Keys, position for position.
	Refs []string `json:"refs"`
	// Tools are the tool names, position for position.
	Tools []string `json:"tools"`
	// Text is the decorated summary with its footer.
	Text string `json:"text"`
	// Anchor is the fingerprint (among assistant messages) of the batch's last assistant
	// message (states written before that anchored on the last assistant message of the
	// transcript the flush was planned on); the summary is shown right after its turn.
	Anchor Fingerprint `json:"anchor"`
	// Turn is the assistant ordinal of the batch's last turn.
	Turn int `json:"turn"`

	// shown is the *shownSummary a render last made of Text (nil before one), read and
	// written atomically: a summary is stored once and never changes, and states (and the
	// requests rendered with them) share it.
	shown unsafe.Pointer
}

// Chain is one compressed chain (reference §2.6).
type Chain struct {
	// Block is "bN".
	Block string `json:"block"`
	// Start is the fingerprint of the chain's opening user prompt (among user prompts).
	Start Fingerprint `json:"start"`
	// Final is the fingerprint of the closing text-only assistant (among final assistants).
	Final Fingerprint `json:"final"`
	// DroppedIDs are the bare middle ids (diagnostic cross-check only).
	DroppedIDs []string `json:"droppedIds"`
	// DroppedKeys are the occurrence keys of the middle results.
	DroppedKeys []string `json:"droppedKeys,omitempty"`
	// ProtectedIDs are middle ids whose output is relocated verbatim.
	ProtectedIDs []string `json:"protectedIds,omitempty"`
	// ProtectedKeys are the occurrence keys of those outputs; when present, relocation
	// matches by key, so a reused id cannot relocate an unprotected result.
	ProtectedKeys []string `json:"protectedKeys,omitempty"`
	// ToolRefs are the tN refs listed in the synthetic message's tools attribute.
	ToolRefs []string `json:"toolRefs"`
	// CompressedAt is the flush time.
	CompressedAt time.Time `json:"compressedAt"`
	// RangeSummary is the fused or deterministic body; empty means the per-batch
	// summaries are concatenated at render.
	RangeSummary string `json:"rangeSummary,omitempty"`
	// BodySource is "deterministic" for uncovered chains, else empty.
	BodySource string `json:"bodySource,omitempty"`
}

// Frontier is the last attempted flush boundary (reference §5.4).
type Frontier struct {
	// Assistant fingerprints (among tool-using assistant messages) the turn of the last
	// processed call.
	Assistant Fingerprint `json:"assistant"`
	// LastKey is the occurrence key of the last processed call.
	LastKey string `json:"lastKey"`
	// LastTool is its tool name.
	LastTool string `json:"lastTool"`
	// Turn is its assistant ordinal.
	Turn int `json:"turn"`
	// Batches counts the batches the flush processed.
	Batches int `json:"batches"`
	// Calls counts their tool calls, deduplicated ones included.
	Calls int `json:"calls"`
	// RawChars sums their result sizes (UTF-16 units), deduplicated ones included.
	RawChars int `json:"rawChars"`
	// SummaryChars sums the stored summaries' sizes.
	SummaryChars int `json:"summaryChars"`
	// Outcome is "summarized", "skipped-oversized", "skipped-deduped" or "skipped-trivial".
	Outcome string `json:"outcome"`
	// At is the flush time.
	At time.Time `json:"at"`
}

// Stats are cumulative counters (read by the operator).
type Stats struct {
	// Flushes counts committed flushes that processed at least one batch or chain.
	Flushes int64 `json:"flushes"`
	// SummarizerCalls counts summarizer outputs consumed (batch and range).
	SummarizerCalls int64 `json:"summarizerCalls"`
	// BatchesSummarized counts per-batch summaries stored.
	BatchesSummarized int64 `json:"batchesSummarized"`
	// ResultsSummarized counts records indexed under a summary.
	ResultsSummarized int64 `json:"resultsSummarized"`
	// Deduped counts dedup aliases created.
	Deduped int64 `json:"deduped"`
	// Spilled counts spilled records.
	Spilled int64 `json:"spilled"`
	// SkippedTrivial counts batches below MinBatchChars.
	SkippedTrivial int64 `json:"skippedTrivial"`
	// SkippedOversized counts batches whose summary was longer than their results.
	SkippedOversized int64 `json:"skippedOversized"`
	// ChainsCompressed counts chain entries.
	ChainsCompressed int64 `json:"chainsCompressed"`
	// RangesSummarized counts chains with a fused range summary.
	RangesSummarized int64 `json:"rangesSummarized"`
	// RawChars sums the UTF-16 sizes of summarized results.
	RawChars int64 `json:"rawChars"`
	// SummaryChars sums the UTF-16 sizes of their summaries.
	SummaryChars int64 `json:"summaryChars"`
	// InputTokens is summarizer input spend, added by the caller.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens is summarizer output spend, added by the caller.
	OutputTokens int64 `json:"outputTokens"`
	// CostUSD is summarizer cost, added by the caller.
	CostUSD float64 `json:"costUSD"`
}

// DiagnosticCounters counts reported diagnostics per kind and remembers the dedup keys seen.
type DiagnosticCounters struct {
	// Counts maps a DiagnosticKind to how many distinct diagnostics of it were recorded.
	Counts map[DiagnosticKind]int `json:"counts,omitempty"`
	// Seen holds "<kind>:<key>" for every recorded diagnostic.
	Seen map[string]bool `json:"seen,omitempty"`
}

// State is a session's persisted engine state. States are values: PlanFlush and Render never
// modify one; Plan.Apply and WithDiagnostics return a new State. A State is safe for concurrent
// readers once built.
type State struct {
	// Version is StateVersion.
	Version int `json:"version"`
	// Records maps occurrence key to record.
	Records map[string]*Record `json:"records,omitempty"`
	// Aliases maps a duplicate occurrence key to its original's key.
	Aliases map[string]string `json:"aliases,omitempty"`
	// Hashes maps a content hash to the first non-backfilled record that produced it.
	Hashes map[string]string `json:"hashes,omitempty"`
	// Summaries are the per-batch summaries in commit order.
	Summaries []*Summary `json:"summaries,omitempty"`
	// Chains are the compressed chains in commit order.
	Chains []*Chain `json:"chains,omitempty"`
	// Skipped holds occurrence keys attempted but left verbatim (trivial or oversized batch).
	Skipped map[string]bool `json:"skipped,omitempty"`
	// Purged holds the occurrence keys of errored results whose call's arguments render
	// purges, decided at flush time (CooldownTurns assistant turns old, MinArgChars).
	Purged map[string]bool `json:"purged,omitempty"`
	// GraceOver holds the occurrence keys of indexed context_tree_query results whose recovery
	// grace had ended at a flush; render stubs a recovery result only once it is listed.
	GraceOver map[string]bool `json:"graceOver,omitempty"`
	// Frontier is the last attempted boundary; nil before the first flush.
	Frontier *Frontier `json:"frontier,omitempty"`
	// NextRef is the next tN number (starts at 1).
	NextRef int `json:"nextRef"`
	// NextBlock is the next bN number (starts at 1).
	NextBlock int `json:"nextBlock"`
	// NextSummary numbers batch ids.
	NextSummary int `json:"nextSummary"`
	// Diagnostics are the diagnostic counters and dedup set.
	Diagnostics DiagnosticCounters `json:"diagnostics"`
	// Stats are cumulative counters.
	Stats Stats `json:"stats"`

	byID  map[string][]string // bare id -> keys (records and aliases), sorted
	byRef map[string]string   // tN -> key
	refOf map[string]string   // key (record or alias) -> tN
	sumOf map[string]int      // record key -> index in Summaries of the first summary covering it
	// stubs memoises stubOf per key (misses too); a fresh map per rebuild and none on a clone
	// until its rebuild, so a copy never shares its original's entries.
	stubs *stubMemo
}

// stubMemo is a state's stubOf memo. A plain map under a read-write lock rather than a
// sync.Map: a state the flush weighs is rendered once, and a sync.Map allocated per entry.
type stubMemo struct {
	mu sync.RWMutex
	m  map[string]stubEntry
}

// stubEntry is what rendering a stub for one summarized occurrence key needs.
type stubEntry struct {
	// rk is the record key the occurrence key resolves to (itself, or an alias's original).
	rk string
	// rec is that record.
	rec *Record
	// si is the index in Summaries of the first summary covering rk, or -1.
	si int
	// ref is what the stub names: the tN ref, else the key.
	ref string
	// text is the stub's text (StubText, or SpillStubText for a spilled record).
	text string
}

// stubOf returns what stubbing the result with occurrence key key needs, memoised on the
// state; ok is false when key is neither an indexed record nor an alias of one.
func (s *State) stubOf(key string) (e stubEntry, ok bool) {
	if s.stubs != nil {
		s.stubs.mu.RLock()
		e, hit := s.stubs.m[key]
		s.stubs.mu.RUnlock()
		if hit {
			return e, e.rec != nil
		}
	}
	if s.IsSummarized(key) {
		e.rk, _ = s.Resolve(key)
		e.rec = s.Records[e.rk]
	}
	if e.rec != nil {
		var has bool
		if e.si, has = s.sumOf[e.rk]; !has {
			e.si = -1
		}
		ref := s.RefOf(key)
		if ref == "" {
			ref = key
		}
		e.ref = ref
		if e.rec.Spilled {
			e.text = SpillStubText(e.rec.Tool, ref, e.rec.Bytes, e.rec.Preview)
		} else {
			e.text = StubText(ref)
		}
	}
	if s.stubs != nil {
		s.stubs.mu.Lock()
		s.stubs.m[key] = e
		s.stubs.mu.Unlock()
	}
	return e, e.rec != nil
}

// NewState returns an empty state.
func NewState() *State {
	s := &State{Version: StateVersion, NextRef: 1, NextBlock: 1, NextSummary: 1}
	s.rebuild()
	return s
}

// Empty reports whether the state holds nothing that affects rendering.
func (s *State) Empty() bool {
	return s == nil || (len(s.Records) == 0 && len(s.Aliases) == 0 && len(s.Summaries) == 0 && len(s.Chains) == 0 && len(s.Purged) == 0)
}

// MarshalBinary encodes the state as JSON (schema in docs/state.md).
func (s *State) MarshalBinary() ([]byte, error) {
	return json.Marshal(s)
}

// StateError reports a state blob that cannot be decoded.
type StateError struct {
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *StateError) Error() string { return "pruner: bad state: " + e.Msg }

// UnmarshalBinary decodes a state written by MarshalBinary. An empty input yields an empty
// state. It returns a *StateError for malformed data or an unknown version.
func (s *State) UnmarshalBinary(data []byte) error {
	var n State
	if len(data) != 0 {
		if err := json.Unmarshal(data, &n); err != nil {
			return &StateError{Msg: err.Error()}
		}
		if n.Version != StateVersion {
			return &StateError{Msg: fmt.Sprintf("version %d, want %d", n.Version, StateVersion)}
		}
	} else {
		n = State{Version: StateVersion}
	}
	if n.NextRef < 1 {
		n.NextRef = 1
	}
	if n.NextBlock < 1 {
		n.NextBlock = 1
	}
	if n.NextSummary < 1 {
		n.NextSummary = 1
	}
	for k, r := range n.Records {
		if r == nil {
			return &StateError{Msg: "nil record " + strconv.Quote(k)}
		}
		r.Key = k
	}
	*s = n
	s.rebuild()
	return nil
}

// rebuild recomputes the derived lookup maps.
func (s *State) rebuild() {
	s.byID = make(map[string][]string, len(s.Records)+len(s.Aliases))
	s.byRef = make(map[string]string, len(s.Records))
	s.refOf = make(map[string]string, len(s.Records)+len(s.Aliases))
	for k, r := range s.Records {
		s.byID[r.ID] = append(s.byID[r.ID], k)
		if r.Ref != "" {
			s.byRef[r.Ref] = k
			s.refOf[k] = r.Ref
		}
	}
	for dup, orig := range s.Aliases {
		if _, rec := s.Records[dup]; rec {
			// Also a record (an uncovered chain's compression backfilled the duplicate in
			// the flush that aliased it): the record wins, as in Resolve, so the key is
			// listed once under its id and keeps its own ref.
			continue
		}
		id := bareID(dup)
		s.byID[id] = append(s.byID[id], dup)
		if ref, ok := s.refOf[orig]; ok {
			s.refOf[dup] = ref
		}
	}
	for _, ks := range s.byID {
		sort.Strings(ks)
	}
	s.stubs = &stubMemo{m: map[string]stubEntry{}}
	s.sumOf = make(map[string]int, len(s.Records))
	for i, sm := range s.Summaries {
		for _, k := range sm.Keys {
			if _, ok := s.sumOf[k]; !ok {
				s.sumOf[k] = i
			}
		}
	}
}

// clone returns a deep-enough copy for Plan.Apply: maps and slices are copied, records and
// summaries (immutable once stored) are shared.
func (s *State) clone() *State {
	n := *s
	n.stubs = nil // its own memo comes with its rebuild; until then stubOf does not memoise
	n.Records = make(map[string]*Record, len(s.Records))
	for k, v := range s.Records {
		n.Records[k] = v
	}
	n.Aliases = copyMap(s.Aliases)
	n.Hashes = copyMap(s.Hashes)
	n.Skipped = copyMap(s.Skipped)
	n.Purged = copyMap(s.Purged)
	n.GraceOver = copyMap(s.GraceOver)
	n.Summaries = append([]*Summary(nil), s.Summaries...)
	n.Chains = append([]*Chain(nil), s.Chains...)
	if s.Frontier != nil {
		f := *s.Frontier
		n.Frontier = &f
	}
	n.Diagnostics = DiagnosticCounters{Counts: copyMap(s.Diagnostics.Counts), Seen: copyMap(s.Diagnostics.Seen)}
	return &n
}

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	n := make(map[K]V, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}

// bareID returns the provider id part of an occurrence key ("<id>#<hash>").
func bareID(key string) string { return identity.BareID(key) }

// IsSummarized reports whether an occurrence key is indexed or a dedup alias (strict: never
// falls back to a bare id).
func (s *State) IsSummarized(key string) bool {
	if _, ok := s.Records[key]; ok {
		return true
	}
	_, ok := s.Aliases[key]
	return ok
}

// Resolve maps a tN ref, an occurrence key, a dedup alias or a bare id with exactly one
// occurrence to the record's key; ok is false when unknown or ambiguous (fail closed).
func (s *State) Resolve(x string) (key string, ok bool) {
	if _, ok := s.Records[x]; ok {
		return x, true
	}
	if o, ok := s.Aliases[x]; ok {
		return o, true
	}
	if k, ok := s.byRef[x]; ok {
		return k, true
	}
	if ks := s.byID[x]; len(ks) == 1 {
		return s.Resolve(ks[0])
	}
	return "", false
}

// RefOf returns the tN ref of an occurrence key or alias, or "".
func (s *State) RefOf(key string) string { return s.refOf[key] }

// KeysForID returns every occurrence key (records and aliases) recorded under a bare id.
func (s *State) KeysForID(id string) []string { return s.byID[id] }

// summaryCovering returns the summaries sharing any key with keys, in commit order.
func (s *State) summaryCovering(keys map[string]bool) []*Summary {
	var out []*Summary
	for _, sm := range s.Summaries {
		for _, k := range sm.Keys {
			if keys[k] {
				out = append(out, sm)
				break
			}
		}
	}
	return out
}

// toolRefs returns the tN of each key that has one, in order, without duplicates.
func (s *State) toolRefs(keys []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if r := s.refOf[k]; r != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// WithDiagnostics records diagnostics in a copy of the state: it returns the new state and the
// diagnostics not seen before (those to persist). The receiver is unchanged.
func (s *State) WithDiagnostics(ds []Diagnostic) (*State, []Diagnostic) {
	var fresh []Diagnostic
	dup := map[string]bool{}
	for _, d := range ds {
		if !s.Diagnostics.Seen[d.seenKey()] && !dup[d.seenKey()] {
			dup[d.seenKey()] = true
			fresh = append(fresh, d)
		}
	}
	if len(fresh) == 0 {
		return s, nil
	}
	n := s.clone()
	for _, d := range fresh {
		n.Diagnostics.Seen[d.seenKey()] = true
		n.Diagnostics.Counts[d.Kind]++
	}
	n.rebuild()
	return n, fresh
}
