package pruner

// DiagnosticKind names a degradation the engine reports (reference §12).
type DiagnosticKind string

const (
	// DiagUnresolvedRange: a chain's boundaries did not resolve to exactly one message each,
	// or its range nests in / duplicates another; nothing of it was applied (status letter u).
	DiagUnresolvedRange DiagnosticKind = "unresolved-range"
	// DiagRangeIDMismatch: a resolved range holds a different id set than recorded (m).
	DiagRangeIDMismatch DiagnosticKind = "range-id-mismatch"
	// DiagOrphanSweep: tool results without an opening call were removed (o).
	DiagOrphanSweep DiagnosticKind = "orphan-sweep"
	// DiagBackfillEmpty: an uncovered chain had no record to compress (b).
	DiagBackfillEmpty DiagnosticKind = "backfill-empty"
)

// Diagnostic is one report. Key is the dedup key within Kind (reference §12): the block id
// (u, m), "overlap:<block>" (u for nested/duplicate ranges), 16 hex of SHA-256 over the sorted
// swept ids (o), the chain's start fingerprint (b).
type Diagnostic struct {
	// Kind is the diagnostic kind.
	Kind DiagnosticKind `json:"kind"`
	// Key is the dedup key.
	Key string `json:"key"`
	// Detail is a human-readable explanation.
	Detail string `json:"detail"`
}

func (d Diagnostic) seenKey() string { return string(d.Kind) + ":" + d.Key }
