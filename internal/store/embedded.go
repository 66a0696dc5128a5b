package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// EmbeddedStore is the single-process Store: a bbolt file (OpenBolt) or memory (NewMemory).
// Idle expiry is checked on every access and swept periodically; Watch notifications are
// delivered in-process.
type EmbeddedStore struct {
	db       kvDB
	ttl      time.Duration
	now      func() time.Time
	readOnly bool // OpenReadOnly: no writes, no sweep, no last-seen refresh

	mu     sync.Mutex
	closed bool
	subs   map[chan Event]struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

// Bucket layout: top-level "sessions" → one bucket per session keyed by the raw id →
// meta keys v (version), s (state), seen (unix ms), f (latest lease token), l (lease) and
// sub-buckets c (counters), d (diagnostics), k (diagnostic kinds), b (blobs).
var (
	bktSessions = []byte("sessions")
	keyVersion  = []byte("v")
	keyState    = []byte("s")
	keySeen     = []byte("seen")
	keyFence    = []byte("f")
	keyLease    = []byte("l")
	bktCounters = []byte("c")
	bktDiags    = []byte("d")
	bktKinds    = []byte("k")
	bktBlobs    = []byte("b")
)

// touchEvery is how stale last-seen may get before a Load writes it again (Load otherwise
// only reads, which keeps bbolt from syncing the file on every request): a tenth of the
// idle TTL, at most one minute.
func (s *EmbeddedStore) touchEvery() time.Duration {
	if s.ttl <= 0 {
		return time.Minute
	}
	return min(s.ttl/10, time.Minute)
}

// DefaultBoltPath returns the default embedded store file: $XDG_STATE_HOME/condense/state.db,
// or ~/.local/state/condense/state.db when XDG_STATE_HOME is unset.
func DefaultBoltPath() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "condense", "state.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store: default bolt path: %w", err)
	}
	return filepath.Join(home, ".local", "state", "condense", "state.db"), nil
}

// OpenBolt opens (creating as needed) the bbolt file at path with idle expiry ttl (0
// disables it). bbolt locks the file: a second process opening it waits up to one second and
// then fails with ErrUnavailable.
func OpenBolt(path string, ttl time.Duration) (*EmbeddedStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: create directory for %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, unavailable("open "+path+" (locked by another process)", err)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return newEmbedded(boltDB{db}, ttl, false), nil
}

// openBoltReadOnly opens the existing bbolt file at path read-only (a shared lock: it waits
// up to one second for a process that has it open for writing); a missing file is ErrNotFound.
func openBoltReadOnly(path string, ttl time.Duration) (*EmbeddedStore, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist (nothing was stored there)", ErrNotFound, path)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, unavailable("open "+path+" (locked by another process)", err)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return newEmbedded(boltDB{db}, ttl, true), nil
}

// NewMemory returns an in-memory Store with idle expiry ttl (0 disables it); its contents
// vanish on Close.
func NewMemory(ttl time.Duration) *EmbeddedStore { return newEmbedded(newMemDB(), ttl, false) }

func newEmbedded(db kvDB, ttl time.Duration, readOnly bool) *EmbeddedStore {
	s := &EmbeddedStore{db: db, ttl: ttl, now: time.Now, readOnly: readOnly, subs: map[chan Event]struct{}{}, stop: make(chan struct{})}
	if ttl > 0 && !readOnly {
		every := min(max(ttl/4, 10*time.Millisecond), time.Minute)
		s.wg.Add(1)
		go s.sweeper(every)
	}
	return s
}

func (s *EmbeddedStore) sweeper(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			_ = s.sweep()
		}
	}
}

// sweep deletes every expired session.
func (s *EmbeddedStore) sweep() error {
	now := s.now()
	var expired [][]byte
	err := s.db.view(func(tx kvTx) error {
		root := tx.bucket(bktSessions)
		if root == nil {
			return nil
		}
		return forEachBucket(root, func(id []byte, b kvBucket) {
			if s.expired(b, now) {
				expired = append(expired, append([]byte(nil), id...))
			}
		})
	})
	if err != nil || len(expired) == 0 {
		return err
	}
	return s.db.update(func(tx kvTx) error {
		root := tx.bucket(bktSessions)
		if root == nil {
			return nil
		}
		for _, id := range expired {
			if b := root.bucket(id); b != nil && s.expired(b, now) {
				if err := root.deleteBucket(id); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// forEachBucket visits the sub-buckets of root. bbolt's ForEach reports nested buckets with
// a nil value; the in-memory tree keeps them apart, so both are handled here.
func forEachBucket(root kvBucket, fn func(id []byte, b kvBucket)) error {
	switch r := root.(type) {
	case boltBucket:
		return r.b.ForEach(func(k, v []byte) error {
			if v == nil {
				fn(k, boltBucket{r.b.Bucket(k)})
			}
			return nil
		})
	case *memBucket:
		ids := make([]string, 0, len(r.sub))
		for id := range r.sub {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fn([]byte(id), r.sub[id])
		}
		return nil
	default:
		return fmt.Errorf("store: unknown bucket type %T", root)
	}
}

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func putU64(b kvBucket, k []byte, v uint64) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return b.put(k, buf[:])
}

func (s *EmbeddedStore) expired(b kvBucket, now time.Time) bool {
	if s.ttl <= 0 {
		return false
	}
	seen := int64(u64(b.get(keySeen)))
	return now.UnixMilli()-seen >= s.ttl.Milliseconds()
}

func (s *EmbeddedStore) check(session string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ValidateSessionID(session)
}

// checkWrite is check for the methods that write.
func (s *EmbeddedStore) checkWrite(session string) error {
	if s.readOnly {
		return ErrReadOnly
	}
	return s.check(session)
}

func (s *EmbeddedStore) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %s: %w", ErrClosed, op, err)
	}
	var typed interface{ Is(error) bool }
	if errors.As(err, &typed) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrCorrupt) ||
		errors.Is(err, ErrNotFound) || errors.Is(err, ErrLeaseLost) {
		return err
	}
	return fmt.Errorf("store: embedded %s: %w", op, err)
}

// session returns the live (unexpired) bucket of a session or nil.
func (s *EmbeddedStore) session(tx kvTx, id string, now time.Time) kvBucket {
	root := tx.bucket(bktSessions)
	if root == nil {
		return nil
	}
	b := root.bucket([]byte(id))
	if b == nil || s.expired(b, now) {
		return nil
	}
	return b
}

// writable returns the session's bucket for writing, replacing an expired one with a fresh
// bucket, and stamps last-seen.
func (s *EmbeddedStore) writable(tx kvTx, id string, now time.Time) (kvBucket, error) {
	root, err := tx.createBucket(bktSessions)
	if err != nil {
		return nil, err
	}
	if b := root.bucket([]byte(id)); b != nil && s.expired(b, now) {
		if err := root.deleteBucket([]byte(id)); err != nil {
			return nil, err
		}
	}
	b, err := root.createBucket([]byte(id))
	if err != nil {
		return nil, err
	}
	return b, putU64(b, keySeen, uint64(now.UnixMilli()))
}

// ctxErr reports a context that already ended as ErrUnavailable, like the Redis store.
func ctxErr(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return unavailable(op, err)
	}
	return nil
}

type embLease struct {
	Token   uint64 `json:"t"`
	Owner   string `json:"o"`
	Expires int64  `json:"e"` // unix ms
}

func (s *EmbeddedStore) lease(b kvBucket, now time.Time) *embLease {
	raw := b.get(keyLease)
	if raw == nil {
		return nil
	}
	var l embLease
	if json.Unmarshal(raw, &l) != nil || l.Expires <= now.UnixMilli() {
		return nil
	}
	return &l
}

// Load implements Store.
func (s *EmbeddedStore) Load(ctx context.Context, session string) (*Snapshot, error) {
	return s.load(ctx, session, 0)
}

// LoadKnown implements KnownStateLoader.
func (s *EmbeddedStore) LoadKnown(ctx context.Context, session string, known uint64) (*Snapshot, error) {
	return s.load(ctx, session, known)
}

// load is Load; a state whose version is known (> 0) is left out.
func (s *EmbeddedStore) load(ctx context.Context, session string, known uint64) (*Snapshot, error) {
	if err := s.check(session); err != nil {
		return nil, err
	}
	if err := ctxErr(ctx, "load"); err != nil {
		return nil, err
	}
	now := s.now()
	snap := &Snapshot{Session: session, Stats: map[string]int64{}, Diagnostics: []Diagnostic{}, DiagnosticCounts: map[string]int64{}}
	found, stale := false, false
	var stored []byte // the encoded state, decoded after the read transaction
	err := s.db.view(func(tx kvTx) error {
		b := s.session(tx, session, now)
		if b == nil {
			return nil
		}
		found = true
		snap.Version = u64(b.get(keyVersion))
		snap.StateKnown = known > 0 && snap.Version == known
		if snap.Version > 0 && !snap.StateKnown {
			// Copied (bbolt's bytes live only as long as the transaction); decompressing
			// under the database lock would hold up every writer and, behind a waiting
			// writer, every other reader.
			stored = append([]byte{}, b.get(keyState)...)
		}
		seen := int64(u64(b.get(keySeen)))
		stale = now.UnixMilli()-seen >= s.touchEvery().Milliseconds()
		snap.LastSeen = time.UnixMilli(seen)
		if err := readCounters(b.bucket(bktCounters), snap.Stats); err != nil {
			return err
		}
		if err := readCounters(b.bucket(bktKinds), snap.DiagnosticCounts); err != nil {
			return err
		}
		if d := b.bucket(bktDiags); d != nil {
			if err := d.forEach(func(k, v []byte) error {
				var dg Diagnostic
				if err := json.Unmarshal(v, &dg); err != nil {
					return fmt.Errorf("%w: diagnostic %q: %w", ErrCorrupt, k, err)
				}
				dg.Key = string(k)
				snap.Diagnostics = append(snap.Diagnostics, dg)
				return nil
			}); err != nil {
				return err
			}
		}
		if l := s.lease(b, now); l != nil {
			snap.Lease = &Lease{Session: session, Owner: l.Owner, Token: l.Token, Expires: time.UnixMilli(l.Expires)}
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("load", err)
	}
	if stored != nil {
		st, err := decodeValue(stored)
		if err != nil {
			return nil, s.wrap("load", err)
		}
		if st == nil {
			st = []byte{}
		}
		snap.State = st
	}
	if found && stale && !s.readOnly {
		err = s.db.update(func(tx kvTx) error {
			if b := s.session(tx, session, now); b != nil {
				return putU64(b, keySeen, uint64(now.UnixMilli()))
			}
			return nil
		})
		if err != nil {
			return nil, s.wrap("load", err)
		}
		snap.LastSeen = time.UnixMilli(now.UnixMilli())
	}
	return snap, nil
}

func readCounters(b kvBucket, into map[string]int64) error {
	if b == nil {
		return nil
	}
	return b.forEach(func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: counter %q has %d bytes", ErrCorrupt, k, len(v))
		}
		into[string(k)] = int64(binary.BigEndian.Uint64(v))
		return nil
	})
}

// Commit implements Store.
func (s *EmbeddedStore) Commit(ctx context.Context, session string, expectVersion uint64, state []byte, fence uint64) (uint64, error) {
	if err := s.checkWrite(session); err != nil {
		return 0, err
	}
	if err := ctxErr(ctx, "commit"); err != nil {
		return 0, err
	}
	enc := encodeValue(state)
	now := s.now()
	var nv uint64
	err := s.db.update(func(tx kvTx) error {
		var cur, curFence uint64
		if b := s.session(tx, session, now); b != nil {
			cur, curFence = u64(b.get(keyVersion)), u64(b.get(keyFence))
		}
		if cur != expectVersion {
			return &ConflictError{Session: session, Expected: expectVersion, Actual: cur}
		}
		if fence != 0 && fence != curFence {
			return &FencedError{Session: session, Token: fence, Current: curFence}
		}
		b, err := s.writable(tx, session, now)
		if err != nil {
			return err
		}
		nv = cur + 1
		if err := b.put(keyState, enc); err != nil {
			return err
		}
		return putU64(b, keyVersion, nv)
	})
	if err != nil {
		return 0, s.wrap("commit", err)
	}
	s.notify(Event{Kind: EventCommitted, Session: session, Version: nv})
	return nv, nil
}

// AddDiagnostics implements Store.
func (s *EmbeddedStore) AddDiagnostics(ctx context.Context, session string, diags []Diagnostic) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	for _, d := range diags {
		if err := validateDiagnostic(d); err != nil {
			return err
		}
	}
	if len(diags) == 0 {
		return nil
	}
	if err := ctxErr(ctx, "diagnostics"); err != nil {
		return err
	}
	now := s.now()
	added := 0
	var version uint64
	err := s.db.update(func(tx kvTx) error {
		b, err := s.writable(tx, session, now)
		if err != nil {
			return err
		}
		version = u64(b.get(keyVersion))
		db, err := b.createBucket(bktDiags)
		if err != nil {
			return err
		}
		kb, err := b.createBucket(bktKinds)
		if err != nil {
			return err
		}
		for _, d := range diags {
			if db.get([]byte(d.Key)) != nil {
				continue
			}
			payload, _ := json.Marshal(Diagnostic{Kind: d.Kind, Detail: d.Detail})
			if err := db.put([]byte(d.Key), payload); err != nil {
				return err
			}
			if err := addCounter(kb, d.Kind, 1); err != nil {
				return err
			}
			added++
		}
		return nil
	})
	if err != nil {
		return s.wrap("diagnostics", err)
	}
	if added > 0 {
		s.notify(Event{Kind: EventDiagnostics, Session: session, Version: version})
	}
	return nil
}

func addCounter(b kvBucket, name string, delta int64) error {
	cur := int64(u64(b.get([]byte(name))))
	return putU64(b, []byte(name), uint64(cur+delta))
}

// IncrStats implements Store.
func (s *EmbeddedStore) IncrStats(ctx context.Context, session string, delta map[string]int64) error {
	return s.UpdateStats(ctx, session, StatsUpdate{Incr: delta})
}

// UpdateStats implements Store.
func (s *EmbeddedStore) UpdateStats(ctx context.Context, session string, u StatsUpdate) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if err := u.validate(); err != nil {
		return err
	}
	if u.empty() {
		return nil
	}
	return s.updateCounters(ctx, session, func(cb kvBucket) error {
		for k, v := range u.Incr { // all checked before any write: the memory store has no rollback
			cur := int64(u64(cb.get([]byte(k))))
			if sum := cur + v; (v > 0 && sum < cur) || (v < 0 && sum > cur) {
				return overflow(k)
			}
		}
		for k, v := range u.Incr {
			if err := addCounter(cb, k, v); err != nil {
				return err
			}
		}
		for k, v := range u.Set {
			if err := putU64(cb, []byte(k), uint64(v)); err != nil {
				return err
			}
		}
		for k, v := range u.Max {
			if cur := cb.get([]byte(k)); cur == nil || int64(u64(cur)) < v {
				if err := putU64(cb, []byte(k), uint64(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// updateCounters runs write over the session's counters bucket in one transaction that also
// stamps last-seen.
func (s *EmbeddedStore) updateCounters(ctx context.Context, session string, write func(cb kvBucket) error) error {
	if err := ctxErr(ctx, "stats"); err != nil {
		return err
	}
	now := s.now()
	return s.wrap("stats", s.db.update(func(tx kvTx) error {
		b, err := s.writable(tx, session, now)
		if err != nil {
			return err
		}
		cb, err := b.createBucket(bktCounters)
		if err != nil {
			return err
		}
		return write(cb)
	}))
}

// PutBlob implements Store.
func (s *EmbeddedStore) PutBlob(ctx context.Context, session, key string, data []byte) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if err := validateBlobKey(key); err != nil {
		return err
	}
	if err := ctxErr(ctx, "putblob"); err != nil {
		return err
	}
	enc := encodeValue(data)
	now := s.now()
	return s.wrap("putblob", s.db.update(func(tx kvTx) error {
		b, err := s.writable(tx, session, now)
		if err != nil {
			return err
		}
		bb, err := b.createBucket(bktBlobs)
		if err != nil {
			return err
		}
		return bb.put([]byte(key), enc)
	}))
}

// DeleteBlob implements Store.
func (s *EmbeddedStore) DeleteBlob(ctx context.Context, session, key string) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if err := validateBlobKey(key); err != nil {
		return err
	}
	if err := ctxErr(ctx, "delblob"); err != nil {
		return err
	}
	now := s.now()
	return s.wrap("delblob", s.db.update(func(tx kvTx) error {
		b := s.session(tx, session, now)
		if b == nil {
			return nil
		}
		if bb := b.bucket(bktBlobs); bb != nil {
			return bb.del([]byte(key))
		}
		return nil
	}))
}

// GetBlob implements Store.
func (s *EmbeddedStore) GetBlob(ctx context.Context, session, key string) ([]byte, error) {
	if err := s.check(session); err != nil {
		return nil, err
	}
	if err := validateBlobKey(key); err != nil {
		return nil, err
	}
	if err := ctxErr(ctx, "getblob"); err != nil {
		return nil, err
	}
	var out []byte
	now := s.now()
	err := s.db.view(func(tx kvTx) error {
		b := s.session(tx, session, now)
		if b == nil {
			return nil
		}
		if bb := b.bucket(bktBlobs); bb != nil {
			if v := bb.get([]byte(key)); v != nil {
				d, err := decodeValue(v)
				if err != nil {
					return err
				}
				if d == nil {
					d = []byte{}
				}
				out = d
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("getblob", err)
	}
	if out == nil {
		return nil, fmt.Errorf("%w: blob %q of session (%d-byte id)", ErrNotFound, key, len(session))
	}
	return out, nil
}

// AcquireLease implements Store.
func (s *EmbeddedStore) AcquireLease(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error) {
	if err := s.checkWrite(session); err != nil {
		return Lease{}, err
	}
	if _, err := leaseMillis(ttl); err != nil {
		return Lease{}, err
	}
	if owner == "" {
		return Lease{}, invalidArg("empty lease owner")
	}
	if err := ctxErr(ctx, "acquire lease"); err != nil {
		return Lease{}, err
	}
	now := s.now()
	var out Lease
	err := s.db.update(func(tx kvTx) error {
		if b := s.session(tx, session, now); b != nil {
			if l := s.lease(b, now); l != nil && l.Owner != owner {
				return &LeaseHeldError{Lease: Lease{Session: session, Owner: l.Owner, Token: l.Token, Expires: time.UnixMilli(l.Expires)}}
			}
		}
		b, err := s.writable(tx, session, now)
		if err != nil {
			return err
		}
		exp := now.Add(ttl).UnixMilli()
		if l := s.lease(b, now); l != nil { // held by owner: extend, keep the token
			l.Expires = exp
			raw, _ := json.Marshal(l)
			out = Lease{Session: session, Owner: owner, Token: l.Token, Expires: time.UnixMilli(exp)}
			return b.put(keyLease, raw)
		}
		tok := max(u64(b.get(keyFence))+1, uint64(now.UnixMicro()))
		raw, _ := json.Marshal(embLease{Token: tok, Owner: owner, Expires: exp})
		if err := putU64(b, keyFence, tok); err != nil {
			return err
		}
		out = Lease{Session: session, Owner: owner, Token: tok, Expires: time.UnixMilli(exp)}
		return b.put(keyLease, raw)
	})
	if err != nil {
		return Lease{}, s.wrap("acquire lease", err)
	}
	return out, nil
}

// RenewLease implements Store.
func (s *EmbeddedStore) RenewLease(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	if err := s.checkWrite(lease.Session); err != nil {
		return Lease{}, err
	}
	if _, err := leaseMillis(ttl); err != nil {
		return Lease{}, err
	}
	if err := ctxErr(ctx, "renew lease"); err != nil {
		return Lease{}, err
	}
	now := s.now()
	err := s.db.update(func(tx kvTx) error {
		b := s.session(tx, lease.Session, now)
		var l *embLease
		if b != nil {
			l = s.lease(b, now)
		}
		if l == nil || l.Token != lease.Token || l.Owner != lease.Owner {
			return fmt.Errorf("%w: token %d on session (%d-byte id)", ErrLeaseLost, lease.Token, len(lease.Session))
		}
		l.Expires = now.Add(ttl).UnixMilli()
		raw, _ := json.Marshal(l)
		lease.Expires = time.UnixMilli(l.Expires)
		return b.put(keyLease, raw)
	})
	if err != nil {
		return Lease{}, s.wrap("renew lease", err)
	}
	return lease, nil
}

// ReleaseLease implements Store.
func (s *EmbeddedStore) ReleaseLease(ctx context.Context, lease Lease) error {
	if err := s.checkWrite(lease.Session); err != nil {
		return err
	}
	if err := ctxErr(ctx, "release lease"); err != nil {
		return err
	}
	now := s.now()
	return s.wrap("release lease", s.db.update(func(tx kvTx) error {
		b := s.session(tx, lease.Session, now)
		var l *embLease
		if b != nil {
			l = s.lease(b, now)
		}
		if l == nil || l.Token != lease.Token || l.Owner != lease.Owner {
			return fmt.Errorf("%w: token %d on session (%d-byte id)", ErrLeaseLost, lease.Token, len(lease.Session))
		}
		return b.del(keyLease)
	}))
}

// List implements Store.
func (s *EmbeddedStore) List(ctx context.Context) ([]SessionInfo, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if err := ctxErr(ctx, "list"); err != nil {
		return nil, err
	}
	now := s.now()
	var out []SessionInfo
	err := s.db.view(func(tx kvTx) error {
		root := tx.bucket(bktSessions)
		if root == nil {
			return nil
		}
		var ferr error
		err := forEachBucket(root, func(id []byte, b kvBucket) {
			if ferr != nil || s.expired(b, now) {
				return
			}
			info := SessionInfo{Session: string(id), Version: u64(b.get(keyVersion)),
				LastSeen: time.UnixMilli(int64(u64(b.get(keySeen)))), StateBytes: int64(len(b.get(keyState))),
				Stats: map[string]int64{}, DiagnosticCounts: map[string]int64{}}
			if ferr = readCounters(b.bucket(bktCounters), info.Stats); ferr != nil {
				return
			}
			if ferr = readCounters(b.bucket(bktKinds), info.DiagnosticCounts); ferr != nil {
				return
			}
			out = append(out, info)
		})
		if err != nil {
			return err
		}
		return ferr
	})
	if err != nil {
		return nil, s.wrap("list", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	if out == nil {
		out = []SessionInfo{}
	}
	return out, nil
}

// Delete implements Store.
func (s *EmbeddedStore) Delete(ctx context.Context, session string) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if err := ctxErr(ctx, "delete"); err != nil {
		return err
	}
	existed := false
	err := s.db.update(func(tx kvTx) error {
		root := tx.bucket(bktSessions)
		if root == nil || root.bucket([]byte(session)) == nil {
			return nil
		}
		existed = true
		return root.deleteBucket([]byte(session))
	})
	if err != nil {
		return s.wrap("delete", err)
	}
	if existed {
		s.notify(Event{Kind: EventDeleted, Session: session})
	}
	return nil
}

// Watch implements Store with in-process delivery.
func (s *EmbeddedStore) Watch(ctx context.Context) (<-chan Event, error) {
	ch := make(chan Event, 256)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.stop:
		}
		s.mu.Lock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
		s.mu.Unlock()
	}()
	return ch, nil
}

func (s *EmbeddedStore) notify(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- ev:
		default: // a slow reader misses hints; it reconciles with List
		}
	}
}

// Close implements Store.
func (s *EmbeddedStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ch := range s.subs {
		delete(s.subs, ch)
		close(ch)
	}
	close(s.stop)
	s.mu.Unlock()
	s.wg.Wait()
	return s.db.close()
}

var _ Store = (*EmbeddedStore)(nil)
var _ Store = (*RedisStore)(nil)
