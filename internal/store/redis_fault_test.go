package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/store/storetest"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

func TestRedisClusterSpreadsSessionsAndKeepsOneSlot(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openRedis(t, c.URL(), 0)
	defer s.Close()
	ctx := context.Background()
	const n = 60
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("session-%d", i)
		if i%2 == 1 {
			id = fmt.Sprintf("odd:{%d}\u00e9", i)
		}
		if _, err := s.Commit(ctx, id, 0, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		if err := s.PutBlob(ctx, id, "b", []byte("y")); err != nil {
			t.Fatal(err)
		}
		if err := s.IncrStats(ctx, id, map[string]int64{"n": 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range c.Nodes {
		size, err := node.Do("DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := strconv.Atoi(size); k == 0 {
			t.Fatalf("master %s holds no keys: sessions not spread", node.Addr)
		}
		keys, err := node.Do("KEYS", "*")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range strings.Split(keys, "\n") {
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
				t.Fatalf("key %q has more than one hash tag", k)
			}
		}
	}
	infos, err := s.List(ctx)
	if err != nil || len(infos) != n {
		t.Fatalf("List over three masters = %d sessions, %v; want %d", len(infos), err, n)
	}
}

// deadAddr returns a loopback address nothing listens on: a freshly closed port.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestRedisUnreachable(t *testing.T) {
	dead := deadAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := store.Open(ctx, "redis://"+dead); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a dead port = %v; want ErrUnavailable", err)
	}
	if _, err := store.Open(ctx, "redis+cluster://"+dead); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open cluster on a dead port = %v; want ErrUnavailable", err)
	}

	// A listener that accepts and never answers: the caller's deadline bounds Open.
	bh, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	go func() {
		for {
			c, err := bh.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = store.Open(short, "redis://"+bh.Addr().String())
	cancelShort()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a silent server = %v; want ErrUnavailable", err)
	}

	// A store whose server goes away fails every call with ErrUnavailable, then recovers.
	srv := redistest.Start(t, nil)
	s := openRedis(t, srv.URL(), time.Hour)
	defer s.Close()
	bg := context.Background()
	if _, err := s.Commit(bg, "a", 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	calls := map[string]func(context.Context) error{
		"Load":      func(ctx context.Context) error { _, err := s.Load(ctx, "a"); return err },
		"Commit":    func(ctx context.Context) error { _, err := s.Commit(ctx, "a", 1, []byte("y"), 0); return err },
		"IncrStats": func(ctx context.Context) error { return s.IncrStats(ctx, "a", map[string]int64{"n": 1}) },
		"UpdateStats": func(ctx context.Context) error {
			return s.UpdateStats(ctx, "a", store.StatsUpdate{Set: map[string]int64{"n": 1}})
		},
		"AddDiagnostics": func(ctx context.Context) error {
			return s.AddDiagnostics(ctx, "a", []store.Diagnostic{{Kind: "k", Key: "k"}})
		},
		"PutBlob":      func(ctx context.Context) error { return s.PutBlob(ctx, "a", "b", []byte("z")) },
		"GetBlob":      func(ctx context.Context) error { _, err := s.GetBlob(ctx, "a", "b"); return err },
		"AcquireLease": func(ctx context.Context) error { _, err := s.AcquireLease(ctx, "a", "o", time.Second); return err },
		"List":         func(ctx context.Context) error { _, err := s.List(ctx); return err },
		"Delete":       func(ctx context.Context) error { return s.Delete(ctx, "a") },
		"Watch":        func(ctx context.Context) error { _, err := s.Watch(ctx); return err },
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
		err := call(ctx)
		cancel()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s with the server down = %v; want ErrUnavailable", name, err)
		}
	}
	srv.Restart() // no persistence: the data is gone, the scripts must be reloaded transparently
	snap, err := s.Load(bg, "a")
	if err != nil || snap.Version != 0 {
		t.Fatalf("after restart: %+v, %v", snap, err)
	}
	if v, err := s.Commit(bg, "a", 0, []byte("again"), 0); err != nil || v != 1 {
		t.Fatalf("commit after restart = %d, %v", v, err)
	}

	// A server busy in a long command: the deadline, not the server, ends the call.
	go func() { _, _ = srv.Do("DEBUG", "SLEEP", "1") }()
	time.Sleep(100 * time.Millisecond)
	ctx2, cancel2 := context.WithTimeout(bg, 100*time.Millisecond)
	_, err = s.Load(ctx2, "a")
	cancel2()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Load against a stalled server = %v; want ErrUnavailable", err)
	}
}

// framedState builds a state that names its own version and carries a checksum of a random
// body, so a torn or mismatched state is detectable.
func framedState(version uint64, size int) []byte {
	body := make([]byte, size)
	_, _ = rand.Read(body[:size/2]) // half random, half zeros: some compression, real work
	sum := sha256.Sum256(body)
	out := make([]byte, 8, 8+32+size)
	binary.BigEndian.PutUint64(out, version)
	out = append(out, sum[:]...)
	return append(out, body...)
}

func checkFramed(t *testing.T, session string, version uint64, state []byte) {
	t.Helper()
	if version == 0 {
		if state != nil {
			t.Fatalf("%s: version 0 with a state", session)
		}
		return
	}
	if len(state) < 40 {
		t.Fatalf("%s: version %d with a %d-byte state", session, version, len(state))
	}
	if got := binary.BigEndian.Uint64(state); got != version {
		t.Fatalf("%s: version %d holds the state written as version %d (partial commit)", session, version, got)
	}
	if sum := sha256.Sum256(state[40:]); !bytes.Equal(sum[:], state[8:40]) {
		t.Fatalf("%s: version %d state fails its checksum (torn write)", session, version)
	}
}

func TestRedisKilledMidCommitLeavesNoPartialState(t *testing.T) {
	srv := redistest.Start(t, &redistest.Options{AOF: true})
	// With an idle TTL every commit writes several commands, which Redis logs to the AOF as
	// one MULTI/EXEC block: the case where a torn tail matters.
	s := openRedis(t, srv.URL(), time.Hour)
	defer s.Close()
	const writers, cycles = 4, 5
	acked := make([]uint64, writers)     // highest acknowledged version per session
	attempted := make([]uint64, writers) // highest version ever sent
	for cycle := 0; cycle < cycles; cycle++ {
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("victim-%d", w)
				for ctx.Err() == nil {
					v := acked[w]
					attempted[w] = v + 1
					nv, err := s.Commit(ctx, id, v, framedState(v+1, 256<<10+mrand.IntN(2<<20)), 0)
					if err != nil {
						if errors.Is(err, store.ErrUnavailable) {
							return // the server died: the outcome of this commit is unknown
						}
						t.Errorf("%s: %v", id, err)
						return
					}
					acked[w] = nv
				}
			}()
		}
		time.Sleep(time.Duration(50+mrand.IntN(250)) * time.Millisecond)
		srv.Kill()
		wg.Wait()
		stop()
		if t.Failed() {
			return
		}
		srv.Restart()
		for w := 0; w < writers; w++ {
			id := fmt.Sprintf("victim-%d", w)
			snap, err := s.Load(context.Background(), id)
			if err != nil {
				t.Fatalf("%s: load after restart: %v; server log:\n%s", id, err, srv.LogTail())
			}
			if snap.Version < acked[w] || snap.Version > attempted[w] {
				t.Fatalf("%s: version %d after restart; acknowledged %d, attempted %d", id, snap.Version, acked[w], attempted[w])
			}
			if t.Failed() {
				return
			}
			checkFramedLog(t, srv, id, snap.Version, snap.State)
			acked[w] = snap.Version
		}
		t.Logf("cycle %d: versions %v", cycle, acked)
	}
}

func checkFramedLog(t *testing.T, srv *redistest.Server, session string, version uint64, state []byte) {
	t.Helper()
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(fmt.Sprintf("%s/redis-%d.log", srv.Dir, srv.Port))
			t.Logf("server log:\n%s", b)
		}
	}()
	checkFramed(t, session, version, state)
}

func TestRedisAOFRestartKeepsEveryCommit(t *testing.T) {
	srv := redistest.Start(t, &redistest.Options{AOF: true})
	s := openRedis(t, srv.URL(), time.Hour)
	defer s.Close()
	ctx := context.Background()
	const sessions = 200
	want := map[string]uint64{}
	for i := 0; i < sessions; i++ {
		id := fmt.Sprintf("aof:{%d}", i)
		versions := 1 + i%5
		for v := 0; v < versions; v++ {
			if _, err := s.Commit(ctx, id, uint64(v), framedState(uint64(v+1), 1000+i), 0); err != nil {
				t.Fatal(err)
			}
		}
		want[id] = uint64(versions)
		if err := s.IncrStats(ctx, id, map[string]int64{store.StatRequests: int64(i)}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "k", Key: id}}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutBlob(ctx, id, "orig", []byte(strings.Repeat(id, 100))); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	srv.Restart()
	for id, v := range want {
		snap, err := s.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Version != v {
			t.Fatalf("%s: version %d after restart; want %d", id, snap.Version, v)
		}
		checkFramed(t, id, snap.Version, snap.State)
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(id, "aof:{"), "}"))
		if snap.Stats[store.StatRequests] != int64(n) || len(snap.Diagnostics) != 1 {
			t.Fatalf("%s: stats %v diagnostics %v after restart", id, snap.Stats, snap.Diagnostics)
		}
		if b, err := s.GetBlob(ctx, id, "orig"); err != nil || string(b) != strings.Repeat(id, 100) {
			t.Fatalf("%s: blob after restart: %v", id, err)
		}
	}
	infos, err := s.List(ctx)
	if err != nil || len(infos) != sessions {
		t.Fatalf("List after restart = %d, %v", len(infos), err)
	}
}

// Environment of the child process in TestRedisTwoProcessesCommitting.
const (
	envChildURL   = "CONDENSE_STORE_CHILD_URL"
	envChildOwner = "CONDENSE_STORE_CHILD_OWNER"
)

const (
	raceSession    = "race:{two-processes}"
	raceGoroutines = 8
	raceEach       = 15
)

// TestRedisChildCommitter is the child half of TestRedisTwoProcessesCommitting; it is skipped
// unless the parent re-executes the test binary with envChildURL set.
func TestRedisChildCommitter(t *testing.T) {
	url := os.Getenv(envChildURL)
	if url == "" {
		t.Skip("runs only as the child process of TestRedisTwoProcessesCommitting")
	}
	s := openRedis(t, url, 0)
	defer s.Close()
	raceCommit(t, s, os.Getenv(envChildOwner))
}

func raceCommit(t *testing.T, s store.Store, process string) {
	ctx := context.Background()
	// Barrier: announce readiness, then wait for the other process.
	if err := s.IncrStats(ctx, "race-barrier", map[string]int64{"ready": 1}); err != nil {
		t.Fatal(err)
	}
	for {
		snap, err := s.Load(ctx, "race-barrier")
		if err != nil {
			t.Fatal(err)
		}
		if snap.Stats["ready"] >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for g := 0; g < raceGoroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := storetest.CommitLoop(ctx, s, raceSession, fmt.Sprintf("%s-g%d", process, g), raceEach); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestRedisTwoProcessesCommitting(t *testing.T) {
	srv := redistest.Start(t, nil)
	s := openRedis(t, srv.URL(), 0)
	defer s.Close()
	child := exec.Command(os.Args[0], "-test.run=^TestRedisChildCommitter$", "-test.count=1")
	child.Env = append(os.Environ(), envChildURL+"="+srv.URL(), envChildOwner+"=p2")
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	raceCommit(t, s, "p1")
	if err := child.Wait(); err != nil {
		t.Fatalf("child process: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "PASS") {
		t.Fatalf("child did not pass:\n%s", out.String())
	}
	want := map[string]int{}
	for _, p := range []string{"p1", "p2"} {
		for g := 0; g < raceGoroutines; g++ {
			want[fmt.Sprintf("%s-g%d", p, g)] = raceEach
		}
	}
	storetest.CheckHistory(t, s, raceSession, 2*raceGoroutines*raceEach, want)
}

func replOffset(t *testing.T, s *redistest.Server) int64 {
	t.Helper()
	info, err := s.Do("INFO", "replication")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

func TestRedisSentinelFailoverKeepsReplicatedCommits(t *testing.T) {
	master := redistest.Start(t, nil)
	replica := redistest.Start(t, &redistest.Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port)}})
	waitFor(t, "replica link up", func() bool {
		info, err := replica.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	sentinel := redistest.StartSentinel(t, master)
	waitFor(t, "sentinel knows the replica", func() bool {
		r, err := sentinel.Do("SENTINEL", "replicas", sentinel.MasterName)
		return err == nil && strings.Contains(r, strconv.Itoa(replica.Port))
	})
	s := openRedis(t, sentinel.URL(), time.Hour)
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("failover-%d", i)
		for v := uint64(0); v < 3; v++ {
			if _, err := s.Commit(ctx, id, v, framedState(v+1, 2000), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Replication is asynchronous: wait until the replica has everything, then lose the master.
	want := replOffset(t, master)
	waitFor(t, "replica caught up", func() bool { return replOffset(t, replica) >= want })
	master.Kill()
	var snap *store.Snapshot
	waitFor(t, "Sentinel promotes the replica and the store follows", func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var err error
		snap, err = s.Load(c, "failover-7")
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("during failover: %v (want ErrUnavailable or success)", err)
		}
		return err == nil
	})
	if snap.Version != 3 {
		t.Fatalf("after failover version %d; want 3", snap.Version)
	}
	checkFramed(t, "failover-7", snap.Version, snap.State)
	if v, err := s.Commit(ctx, "failover-7", 3, framedState(4, 2000), 0); err != nil || v != 4 {
		t.Fatalf("commit on the promoted replica = %d, %v", v, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRedisClusterNodeLossIsUnavailable(t *testing.T) {
	c := redistest.StartCluster(t)
	s := openRedis(t, c.URL(), time.Hour)
	defer s.Close()
	ctx := context.Background()
	const n = 30
	for i := 0; i < n; i++ {
		if _, err := s.Commit(ctx, fmt.Sprintf("node-loss-%d", i), 0, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	c.Nodes[2].Kill()
	failed := 0
	for i := 0; i < n; i++ {
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := s.Load(c, fmt.Sprintf("node-loss-%d", i))
		cancel()
		if err != nil {
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("session %d with a master down = %v; want ErrUnavailable", i, err)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no session lived on the killed master")
	}
	t.Logf("%d of %d sessions unavailable with one master down", failed, n)
}
