// Package sessionindex keeps, per PruningPolicy, an open session store and the latest listing
// of its sessions, and reports what each listing changed (the operator's view of the store).
package sessionindex

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/condense-dev/condense/internal/store"
)

// Opener opens the session store at url (the forms store.Open accepts).
type Opener func(ctx context.Context, url string) (store.Store, error)

// OpenRedis opens a policy's shared store with store.Open, with the URL's own options (key
// prefix, ttl); any URL but a Redis one (redis://, rediss://, redis+sentinel://,
// redis+cluster:// and their TLS forms) is an error.
func OpenRedis(ctx context.Context, url string) (store.Store, error) {
	scheme, _, _ := strings.Cut(url, ":")
	switch scheme {
	case "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
		return store.Open(ctx, url)
	default:
		return nil, fmt.Errorf("store URL: the operator needs a shared Redis store (redis://, rediss://, redis+sentinel://, redis+cluster://), got scheme %q", scheme)
	}
}

// Change is reported by the Index after a listing: the sessions of one policy
// that appeared, changed or disappeared since the previous listing.
type Change struct {
	// Policy is the PruningPolicy the store belongs to.
	Policy types.NamespacedName
	// Changed holds session ids that are new or whose counters, version or last-seen time moved.
	Changed []string
	// Removed holds session ids no longer in the store.
	Removed []string
	// ReachabilityChanged is true when the store became reachable or unreachable.
	ReachabilityChanged bool
}

// Index keeps, per PruningPolicy, an open store and the latest listing of its sessions.
// A listing is refreshed when the store reports a change (at most once per MinInterval) and
// every Resync; each refresh reports what changed to Notify. It is safe for concurrent use.
type Index struct {
	// Open opens a store; OpenRedis when nil.
	Open Opener
	// MinInterval rate-limits listings triggered by change notifications (default 1s).
	MinInterval time.Duration
	// Resync lists every store at least this often (default 30s).
	Resync time.Duration
	// Notify receives the changes of every listing; it must not block for long.
	Notify func(Change)
	// Log receives store errors.
	Log logr.Logger

	mu       sync.Mutex
	policies map[types.NamespacedName]*policyStore
	failures map[types.NamespacedName]openFailure
	ctx      context.Context
}

// openFailure remembers a failed open so that reconciles do not block on it again at once.
type openFailure struct {
	url string
	err error
	at  time.Time
}

// openRetryInterval is how long a failed store open is reported without retrying.
const openRetryInterval = 5 * time.Second

type policyStore struct {
	url    string
	st     store.Store
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	sessions map[string]store.SessionInfo
	err      error // of the last listing
	listedAt time.Time
}

// Start runs until ctx ends and then closes every store (manager.Runnable).
func (x *Index) Start(ctx context.Context) error {
	x.mu.Lock()
	x.ctx = ctx
	x.mu.Unlock()
	<-ctx.Done()
	x.mu.Lock()
	ps := x.policies
	x.policies = nil
	x.mu.Unlock()
	for _, p := range ps {
		p.stop()
	}
	return nil
}

func (p *policyStore) stop() {
	p.cancel()
	<-p.done
	_ = p.st.Close()
}

func (x *Index) baseContext() context.Context {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ctx != nil {
		return x.ctx
	}
	return context.Background()
}

// Ensure makes sure the policy's store at url is open and watched, replacing a store with a
// different URL. It returns the error of the latest listing (nil when the store is reachable).
// The first call for a policy lists synchronously.
func (x *Index) Ensure(ctx context.Context, policy types.NamespacedName, url string) error {
	x.mu.Lock()
	p := x.policies[policy]
	if p != nil && p.url != url {
		delete(x.policies, policy)
		x.mu.Unlock()
		p.stop()
		x.mu.Lock()
		p = nil
	}
	x.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	}
	x.mu.Lock()
	if f, ok := x.failures[policy]; ok && f.url == url && time.Since(f.at) < openRetryInterval {
		x.mu.Unlock()
		return f.err
	}
	x.mu.Unlock()
	open := x.Open
	if open == nil {
		open = OpenRedis
	}
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	st, err := open(octx, url)
	cancel()
	if err != nil {
		err = fmt.Errorf("open session store: %w", err)
		x.mu.Lock()
		if x.failures == nil {
			x.failures = map[types.NamespacedName]openFailure{}
		}
		x.failures[policy] = openFailure{url: url, err: err, at: time.Now()}
		x.mu.Unlock()
		return err
	}
	lctx, lcancel := context.WithCancel(x.baseContext())
	p = &policyStore{url: url, st: st, cancel: lcancel, done: make(chan struct{}), sessions: map[string]store.SessionInfo{}}
	// Subscribe before the first listing: a change between the two is then either listed or
	// notified, never missed until the next resync.
	events := x.watch(lctx, policy, p)
	x.refresh(ctx, policy, p)
	x.mu.Lock()
	if x.policies == nil {
		x.policies = map[types.NamespacedName]*policyStore{}
	}
	if old := x.policies[policy]; old != nil {
		// Lost a race with a concurrent Ensure: keep the first one.
		x.mu.Unlock()
		lcancel()
		close(p.done)
		_ = st.Close()
		old.mu.Lock()
		defer old.mu.Unlock()
		return old.err
	}
	x.policies[policy] = p
	delete(x.failures, policy)
	x.mu.Unlock()
	go x.loop(lctx, policy, p, events)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Forget closes the policy's store and drops its listing.
func (x *Index) Forget(policy types.NamespacedName) {
	x.mu.Lock()
	p := x.policies[policy]
	delete(x.policies, policy)
	delete(x.failures, policy)
	x.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// Lookup returns the listed info of one session. ok is false when the session is not in the
// latest listing; err is the latest listing's error, or ErrNotWatched when the policy's store
// is not open.
func (x *Index) Lookup(policy types.NamespacedName, session string) (info store.SessionInfo, ok bool, err error) {
	p := x.get(policy)
	if p == nil {
		return store.SessionInfo{}, false, ErrNotWatched
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	info, ok = p.sessions[session]
	return info, ok, p.err
}

// Store returns the policy's open store, or nil.
func (x *Index) Store(policy types.NamespacedName) store.Store {
	if p := x.get(policy); p != nil {
		return p.st
	}
	return nil
}

// Relist refreshes the policy's listing now (used after the operator itself changed the store).
func (x *Index) Relist(ctx context.Context, policy types.NamespacedName) {
	if p := x.get(policy); p != nil {
		x.refresh(ctx, policy, p)
	}
}

// ErrNotWatched is returned by Lookup for a policy whose store is not open.
var ErrNotWatched = errors.New("session store of the policy is not open yet")

func (x *Index) get(policy types.NamespacedName) *policyStore {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.policies[policy]
}

func (x *Index) interval() (time.Duration, time.Duration) {
	mi, rs := x.MinInterval, x.Resync
	if mi <= 0 {
		mi = time.Second
	}
	if rs <= 0 {
		rs = 30 * time.Second
	}
	return mi, rs
}

// watch subscribes to the store's change hints; nil when that fails (the loop then relies on
// its periodic resync and subscribes again there).
func (x *Index) watch(ctx context.Context, policy types.NamespacedName, p *policyStore) <-chan store.Event {
	ch, err := p.st.Watch(ctx)
	if err != nil {
		x.Log.V(1).Info("store watch failed; relying on periodic resync", "policy", policy, "error", err.Error())
		return nil
	}
	return ch
}

// loop relists the store on change hints from events (rate limited) and on every resync.
func (x *Index) loop(ctx context.Context, policy types.NamespacedName, p *policyStore, events <-chan store.Event) {
	defer close(p.done)
	minInterval, resync := x.interval()
	tick := time.NewTicker(resync)
	defer tick.Stop()
	var pending <-chan time.Time
	var pendingTimer *time.Timer
	for {
		select {
		case <-ctx.Done():
			if pendingTimer != nil {
				pendingTimer.Stop()
			}
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				if ctx.Err() == nil {
					// The subscription ended (store outage); resubscribe at the next resync.
					continue
				}
				return
			}
			if pending == nil {
				p.mu.Lock()
				wait := minInterval - time.Since(p.listedAt)
				p.mu.Unlock()
				pendingTimer = time.NewTimer(max(wait, 0))
				pending = pendingTimer.C
			}
		case <-pending:
			pending, pendingTimer = nil, nil
			x.refresh(ctx, policy, p)
		case <-tick.C:
			if events == nil {
				events = x.watch(ctx, policy, p)
			}
			x.refresh(ctx, policy, p)
		}
	}
}

func infoEqual(a, b store.SessionInfo) bool {
	return a.Version == b.Version && a.LastSeen.Equal(b.LastSeen) && a.StateBytes == b.StateBytes &&
		maps.Equal(a.Stats, b.Stats) && maps.Equal(a.DiagnosticCounts, b.DiagnosticCounts)
}

// refresh lists the store once and reports the differences.
func (x *Index) refresh(ctx context.Context, policy types.NamespacedName, p *policyStore) {
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	list, err := p.st.List(lctx)
	cancel()
	ch := Change{Policy: policy}
	p.mu.Lock()
	wasReachable := p.err == nil && !p.listedAt.IsZero()
	p.listedAt = time.Now()
	if err != nil {
		metricStoreListings.WithLabelValues(policy.Namespace, policy.Name, "error").Inc()
		p.err = err
		ch.ReachabilityChanged = wasReachable
		p.mu.Unlock()
		x.Log.V(1).Info("listing sessions failed", "policy", policy, "error", err.Error())
		if ch.ReachabilityChanged && x.Notify != nil {
			x.Notify(ch)
		}
		return
	}
	metricStoreListings.WithLabelValues(policy.Namespace, policy.Name, "ok").Inc()
	p.err = nil
	ch.ReachabilityChanged = !wasReachable
	next := make(map[string]store.SessionInfo, len(list))
	for _, info := range list {
		next[info.Session] = info
		if old, ok := p.sessions[info.Session]; !ok || !infoEqual(old, info) {
			ch.Changed = append(ch.Changed, info.Session)
		}
	}
	for id := range p.sessions {
		if _, ok := next[id]; !ok {
			ch.Removed = append(ch.Removed, id)
		}
	}
	p.sessions = next
	p.mu.Unlock()
	if x.Notify != nil && (len(ch.Changed) > 0 || len(ch.Removed) > 0 || ch.ReachabilityChanged) {
		x.Notify(ch)
	}
}

var metricStoreListings = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "condense_operator_store_listings_total",
	Help: "Session store listings by the operator, by result (ok or error).",
}, []string{"namespace", "policy", "result"})

func init() {
	metrics.Registry.MustRegister(metricStoreListings)
}
