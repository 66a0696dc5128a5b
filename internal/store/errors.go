package store

import (
	"errors"
	"fmt"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrUnavailable: the backend could not be reached or did not answer in time (including
	// context deadlines). The proxy fails open on it.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrConflict: Commit's expected version is not the stored version.
	ErrConflict = errors.New("store: version conflict")
	// ErrFenced: Commit's fencing token is older than the session's latest lease token.
	ErrFenced = errors.New("store: fenced by a newer lease")
	// ErrLeaseHeld: another owner holds the session's flush lease.
	ErrLeaseHeld = errors.New("store: lease held by another owner")
	// ErrLeaseLost: the lease expired or was taken over.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrInvalidSession: the session id is refused (see ValidateSessionID).
	ErrInvalidSession = errors.New("store: invalid session id")
	// ErrInvalidArgument: a blob key, diagnostic, counter name or lease TTL is refused.
	ErrInvalidArgument = errors.New("store: invalid argument")
	// ErrNotFound: the requested blob does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrCorrupt: stored bytes could not be decoded (e.g. a damaged compressed blob).
	ErrCorrupt = errors.New("store: corrupt data")
	// ErrReadOnly: a write to a store opened with OpenReadOnly.
	ErrReadOnly = errors.New("store: opened read-only")
)

// ConflictError reports a lost compare-and-set.
type ConflictError struct {
	Session  string // the session id
	Expected uint64 // the version the caller expected
	Actual   uint64 // the stored version
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("store: version conflict on session %q: expected %d, stored %d", e.Session, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// FencedError reports a commit whose fencing token is stale.
type FencedError struct {
	Session string // the session id
	Token   uint64 // the caller's fencing token
	Current uint64 // the latest token issued for the session
}

// Error implements error.
func (e *FencedError) Error() string {
	return fmt.Sprintf("store: commit on session %q fenced: token %d is older than lease token %d", e.Session, e.Token, e.Current)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// LeaseHeldError reports that another owner holds the lease.
type LeaseHeldError struct {
	Lease Lease // the current holder's lease
}

// Error implements error.
func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("store: flush lease on session %q held by %q (token %d) until %s",
		e.Lease.Session, e.Lease.Owner, e.Lease.Token, e.Lease.Expires.UTC().Format("15:04:05.000"))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// SessionIDError reports a refused session id.
type SessionIDError struct {
	Reason string // why the id is refused
	Len    int    // the id's length in bytes (the id itself may be unprintable or huge)
}

// Error implements error.
func (e *SessionIDError) Error() string {
	return fmt.Sprintf("store: invalid session id (%d bytes): %s", e.Len, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidSession) true.
func (e *SessionIDError) Is(target error) bool { return target == ErrInvalidSession }

// unavailable wraps err so that errors.Is(err, ErrUnavailable) holds and err stays reachable.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

func invalidArg(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
