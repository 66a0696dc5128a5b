// Package store holds condense's per-session state (versioned engine state, diagnostics,
// counters, blobs, a fenced flush lease, idle expiry, change notifications) in Redis, bbolt or
// memory behind one contract (storetest), with typed errors. See docs/store.md.
package store

import (
	"context"
	"sort"
	"time"
)

// Store is the session store of the proxy, the flush orchestrator and the operator; every
// method is safe for concurrent use and rejects an invalid id (ErrInvalidSession). Writes and
// loads refresh the session's idle expiry (docs/store.md); an idle session disappears whole.
type Store interface {
	// Load returns the session's snapshot in one round trip. An unknown session yields an
	// empty snapshot with Version 0 and a nil error.
	Load(ctx context.Context, session string) (*Snapshot, error)

	// Commit replaces the session state when the stored version is expectVersion (0: never
	// committed) and returns expectVersion+1; else a *ConflictError (ErrConflict). A non-zero
	// fence must be the latest lease's token, else a *FencedError (ErrFenced). Either leaves it unchanged.
	Commit(ctx context.Context, session string, expectVersion uint64, state []byte, fence uint64) (uint64, error)

	// AddDiagnostics records diagnostics, deduplicated by Diagnostic.Key: a key already
	// recorded for the session is ignored (its first Kind and Detail are kept). Per-kind
	// counters count distinct keys. It does not change the state version.
	AddDiagnostics(ctx context.Context, session string, diags []Diagnostic) error

	// IncrStats adds each delta to the session's named counter (missing counters start at 0)
	// without a commit or a version change. An increment that would overflow int64 fails the whole
	// call with ErrInvalidArgument and changes nothing.
	IncrStats(ctx context.Context, session string, delta map[string]int64) error

	// UpdateStats applies u in one atomic write without changing the version: adds u.Incr, sets
	// u.Set, raises to u.Max. A name in two maps, or an increment past int64, fails the call with
	// ErrInvalidArgument and changes nothing.
	UpdateStats(ctx context.Context, session string, u StatsUpdate) error

	// PutBlob stores data under key for the session, compressed, replacing any previous value.
	// Keys are non-empty strings of at most MaxBlobKeyLen bytes.
	PutBlob(ctx context.Context, session, key string, data []byte) error

	// GetBlob returns the decompressed blob, or an error satisfying errors.Is(err, ErrNotFound).
	GetBlob(ctx context.Context, session, key string) ([]byte, error)

	// DeleteBlob removes the blob under key; a missing blob (or session) is not an error. It
	// does not refresh the session's last-seen time.
	DeleteBlob(ctx context.Context, session, key string) error

	// AcquireLease takes the session's flush lease for owner for ttl, or returns a *LeaseHeldError
	// (ErrLeaseHeld) while another owner's is unexpired. The owner's own lease is extended with its
	// token; each new lease's fencing token exceeds every earlier one of the session.
	AcquireLease(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error)

	// RenewLease extends a held lease to ttl from now. If the lease expired or another token
	// is now current it returns an error satisfying errors.Is(err, ErrLeaseLost).
	RenewLease(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error)

	// ReleaseLease gives the lease up. Releasing a lease that is no longer held by this token
	// (expired or taken over) returns an error satisfying errors.Is(err, ErrLeaseLost) and
	// leaves the current holder alone.
	ReleaseLease(ctx context.Context, lease Lease) error

	// List returns every stored session with its last-seen time, version, counters and
	// diagnostic counts, sorted by session id. It is meant for the operator, not the hot path.
	List(ctx context.Context) ([]SessionInfo, error)

	// Delete removes the session and everything it owns (state, diagnostics, counters, blobs,
	// lease). Deleting an unknown session is not an error.
	Delete(ctx context.Context, session string) error

	// Watch subscribes to change notifications (commits, deletions, new diagnostics); the channel
	// closes when ctx ends or the store closes. They are hints (a full buffer drops, idle expiry
	// sends none), so consumers reconcile with List periodically.
	Watch(ctx context.Context) (<-chan Event, error)

	// Close releases the store's connections or files. Further calls fail.
	Close() error
}

// StatsUpdate is one UpdateStats write: counters to add to, to set, and to raise.
type StatsUpdate struct {
	// Incr is added to each named counter (missing counters start at 0).
	Incr map[string]int64
	// Set sets each named counter to its value: counters that hold a last value, which
	// concurrent writers must set, not add to.
	Set map[string]int64
	// Max sets each named counter to its value only when the counter is missing or holds
	// less, so a writer that computed its value from an older snapshot never lowers it:
	// times and high-water marks that must never go backwards.
	Max map[string]int64
}

// overflow is UpdateStats' error for an increment that takes the counter name out of the
// int64 range.
func overflow(name string) error { return invalidArg("counter %q would overflow int64", name) }

// empty reports whether u changes nothing.
func (u StatsUpdate) empty() bool { return len(u.Incr)+len(u.Set)+len(u.Max) == 0 }

// validate checks u's counter names: valid, and each in one map only.
func (u StatsUpdate) validate() error {
	seen := make(map[string]bool, len(u.Incr)+len(u.Set)+len(u.Max))
	for _, m := range []map[string]int64{u.Incr, u.Set, u.Max} {
		for k := range m {
			if err := validateCounterName(k); err != nil {
				return err
			}
			if seen[k] {
				return invalidArg("counter %q named twice in one stats update", k)
			}
			seen[k] = true
		}
	}
	return nil
}

// Snapshot is a session's state as read by Load.
type Snapshot struct {
	// Session is the session id as given to Load.
	Session string
	// Version is the committed state version; 0 when nothing was ever committed.
	Version uint64
	// State is the opaque engine state of Version (nil when Version is 0, or when StateKnown).
	State []byte
	// StateKnown is true when LoadKnown left State out because Version is the version the
	// caller said it holds.
	StateKnown bool
	// Stats holds the named counters (see the Stat* names); never nil.
	Stats map[string]int64
	// Diagnostics holds every recorded diagnostic, sorted by Key; never nil.
	Diagnostics []Diagnostic
	// DiagnosticCounts counts distinct diagnostic keys per Kind; never nil.
	DiagnosticCounts map[string]int64
	// LastSeen is the last-seen time after this Load (see Store); zero for an unknown session.
	LastSeen time.Time
	// Lease is the current unexpired flush lease, or nil.
	Lease *Lease
}

// KnownStateLoader is implemented by stores that can leave out the state of a version the
// caller already holds decoded, saving its transfer and decompression. Both stores of this
// package implement it.
type KnownStateLoader interface {
	// LoadKnown is Load, except that when the stored version equals known (> 0) the
	// snapshot's State is nil and StateKnown is true.
	LoadKnown(ctx context.Context, session string, known uint64) (*Snapshot, error)
}

// HasDiagnostic reports whether a diagnostic with this key is recorded in the snapshot
// (false for a nil snapshot).
func (s *Snapshot) HasDiagnostic(key string) bool {
	if s == nil {
		return false
	}
	i := sort.Search(len(s.Diagnostics), func(i int) bool { return s.Diagnostics[i].Key >= key })
	return i < len(s.Diagnostics) && s.Diagnostics[i].Key == key
}

// Diagnostic is one noteworthy event about a session (for example a fingerprint that failed
// to resolve), shown by the operator.
type Diagnostic struct {
	// Kind groups diagnostics for the per-kind counters, e.g. "resolve-failed".
	Kind string `json:"kind"`
	// Key deduplicates: a diagnostic whose Key is already recorded is ignored.
	Key string `json:"key"`
	// Detail is free human-readable text.
	Detail string `json:"detail,omitempty"`
}

// Lease is a per-session flush lease. Token is the fencing token to pass to Commit.
type Lease struct {
	// Session is the leased session id.
	Session string
	// Owner identifies the holder (e.g. pod name and process id).
	Owner string
	// Token is the fencing token, strictly increasing per session.
	Token uint64
	// Expires is when the lease lapses unless renewed (the backend's clock).
	Expires time.Time
}

// SessionInfo summarizes one session for List.
type SessionInfo struct {
	// Session is the session id.
	Session string
	// LastSeen is the time of the last write or load.
	LastSeen time.Time
	// Version is the committed state version.
	Version uint64
	// StateBytes is the stored (compressed) size of the state.
	StateBytes int64
	// Stats holds the named counters; never nil.
	Stats map[string]int64
	// DiagnosticCounts counts distinct diagnostic keys per kind; never nil.
	DiagnosticCounts map[string]int64
}

// EventKind says what changed in an Event.
type EventKind string

// Event kinds delivered by Watch.
const (
	// EventCommitted: a new state version was committed.
	EventCommitted EventKind = "committed"
	// EventDeleted: the session was deleted.
	EventDeleted EventKind = "deleted"
	// EventDiagnostics: at least one new diagnostic key was recorded.
	EventDiagnostics EventKind = "diagnostics"
)

// Event is one change notification from Watch.
type Event struct {
	// Kind is what happened.
	Kind EventKind `json:"kind"`
	// Session is the affected session id.
	Session string `json:"session"`
	// Version is the state version after the change (0 for deletions).
	Version uint64 `json:"version,omitempty"`
}

// Well-known counter names for IncrStats and UpdateStats; any other name is allowed too.
const (
	StatRequests             = "requests"
	StatBytesBefore          = "bytesBefore"
	StatBytesAfter           = "bytesAfter"
	StatTokensBefore         = "tokensBefore"
	StatTokensAfter          = "tokensAfter"
	StatFlushes              = "flushes"
	StatCacheReadTokens      = "cacheReadTokens"
	StatCacheWriteTokens     = "cacheWriteTokens"
	StatSummarizerCostMicros = "summarizerCostMicros"
)

// DefaultTTL is the idle expiry used when the store URL sets none: a session untouched for
// this long is removed with everything it owns.
const DefaultTTL = 7 * 24 * time.Hour
