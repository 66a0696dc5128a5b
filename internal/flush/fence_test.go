package flush

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// partition is a TCP forwarder to a real server whose traffic can be held (a network
// partition between one client and the server) and released.
type partition struct {
	l    net.Listener
	mu   sync.Mutex
	cond *sync.Cond
	open bool
}

func newPartition(t *testing.T, target string) *partition {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{l: l, open: true}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { p.set(true); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	return p
}

func (p *partition) set(open bool) {
	p.mu.Lock()
	p.open = open
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *partition) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for !p.open {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: closing both ends propagates it
		}
	}
}

// TestFlushFencedAfterPartition: replica A is summarizing when it is cut off from Redis; its
// lease expires, replica B takes the lease (a newer fencing token) and commits. When A's
// network heals it finds its lease lost and gives up: it never overwrites B's commit.
func TestFlushFencedAfterPartition(t *testing.T) {
	r := newRig(t, "redis")
	part := newPartition(t, r.redis.Addr)
	ctx := context.Background()
	stA, err := store.NewRedisStore(ctx, redis.NewClient(&redis.Options{Addr: part.l.Addr().String(), ReadTimeout: 10 * time.Second}), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stA.Close()
	r.up.Enqueue(upstreamfake.Reply{Text: "- [[1:bash]] A's late summary", Delay: 4 * time.Second})

	a := r.orch("replica-a", nil)
	a.Store = stA
	a.LeaseTTL = time.Second
	type out struct {
		res *Result
		err error
	}
	aDone := make(chan out, 1)
	go func() {
		res, err := a.Flush(ctx, job("s1", "fence", 1))
		aDone <- out{res, err}
	}()
	waitFor(t, func() bool { return len(r.up.Requests()) == 1 }) // A is in its summarizer call
	part.set(false)
	time.Sleep(1500 * time.Millisecond) // A's lease (1s TTL) lapses: its renewals cannot get through

	b := r.orch("replica-b", nil)
	resB, err := b.Flush(ctx, job("s1", "fence", 1))
	if err != nil || resB.Outcome != OutcomeFlushed || resB.Version != 1 {
		t.Fatalf("B: res %+v err %v", resB, err)
	}
	part.set(true)
	var o out
	select {
	case o = <-aDone:
	case <-time.After(20 * time.Second):
		t.Fatal("A never finished")
	}
	if !errors.Is(o.err, ErrFenced) || o.res.Outcome != OutcomeFenced {
		t.Fatalf("A: res %+v err %v", o.res, o.err)
	}
	st, v := r.state("s1")
	if v != 1 || len(st.Summaries) != 1 || st.Summaries[0].Text == "" {
		t.Fatalf("version %d summaries %+v", v, st.Summaries)
	}
	for _, s := range st.Summaries {
		if strings.Contains(s.Text, "A's late summary") {
			t.Fatal("the fenced replica's summary was committed")
		}
	}
}
