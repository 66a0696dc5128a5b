package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore is the Redis implementation of Store (standalone, Sentinel or Cluster). All keys
// of one session share the hash tag {<EncodeSessionID(id)>}; every mutation is one Lua script
// (one round trip, two when the server lost its script cache).
type RedisStore struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // non-nil for Cluster
	prefix  string
	ttl     time.Duration
	channel string
	// readOnly (OpenReadOnly): writes fail with ErrReadOnly and Load refreshes nothing.
	readOnly bool

	mu     sync.Mutex
	closed bool
	subs   map[*redis.PubSub]struct{}
}

// NewRedisStore wraps an existing go-redis client. prefix (default "condense") starts every
// key; ttl is the idle expiry (0 disables it). The store owns rdb: Close closes it.
func NewRedisStore(ctx context.Context, rdb redis.UniversalClient, prefix string, ttl time.Duration) (*RedisStore, error) {
	if prefix == "" {
		prefix = "condense"
	}
	if !verbatimSafe(prefix) {
		return nil, invalidArg("key prefix %q must be [A-Za-z0-9._-]", prefix)
	}
	s := &RedisStore{rdb: rdb, prefix: prefix, ttl: ttl, channel: prefix + ":events", subs: map[*redis.PubSub]struct{}{}}
	if c, ok := rdb.(*redis.ClusterClient); ok {
		s.cluster = c
	}
	// Preload the scripts so Load is one round trip (EVALSHA) from the first call.
	load := func(ctx context.Context, c *redis.Client) error {
		for _, sc := range allScripts {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if s.cluster != nil {
		err = s.cluster.ForEachMaster(ctx, load)
	} else if c, ok := rdb.(*redis.Client); ok {
		err = load(ctx, c)
	} else {
		for _, sc := range allScripts {
			if err = sc.Load(ctx, rdb).Err(); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, s.wrap("connect", err)
	}
	return s, nil
}

// redisKeys returns the session's keys in script order: meta, counters, diagnostics,
// diagnostic kinds, blobs, lease.
func (s *RedisStore) redisKeys(session string) []string {
	base := s.prefix + ":{" + EncodeSessionID(session) + "}:"
	return []string{base + "m", base + "c", base + "d", base + "k", base + "b", base + "l"}
}

func (s *RedisStore) ttlArg() string {
	if s.ttl <= 0 {
		return "0"
	}
	return strconv.FormatInt(max(s.ttl.Milliseconds(), 1), 10)
}

// touchAfterArg is how old last-seen must be before Load refreshes it and the idle TTL: a
// tenth of the TTL, at most one minute (one minute when expiry is off).
func (s *RedisStore) touchAfterArg() string {
	if s.readOnly {
		return strconv.FormatInt(math.MaxInt64, 10)
	}
	d := time.Minute
	if s.ttl > 0 {
		d = min(s.ttl/10, time.Minute)
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

func (s *RedisStore) check(session string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ValidateSessionID(session)
}

// checkWrite is check for the methods that write.
func (s *RedisStore) checkWrite(session string) error {
	if s.readOnly {
		return ErrReadOnly
	}
	return s.check(session)
}

// wrap classifies a go-redis error: connection failures, timeouts, context ends and the
// server's transient refusals become ErrUnavailable.
func (s *RedisStore) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%w: %s: %w", ErrClosed, op, err)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !isNetErr(err) {
		msg := strings.TrimPrefix(err.Error(), "ERR ")
		for _, p := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "BUSY", "OOM", "NOREPLICAS", "MOVED", "ASK"} {
			if strings.HasPrefix(msg, p) {
				return unavailable("redis "+op, err)
			}
		}
		return fmt.Errorf("store: redis %s: %w", op, err)
	}
	return unavailable("redis "+op, err)
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Load implements Store.
func (s *RedisStore) Load(ctx context.Context, session string) (*Snapshot, error) {
	return s.load(ctx, session, 0)
}

// LoadKnown implements KnownStateLoader: the state of the known version stays in Redis.
func (s *RedisStore) LoadKnown(ctx context.Context, session string, known uint64) (*Snapshot, error) {
	return s.load(ctx, session, known)
}

// load is Load; a state whose version is known (> 0) is left out of the reply.
func (s *RedisStore) load(ctx context.Context, session string, known uint64) (*Snapshot, error) {
	if err := s.check(session); err != nil {
		return nil, err
	}
	snap := &Snapshot{Session: session, Stats: map[string]int64{}, Diagnostics: []Diagnostic{}, DiagnosticCounts: map[string]int64{}}
	res, err := scriptLoad.Run(ctx, s.rdb, s.redisKeys(session), session, s.ttlArg(), s.touchAfterArg(), strconv.FormatUint(known, 10)).Slice()
	if err != nil {
		return nil, s.wrap("load", err)
	}
	if len(res) == 0 {
		return snap, nil
	}
	if len(res) != 9 {
		return nil, fmt.Errorf("%w: load reply has %d elements", ErrCorrupt, len(res))
	}
	if snap.Version, err = strconv.ParseUint(str(res[0]), 10, 64); err != nil {
		return nil, fmt.Errorf("%w: version %q", ErrCorrupt, str(res[0]))
	}
	snap.StateKnown = known > 0 && snap.Version == known
	if snap.Version > 0 && !snap.StateKnown {
		if snap.State, err = decodeValue([]byte(str(res[1]))); err != nil {
			return nil, err
		}
		if snap.State == nil {
			snap.State = []byte{}
		}
	}
	snap.LastSeen = msTime(str(res[2]))
	if snap.Stats, err = int64Pairs(res[3]); err != nil {
		return nil, err
	}
	diags, _ := res[4].([]any)
	for i := 0; i+1 < len(diags); i += 2 {
		var d Diagnostic
		if err := json.Unmarshal([]byte(str(diags[i+1])), &d); err != nil {
			return nil, fmt.Errorf("%w: diagnostic %q: %w", ErrCorrupt, str(diags[i]), err)
		}
		d.Key = str(diags[i])
		snap.Diagnostics = append(snap.Diagnostics, d)
	}
	sort.Slice(snap.Diagnostics, func(i, j int) bool { return snap.Diagnostics[i].Key < snap.Diagnostics[j].Key })
	if snap.DiagnosticCounts, err = int64Pairs(res[5]); err != nil {
		return nil, err
	}
	if lv := str(res[6]); lv != "" {
		pttl, _ := res[7].(int64)
		if l, ok := parseLeaseValue(session, lv); ok && pttl > 0 {
			l.Expires = msTime(str(res[8])).Add(time.Duration(pttl) * time.Millisecond)
			snap.Lease = &l
		}
	}
	return snap, nil
}

func parseLeaseValue(session, v string) (Lease, bool) {
	tok, owner, ok := strings.Cut(v, " ")
	if !ok {
		return Lease{}, false
	}
	t, err := strconv.ParseUint(tok, 10, 64)
	if err != nil {
		return Lease{}, false
	}
	return Lease{Session: session, Owner: owner, Token: t}, true
}

func leaseValue(l Lease) string { return strconv.FormatUint(l.Token, 10) + " " + l.Owner }

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

func msTime(ms string) time.Time {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func int64Pairs(v any) (map[string]int64, error) {
	out := map[string]int64{}
	arr, _ := v.([]any)
	for i := 0; i+1 < len(arr); i += 2 {
		n, err := strconv.ParseInt(str(arr[i+1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: counter %q: %w", ErrCorrupt, str(arr[i]), err)
		}
		out[str(arr[i])] = n
	}
	return out, nil
}

// Commit implements Store.
func (s *RedisStore) Commit(ctx context.Context, session string, expectVersion uint64, state []byte, fence uint64) (uint64, error) {
	if err := s.checkWrite(session); err != nil {
		return 0, err
	}
	res, err := scriptCommit.Run(ctx, s.rdb, s.redisKeys(session), session,
		strconv.FormatUint(expectVersion, 10), strconv.FormatUint(fence, 10), encodeValue(state), s.ttlArg(), s.channel).Slice()
	if err != nil {
		return 0, s.wrap("commit", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("%w: commit reply has %d elements", ErrCorrupt, len(res))
	}
	n, _ := strconv.ParseUint(str(res[1]), 10, 64)
	switch res[0].(int64) {
	case 1:
		return n, nil
	case 0:
		return 0, &ConflictError{Session: session, Expected: expectVersion, Actual: n}
	default:
		return 0, &FencedError{Session: session, Token: fence, Current: n}
	}
}

// AddDiagnostics implements Store.
func (s *RedisStore) AddDiagnostics(ctx context.Context, session string, diags []Diagnostic) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if len(diags) == 0 {
		return nil
	}
	args := []any{session, s.ttlArg(), s.channel}
	for _, d := range diags {
		if err := validateDiagnostic(d); err != nil {
			return err
		}
		payload, _ := json.Marshal(Diagnostic{Kind: d.Kind, Detail: d.Detail})
		args = append(args, d.Key, d.Kind, payload)
	}
	return s.wrap("diagnostics", scriptDiag.Run(ctx, s.rdb, s.redisKeys(session), args...).Err())
}

// IncrStats implements Store.
func (s *RedisStore) IncrStats(ctx context.Context, session string, delta map[string]int64) error {
	return s.UpdateStats(ctx, session, StatsUpdate{Incr: delta})
}

// UpdateStats implements Store.
func (s *RedisStore) UpdateStats(ctx context.Context, session string, u StatsUpdate) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if err := u.validate(); err != nil {
		return err
	}
	if u.empty() {
		return nil
	}
	args := []any{session, s.ttlArg(), len(u.Incr), len(u.Set)}
	for _, m := range []map[string]int64{u.Incr, u.Set, u.Max} {
		for k, v := range m {
			args = append(args, k, strconv.FormatInt(v, 10))
		}
	}
	err := scriptUpdateStats.Run(ctx, s.rdb, s.redisKeys(session), args...).Err()
	const refused = "condense: counter overflow: "
	var rerr redis.Error
	if msg := fmt.Sprint(err); errors.As(err, &rerr) && strings.Contains(msg, refused) {
		return overflow(msg[strings.Index(msg, refused)+len(refused):])
	}
	return s.wrap("updatestats", err)
}

// PutBlob implements Store.
func (s *RedisStore) PutBlob(ctx context.Context, session, key string, data []byte) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if err := validateBlobKey(key); err != nil {
		return err
	}
	return s.wrap("putblob", scriptPutBlob.Run(ctx, s.rdb, s.redisKeys(session), session, s.ttlArg(), key, encodeValue(data)).Err())
}

// DeleteBlob implements Store.
func (s *RedisStore) DeleteBlob(ctx context.Context, session, key string) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	if err := validateBlobKey(key); err != nil {
		return err
	}
	return s.wrap("delblob", scriptDelBlob.Run(ctx, s.rdb, s.redisKeys(session), session, key).Err())
}

// GetBlob implements Store.
func (s *RedisStore) GetBlob(ctx context.Context, session, key string) ([]byte, error) {
	if err := s.check(session); err != nil {
		return nil, err
	}
	if err := validateBlobKey(key); err != nil {
		return nil, err
	}
	b, err := s.rdb.HGet(ctx, s.redisKeys(session)[4], key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: blob %q of session (%d-byte id)", ErrNotFound, key, len(session))
	}
	if err != nil {
		return nil, s.wrap("getblob", err)
	}
	return decodeValue(b)
}

func leaseMillis(ttl time.Duration) (string, error) {
	if ttl < time.Millisecond {
		return "", invalidArg("lease ttl %s is shorter than 1ms", ttl)
	}
	return strconv.FormatInt(ttl.Milliseconds(), 10), nil
}

// AcquireLease implements Store.
func (s *RedisStore) AcquireLease(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error) {
	if err := s.checkWrite(session); err != nil {
		return Lease{}, err
	}
	ms, err := leaseMillis(ttl)
	if err != nil {
		return Lease{}, err
	}
	if owner == "" {
		return Lease{}, invalidArg("empty lease owner")
	}
	res, err := scriptAcquire.Run(ctx, s.rdb, s.redisKeys(session), session, s.ttlArg(), owner, ms).Slice()
	if err != nil {
		return Lease{}, s.wrap("acquire lease", err)
	}
	tok, _ := strconv.ParseUint(str(res[1]), 10, 64)
	if res[0].(int64) == 1 {
		return Lease{Session: session, Owner: owner, Token: tok, Expires: msTime(str(res[2]))}, nil
	}
	return Lease{}, &LeaseHeldError{Lease: Lease{Session: session, Owner: str(res[2]), Token: tok, Expires: msTime(str(res[3]))}}
}

// RenewLease implements Store.
func (s *RedisStore) RenewLease(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	if err := s.checkWrite(lease.Session); err != nil {
		return Lease{}, err
	}
	ms, err := leaseMillis(ttl)
	if err != nil {
		return Lease{}, err
	}
	res, err := scriptRenew.Run(ctx, s.rdb, s.redisKeys(lease.Session), leaseValue(lease), ms).Result()
	if err != nil {
		return Lease{}, s.wrap("renew lease", err)
	}
	if n, ok := res.(int64); ok && n == 0 {
		return Lease{}, fmt.Errorf("%w: token %d on session (%d-byte id)", ErrLeaseLost, lease.Token, len(lease.Session))
	}
	lease.Expires = msTime(str(res))
	return lease, nil
}

// ReleaseLease implements Store.
func (s *RedisStore) ReleaseLease(ctx context.Context, lease Lease) error {
	if err := s.checkWrite(lease.Session); err != nil {
		return err
	}
	n, err := scriptRelease.Run(ctx, s.rdb, s.redisKeys(lease.Session), leaseValue(lease)).Int64()
	if err != nil {
		return s.wrap("release lease", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: token %d on session (%d-byte id)", ErrLeaseLost, lease.Token, len(lease.Session))
	}
	return nil
}

// Delete implements Store.
func (s *RedisStore) Delete(ctx context.Context, session string) error {
	if err := s.checkWrite(session); err != nil {
		return err
	}
	return s.wrap("delete", scriptDelete.Run(ctx, s.rdb, s.redisKeys(session), session, s.channel).Err())
}

// List implements Store. It SCANs every master for meta keys, then reads each session's
// summary with pipelined HMGET/HSTRLEN/HGETALL.
func (s *RedisStore) List(ctx context.Context) ([]SessionInfo, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	pattern := s.prefix + ":{*}:m"
	var mu sync.Mutex
	var metaKeys []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var local []string
		for iter.Next(ctx) {
			local = append(local, iter.Val())
		}
		mu.Lock()
		metaKeys = append(metaKeys, local...)
		mu.Unlock()
		return iter.Err()
	}
	var err error
	if s.cluster != nil {
		err = s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, s.wrap("list", err)
	}
	out := make([]SessionInfo, 0, len(metaKeys))
	const batch = 500
	for lo := 0; lo < len(metaKeys); lo += batch {
		chunk := metaKeys[lo:min(lo+batch, len(metaKeys))]
		pipe := s.rdb.Pipeline()
		metas := make([]*redis.SliceCmd, len(chunk))
		sizes := make([]*redis.IntCmd, len(chunk))
		stats := make([]*redis.MapStringStringCmd, len(chunk))
		kinds := make([]*redis.MapStringStringCmd, len(chunk))
		for i, mk := range chunk {
			base := strings.TrimSuffix(mk, "m")
			metas[i] = pipe.HMGet(ctx, mk, "id", "v", "seen")
			sizes[i] = pipe.HStrLen(ctx, mk, "s")
			stats[i] = pipe.HGetAll(ctx, base+"c")
			kinds[i] = pipe.HGetAll(ctx, base+"k")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, s.wrap("list", err)
		}
		for i := range chunk {
			m := metas[i].Val()
			if len(m) != 3 || m[0] == nil { // expired between SCAN and HMGET
				continue
			}
			info := SessionInfo{Session: str(m[0]), LastSeen: msTime(str(m[2])), StateBytes: sizes[i].Val()}
			info.Version, _ = strconv.ParseUint(str(m[1]), 10, 64)
			if info.Stats, err = stringMapInt(stats[i].Val()); err != nil {
				return nil, err
			}
			if info.DiagnosticCounts, err = stringMapInt(kinds[i].Val()); err != nil {
				return nil, err
			}
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	return out, nil
}

func stringMapInt(m map[string]string) (map[string]int64, error) {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: counter %q: %w", ErrCorrupt, k, err)
		}
		out[k] = n
	}
	return out, nil
}

// Watch implements Store with Redis pub/sub on "<prefix>:events" (in Cluster, PUBLISH reaches
// every node, so one subscription sees all sessions).
func (s *RedisStore) Watch(ctx context.Context) (<-chan Event, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.mu.Unlock()
	ps := s.rdb.Subscribe(ctx, s.channel)
	if _, err := ps.Receive(ctx); err != nil { // the subscription confirmation
		_ = ps.Close()
		return nil, s.wrap("watch", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ps.Close()
		return nil, ErrClosed
	}
	s.subs[ps] = struct{}{}
	s.mu.Unlock()
	out := make(chan Event, 256)
	msgs := ps.Channel(redis.WithChannelSize(256))
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			delete(s.subs, ps)
			s.mu.Unlock()
			_ = ps.Close()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				ev, ok := parseEvent(m.Payload)
				if !ok {
					continue
				}
				select {
				case out <- ev:
				default: // a slow reader misses hints; it reconciles with List
				}
			}
		}
	}()
	return out, nil
}

// parseEvent decodes "<kind letter><version>:<session id>".
func parseEvent(p string) (Event, bool) {
	if len(p) < 3 {
		return Event{}, false
	}
	var kind EventKind
	switch p[0] {
	case 'c':
		kind = EventCommitted
	case 'd':
		kind = EventDiagnostics
	case 'x':
		kind = EventDeleted
	default:
		return Event{}, false
	}
	v, id, ok := strings.Cut(p[1:], ":")
	if !ok {
		return Event{}, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return Event{}, false
	}
	return Event{Kind: kind, Session: id, Version: n}, true
}

// Close implements Store.
func (s *RedisStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for ps := range subs {
		_ = ps.Close()
	}
	return s.rdb.Close()
}
