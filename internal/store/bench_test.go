package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

const benchSessions = 10_000

// benchState is a plausible engine state: ~3 KB of JSON naming occurrence keys and
// fingerprints, unique per session and version.
func benchState(session int, version uint64) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"session":%d,"version":%d,"pruned":[`, session, version)
	for i := 0; i < 40; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key":"toolu_01%016x#%08x","fp":"%016x:%d","kind":"superseded-read"}`,
			uint64(session)*7919+uint64(i), uint32(version)*2654435761+uint32(i), uint64(session)^uint64(i)<<20, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// roundTrips counts client→server round trips: one per command or pipeline.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

func populate(b *testing.B, s store.Store) []uint64 {
	b.Helper()
	ctx := context.Background()
	versions := make([]uint64, benchSessions)
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < benchSessions; i += 8 {
				id := "bench-" + strconv.Itoa(i)
				if _, err := s.Commit(ctx, id, 0, benchState(i, 1), 0); err != nil {
					failed.Store(err)
					return
				}
				if err := s.IncrStats(ctx, id, map[string]int64{store.StatRequests: 3, store.StatBytesBefore: 120000, store.StatBytesAfter: 80000}); err != nil {
					failed.Store(err)
					return
				}
				if err := s.AddDiagnostics(ctx, id, []store.Diagnostic{{Kind: "resolve-failed", Key: "fp:" + strconv.Itoa(i), Detail: "no match"}}); err != nil {
					failed.Store(err)
					return
				}
				versions[i] = 1
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return versions
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func benchLoadCommit(b *testing.B, s store.Store, rt *roundTrips) {
	versions := populate(b, s)
	ctx := context.Background()
	// timed runs op on a random session per iteration (rng seeded with seed), timing each.
	timed := func(name string, seed uint64, op func(n int) error) {
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			rng := rand.New(rand.NewPCG(seed, seed+1))
			var before int64
			if rt != nil {
				before = rt.n.Load()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				n := rng.IntN(benchSessions)
				t0 := time.Now()
				err := op(n)
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatalf("%s bench-%d: %v", name, n, err)
				}
			}
			b.StopTimer()
			reportPercentiles(b, lat)
			if rt != nil {
				b.ReportMetric(float64(rt.n.Load()-before)/float64(b.N), "roundtrips/op")
			}
		})
	}
	loaded := func(snap *store.Snapshot, err error) error {
		if err == nil && snap.Version == 0 {
			return errors.New("session not found")
		}
		return err
	}
	timed("Load", 1, func(n int) error { return loaded(s.Load(ctx, "bench-"+strconv.Itoa(n))) })
	// LoadKnown of the version the caller holds: the proxy's steady request path.
	timed("LoadKnown", 1, func(n int) error {
		snap, err := s.(store.KnownStateLoader).LoadKnown(ctx, "bench-"+strconv.Itoa(n), versions[n])
		if err == nil && !snap.StateKnown {
			return fmt.Errorf("state of the known version %d was sent", versions[n])
		}
		return loaded(snap, err)
	})
	timed("Commit", 3, func(n int) error {
		v, err := s.Commit(ctx, "bench-"+strconv.Itoa(n), versions[n], benchState(n, versions[n]+1), 0)
		if err == nil {
			versions[n] = v
		}
		return err
	})
}

// BenchmarkRedis measures Load and Commit latency against a real redis-server holding
// 10,000 sessions, reporting p50/p99 and client round trips per operation.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b, nil)
	s, err := store.Open(context.Background(), srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rt := &roundTrips{}
	s.(*store.RedisStore).Client().AddHook(rt)
	benchLoadCommit(b, s, rt)
	var perSession int64
	for _, suffix := range []string{"m", "c", "d", "k", "b", "l"} {
		if n, err := srv.Do("MEMORY", "USAGE", "condense:{bench-0}:"+suffix, "SAMPLES", "0"); err == nil && n != "" {
			v, _ := strconv.ParseInt(n, 10, 64)
			perSession += v
		}
	}
	b.Logf("MEMORY USAGE of one session's keys (3 KB state before compression, 3 counters, 1 diagnostic): %d bytes", perSession)
	if mem, err := srv.Do("INFO", "memory"); err == nil {
		for _, line := range strings.Split(mem, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseFloat(v, 64)
				b.Logf("redis used_memory with %d sessions: %.0f bytes (%.0f bytes/session incl. server baseline)", benchSessions, n, n/benchSessions)
			}
		}
	}
}

// BenchmarkRedisCluster is BenchmarkRedis against a real three-master cluster.
func BenchmarkRedisCluster(b *testing.B) {
	c := redistest.StartCluster(b)
	s, err := store.Open(context.Background(), c.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rt := &roundTrips{}
	s.(*store.RedisStore).Client().AddHook(rt)
	benchLoadCommit(b, s, rt)
}

// BenchmarkBolt is BenchmarkRedis against the embedded bbolt file.
func BenchmarkBolt(b *testing.B) {
	s, err := store.OpenBolt(filepath.Join(b.TempDir(), "state.db"), store.DefaultTTL)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchLoadCommit(b, s, nil)
}

// BenchmarkMemory is BenchmarkRedis against the in-memory store.
func BenchmarkMemory(b *testing.B) {
	s := store.NewMemory(store.DefaultTTL)
	defer s.Close()
	benchLoadCommit(b, s, nil)
}

// corpusToolOutputs reads every tool result text from the Claude Code and pi files of the
// corpus.
func corpusToolOutputs(tb testing.TB) [][]byte {
	tb.Helper()
	var outs [][]byte
	for _, path := range corpus.Files(tb) {
		base := filepath.Base(path)
		if !strings.HasPrefix(base, "cc") && !strings.HasPrefix(base, "pi_") {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var rec struct {
				Type    string `json:"type"`
				Message struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			switch {
			case rec.Type == "user": // Claude Code: tool_result blocks
				var blocks []struct {
					Type    string          `json:"type"`
					Content json.RawMessage `json:"content"`
				}
				if json.Unmarshal(rec.Message.Content, &blocks) != nil {
					continue
				}
				for _, bl := range blocks {
					if bl.Type == "tool_result" {
						if t := textOf(bl.Content); len(t) > 0 {
							outs = append(outs, t)
						}
					}
				}
			case rec.Type == "message" && rec.Message.Role == "toolResult": // pi
				if t := textOf(rec.Message.Content); len(t) > 0 {
					outs = append(outs, t)
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			tb.Fatalf("%s: %v", base, err)
		}
	}
	if len(outs) == 0 {
		tb.Fatal("no tool outputs found in the corpus")
	}
	return outs
}

// textOf returns a tool result's text: a JSON string, or the text blocks of an array joined
// with newlines.
func textOf(raw json.RawMessage) []byte {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return []byte(strings.Join(parts, "\n"))
}

// BenchmarkBlobStorage stores every corpus tool output as a blob in a real redis-server and
// reports the bytes stored (value bytes, and Redis MEMORY USAGE including overhead) per MB
// of original tool output.
func BenchmarkBlobStorage(b *testing.B) {
	outs := corpusToolOutputs(b)
	var raw int64
	for _, o := range outs {
		raw += int64(len(o))
	}
	srv := redistest.Start(b, nil)
	s, err := store.Open(context.Background(), srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rdb := s.(*store.RedisStore).Client()
	ctx := context.Background()
	b.SetBytes(raw)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		session := "blobs-" + strconv.Itoa(i)
		for j, o := range outs {
			if err := s.PutBlob(ctx, session, "toolu_"+strconv.Itoa(j), o); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	key := "condense:{blobs-0}:b"
	var stored int64
	for j := range outs {
		n, err := rdb.HStrLen(ctx, key, "toolu_"+strconv.Itoa(j)).Result()
		if err != nil {
			b.Fatal(err)
		}
		stored += n
	}
	mem, err := rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	mb := float64(raw) / (1 << 20)
	b.ReportMetric(float64(stored)/mb, "stored-B/MB")
	b.ReportMetric(float64(mem)/mb, "redis-mem-B/MB")
	b.Logf("%d tool outputs, %.1f MB raw, %d bytes stored (ratio %.3f), Redis MEMORY USAGE %d", len(outs), mb, stored, float64(stored)/float64(raw), mem)
}

// BenchmarkCodec compares the candidate codecs on corpus tool outputs, each compressed on
// its own as the store does: ratio (stored/raw) and throughput.
func BenchmarkCodec(b *testing.B) {
	outs := corpusToolOutputs(b)
	var raw int64
	for _, o := range outs {
		raw += int64(len(o))
	}
	mk := func(l zstd.EncoderLevel) func([]byte, []byte) []byte {
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1))
		return func(dst, src []byte) []byte { return enc.EncodeAll(src, dst[:0]) }
	}
	codecs := []struct {
		name string
		enc  func(dst, src []byte) []byte
	}{
		{"s2", func(dst, src []byte) []byte { return s2.Encode(dst[:cap(dst)], src) }},
		{"s2-better", func(dst, src []byte) []byte { return s2.EncodeBetter(dst[:cap(dst)], src) }},
		{"zstd-fastest", mk(zstd.SpeedFastest)},
		{"zstd-default", mk(zstd.SpeedDefault)},
		{"zstd-better", mk(zstd.SpeedBetterCompression)},
	}
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(raw)
			var stored int64
			dst := make([]byte, 0, 1<<20)
			for i := 0; i < b.N; i++ {
				stored = 0
				for _, o := range outs {
					if need := s2.MaxEncodedLen(len(o)); cap(dst) < need {
						dst = make([]byte, 0, need)
					}
					out := c.enc(dst, o)
					stored += int64(min(len(out), len(o))) + 1 // the store keeps raw bytes when they are smaller
				}
			}
			b.ReportMetric(float64(stored)/float64(raw), "stored/raw")
		})
	}
}
