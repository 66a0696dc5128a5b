package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/store/storetest"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

// openRedis opens a store on url with a unique key prefix per test so that one server can be
// shared by many subtests, and the idle TTL as a URL parameter.
func openRedis(t *testing.T, url string, ttl time.Duration) store.Store {
	t.Helper()
	sep := "?"
	for _, c := range url {
		if c == '?' {
			sep = "&"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := store.Open(ctx, url+sep+"ttl="+ttl.String())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRedisContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store {
		// A fresh server per subtest keeps List exact; starting one takes a few milliseconds.
		return openRedis(t, redistest.Start(t, nil).URL(), ttl)
	})
}

func TestRedisClusterContract(t *testing.T) {
	c := redistest.StartCluster(t)
	n := 0
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store {
		n++
		// One cluster for the whole suite; a per-subtest key prefix keeps List exact.
		return openRedis(t, c.URL()+"&prefix=t"+itoa(n), ttl)
	})
}

func TestRedisSentinelContract(t *testing.T) {
	sentinel := redistest.StartSentinel(t, redistest.Start(t, nil))
	n := 0
	storetest.Run(t, func(t *testing.T, ttl time.Duration) store.Store {
		n++
		// The master is found through the Sentinel; a per-subtest prefix keeps List exact.
		return openRedis(t, sentinel.URL()+"&prefix=s"+itoa(n), ttl)
	})
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestRedisEveryKeyCarriesTheIdleTTL(t *testing.T) {
	srv := redistest.Start(t, nil)
	ctx := context.Background()
	s := openRedis(t, srv.URL(), time.Hour)
	defer s.Close()
	const id = "ttl:{every-key}"
	if _, err := s.Commit(ctx, id, 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.IncrStats(ctx, id, map[string]int64{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "k", Key: "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(ctx, id, "b", []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, id, "o", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	keys, err := srv.Do("KEYS", "condense:*")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(keys, "\n")
	if len(all) != 6 {
		t.Fatalf("keys = %q; want the 6 keys of one session", all)
	}
	for _, k := range all {
		pttl, err := srv.Do("PTTL", k)
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := strconv.ParseInt(pttl, 10, 64)
		max := int64(time.Hour / time.Millisecond)
		if strings.HasSuffix(k, ":l") {
			max = 30_000
		}
		if ms <= 0 || ms > max || ms < max-60_000 && !strings.HasSuffix(k, ":l") {
			t.Fatalf("%s has PTTL %d ms; want about %d", k, ms, max)
		}
	}
	// With a short TTL every key disappears, blobs and counters included.
	s2 := openRedis(t, srv.URL()+"?prefix=short", 300*time.Millisecond)
	defer s2.Close()
	if _, err := s2.Commit(ctx, id, 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s2.PutBlob(ctx, id, "b", []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if err := s2.IncrStats(ctx, id, map[string]int64{"n": 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := srv.Do("KEYS", "short:*")
		if err != nil {
			t.Fatal(err)
		}
		if left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys left after the idle TTL: %q", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRedisLoadWritesOnlyWhenLastSeenIsStale(t *testing.T) {
	srv := redistest.Start(t, nil)
	ctx := context.Background()
	// TTL 2s: Load refreshes last-seen and the TTL only when last-seen is older than 200ms.
	s := openRedis(t, srv.URL(), 2*time.Second)
	defer s.Close()
	if _, err := s.Commit(ctx, "touch", 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	writes := func() string {
		stats, err := srv.Do("INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		var w []string
		for _, line := range strings.Split(stats, "\r\n") {
			if strings.HasPrefix(line, "cmdstat_hset:") || strings.HasPrefix(line, "cmdstat_pexpire:") {
				w = append(w, line)
			}
		}
		return strings.Join(w, " ")
	}
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	first, err := s.Load(ctx, "touch")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := s.Load(ctx, "touch"); err != nil {
			t.Fatal(err)
		}
	}
	if w := writes(); w != "" {
		t.Fatalf("loads right after a commit wrote: %s", w)
	}
	time.Sleep(300 * time.Millisecond)
	snap, err := s.Load(ctx, "touch")
	if err != nil {
		t.Fatal(err)
	}
	if w := writes(); !strings.Contains(w, "cmdstat_hset:calls=1") || !strings.Contains(w, "cmdstat_pexpire:calls=5") {
		t.Fatalf("a load after last-seen went stale did not refresh it: %q", w)
	}
	if !snap.LastSeen.After(first.LastSeen) {
		t.Fatalf("LastSeen %v not after %v", snap.LastSeen, first.LastSeen)
	}
}
