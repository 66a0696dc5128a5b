package flush

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/condense-dev/condense/internal/store"
)

// ErrClosed is returned by Enqueue after Close.
var ErrClosed = errors.New("flush: runner closed")

// Flusher submits flushes; the proxy uses it without caring where flushes run.
// *InProcess and *Queue implement it.
type Flusher interface {
	// Submit starts (or joins) the flush of job and returns a ticket to wait on.
	Submit(ctx context.Context, job *Job) (*Ticket, error)
}

// Ticket is a handle on a submitted flush.
type Ticket struct {
	done chan struct{}
	res  *Result
	err  error
	wait func(ctx context.Context) (*Result, error) // queued jobs: poll the job status
}

// Wait blocks until the flush finished or ctx ends (then it returns ctx's error; the flush
// keeps running). Use a context with a deadline for a bounded wait.
func (t *Ticket) Wait(ctx context.Context) (*Result, error) {
	if t.wait != nil {
		return t.wait(ctx)
	}
	select {
	case <-t.done:
		return t.res, t.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// InProcess runs flushes in background goroutines: at most one per session (a newer waiting job
// replaces an older one) and MaxConcurrent overall. Submitting a (session, hash) already running
// or waiting returns the same ticket.
type InProcess struct {
	Orch *Orchestrator
	// MaxConcurrent bounds concurrent flushes (default 4).
	MaxConcurrent int
	// Nice, when > 0, runs each flush on its own OS thread with its nice value raised by Nice (Linux
	// only), so the proxy's request handling comes first; goroutines a flush starts keep normal
	// priority.
	Nice int

	once     sync.Once
	niceOnce sync.Once
	mu       sync.Mutex
	base     context.Context
	cancel   context.CancelFunc
	sem      chan struct{}
	sessions map[string]*sessionQ
	closed   bool
	wg       sync.WaitGroup
}

type sessionQ struct {
	running     *Ticket
	runningHash string
	next        *Job
	nextTicket  *Ticket
}

func (p *InProcess) init() {
	p.once.Do(func() {
		p.base, p.cancel = context.WithCancel(context.Background())
		n := p.MaxConcurrent
		if n <= 0 {
			n = 4
		}
		p.sem = make(chan struct{}, n)
		p.sessions = map[string]*sessionQ{}
	})
}

// Submit implements Flusher (same as Enqueue).
func (p *InProcess) Submit(ctx context.Context, job *Job) (*Ticket, error) {
	return p.Enqueue(ctx, job)
}

// Enqueue submits job and returns its ticket at once. The flush runs detached from ctx
// (a client disconnect does not abort it); Close aborts it.
func (p *InProcess) Enqueue(ctx context.Context, job *Job) (*Ticket, error) {
	p.init()
	if err := job.Normalize(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	q := p.sessions[job.Session]
	if q == nil {
		q = &sessionQ{}
		p.sessions[job.Session] = q
	}
	switch {
	case q.running != nil && q.runningHash == job.Hash:
		return q.running, nil
	case q.running != nil && q.next != nil && q.next.Hash == job.Hash:
		return q.nextTicket, nil
	case q.running != nil:
		if q.nextTicket == nil {
			q.nextTicket = &Ticket{done: make(chan struct{})}
		}
		q.next = job // the newest request supersedes an older waiting one; its waiters share the ticket
		return q.nextTicket, nil
	}
	t := &Ticket{done: make(chan struct{})}
	p.start(q, job, t)
	return t, nil
}

// start runs job for q; p.mu is held.
func (p *InProcess) start(q *sessionQ, job *Job, t *Ticket) {
	q.running, q.runningHash = t, job.Hash
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		select {
		case p.sem <- struct{}{}:
			p.flushLowered(job, t)
			<-p.sem
		case <-p.base.Done():
			t.res, t.err = &Result{Session: job.Session, Hash: job.Hash, Outcome: OutcomeError, Error: ErrClosed.Error()}, ErrClosed
		}
		close(t.done)
		p.mu.Lock()
		defer p.mu.Unlock()
		if q.next != nil && !p.closed {
			nj, nt := q.next, q.nextTicket
			q.next, q.nextTicket = nil, nil
			p.start(q, nj, nt)
			return
		}
		if q.next != nil { // closed while waiting
			q.nextTicket.res, q.nextTicket.err = &Result{Session: q.next.Session, Hash: q.next.Hash, Outcome: OutcomeError, Error: ErrClosed.Error()}, ErrClosed
			close(q.nextTicket.done)
			q.next, q.nextTicket = nil, nil
		}
		q.running, q.runningHash = nil, ""
		delete(p.sessions, job.Session)
	}()
}

// flushLowered runs the flush of job for t; with Nice > 0 on a thread of its own at the
// lowered priority (the thread ends with the goroutine that runs it).
func (p *InProcess) flushLowered(job *Job, t *Ticket) {
	if p.Nice <= 0 {
		t.res, t.err = p.Orch.Flush(p.base, job)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := lowerThreadPriority(p.Nice); err != nil {
			p.niceOnce.Do(func() { p.Orch.log().Warn("flush: cannot lower the flush thread priority", "err", err) })
		}
		t.res, t.err = p.Orch.flushVia(p.base, job, normalPriority{p.Orch.Store})
	}()
	<-done
}

// normalPriority makes the orchestrator's store calls from another goroutine, on a
// normal-priority thread, so no store lock is held by a lowered-priority flush thread.
type normalPriority struct{ store.Store }

// onNormal runs f on a new goroutine and returns its results.
func onNormal[T any](f func() (T, error)) (T, error) {
	type out struct {
		v   T
		err error
	}
	ch := make(chan out, 1)
	go func() {
		v, err := f()
		ch <- out{v, err}
	}()
	o := <-ch
	return o.v, o.err
}

// Load implements store.Store on a normal-priority thread.
func (s normalPriority) Load(ctx context.Context, session string) (*store.Snapshot, error) {
	return onNormal(func() (*store.Snapshot, error) { return s.Store.Load(ctx, session) })
}

// LoadKnown implements store.KnownStateLoader on a normal-priority thread (Load for a store
// that does not implement it).
func (s normalPriority) LoadKnown(ctx context.Context, session string, known uint64) (*store.Snapshot, error) {
	kl, ok := s.Store.(store.KnownStateLoader)
	if !ok {
		return s.Load(ctx, session)
	}
	return onNormal(func() (*store.Snapshot, error) { return kl.LoadKnown(ctx, session, known) })
}

// Commit implements store.Store on a normal-priority thread.
func (s normalPriority) Commit(ctx context.Context, session string, expect uint64, state []byte, fence uint64) (uint64, error) {
	return onNormal(func() (uint64, error) { return s.Store.Commit(ctx, session, expect, state, fence) })
}

// IncrStats implements store.Store on a normal-priority thread.
func (s normalPriority) IncrStats(ctx context.Context, session string, delta map[string]int64) error {
	_, err := onNormal(func() (struct{}, error) { return struct{}{}, s.Store.IncrStats(ctx, session, delta) })
	return err
}

// PutBlob implements store.Store on a normal-priority thread.
func (s normalPriority) PutBlob(ctx context.Context, session, key string, data []byte) error {
	_, err := onNormal(func() (struct{}, error) { return struct{}{}, s.Store.PutBlob(ctx, session, key, data) })
	return err
}

// AcquireLease implements store.Store on a normal-priority thread.
func (s normalPriority) AcquireLease(ctx context.Context, session, owner string, ttl time.Duration) (store.Lease, error) {
	return onNormal(func() (store.Lease, error) { return s.Store.AcquireLease(ctx, session, owner, ttl) })
}

// ReleaseLease implements store.Store on a normal-priority thread.
func (s normalPriority) ReleaseLease(ctx context.Context, l store.Lease) error {
	_, err := onNormal(func() (struct{}, error) { return struct{}{}, s.Store.ReleaseLease(ctx, l) })
	return err
}

// Close stops accepting jobs, waits for running flushes until ctx ends, then aborts them.
func (p *InProcess) Close(ctx context.Context) error {
	p.init()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		p.cancel()
		return nil
	case <-ctx.Done():
		p.cancel()
		<-done
		return ctx.Err()
	}
}
