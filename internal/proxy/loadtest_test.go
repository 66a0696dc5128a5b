//go:build loadtest

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/sessions"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestLoadTest replays corpus sessions as 200 concurrent agent sessions, first straight to
// the fake upstream and then through the proxy (memory store, in-process flushes with the
// extractive summarizer), and reports the latency the proxy adds. Run with `make loadtest`.
// CONDENSE_LOAD_SESSIONS (default 200) and CONDENSE_LOAD_REQUESTS (requests per session,
// default 20) scale it; bodies over 1 MiB are left out (the target covers requests ≤ 1 MB).
func TestLoadTest(t *testing.T) {
	nsess := envInt("CONDENSE_LOAD_SESSIONS", 200)
	perSess := envInt("CONDENSE_LOAD_REQUESTS", 20)
	var imported []*sessions.Session
	for _, f := range corpus.Files(t) {
		s, err := sessions.ImportFile(f, sessions.FormatAuto)
		if err != nil {
			t.Logf("skip %s: %v", filepath.Base(f), err)
			continue
		}
		imported = append(imported, s)
	}
	if len(imported) == 0 {
		t.Skip("no importable corpus sessions")
	}
	// Each virtual session replays a window of one corpus session's requests.
	type job struct {
		session string
		bodies  [][]byte
		final   []bool // the recorded response to bodies[k] was a final answer
	}
	jobs := make([]job, nsess)
	total, totalBytes := 0, 0
	for v := range jobs {
		s := imported[v%len(imported)]
		n := s.Len()
		start := 0
		if n > perSess {
			start = (v * 7919) % (n - perSess)
		}
		jobs[v].session = fmt.Sprintf("load-%03d", v)
		for k := start; k < n && len(jobs[v].bodies) < perSess; k++ {
			b, err := s.Request(k, sessions.Anthropic)
			if err != nil || len(b) > 1<<20 {
				continue
			}
			next, err := s.Request(k+1, sessions.Anthropic)
			jobs[v].bodies = append(jobs[v].bodies, b)
			jobs[v].final = append(jobs[v].final, err != nil || !endsWithToolResult(next))
			total++
			totalBytes += len(b)
		}
	}
	t.Logf("%d sessions, %d requests, %.1f MB of request bodies, GOMAXPROCS=%d", nsess, total, float64(totalBytes)/1e6, runtime.GOMAXPROCS(0))

	up := upstreamfake.Start()
	defer up.Close()
	up.SetRecording(false)
	// The fake answers as the recorded agent's model did: a final text where the session's next
	// request starts a new user turn, a tool call otherwise (so flushes run as often as for real).
	up.SetResponder(func(r upstreamfake.Recorded) upstreamfake.Reply {
		if r.Header.Get("X-Load-Final") == "0" {
			return upstreamfake.Reply{Text: "Running it.", ToolCalls: []upstreamfake.ToolCall{{Name: "bash", Input: `{"cmd":"true"}`}}}
		}
		return upstreamfake.Reply{Text: "Done."}
	})

	run := func(base string) ([]time.Duration, int) {
		var mu sync.Mutex
		var lat []time.Duration
		errs := 0
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: nsess, MaxIdleConns: nsess}}
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Add(1)
			go func(j job) {
				defer wg.Done()
				for k, b := range j.bodies {
					req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(b))
					req.Header.Set("X-Load-Final", map[bool]string{true: "1", false: "0"}[j.final[k]])
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(HeaderSession, j.session)
					req.Header.Set("x-api-key", "load")
					start := time.Now()
					resp, err := client.Do(req)
					ok := err == nil && resp.StatusCode == 200
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					d := time.Since(start)
					mu.Lock()
					if ok {
						lat = append(lat, d)
					} else {
						errs++
						if errs <= 3 {
							t.Logf("error: %v %v", err, resp)
						}
					}
					mu.Unlock()
				}
			}(j)
		}
		wg.Wait()
		sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
		return lat, errs
	}

	t0 := time.Now()
	direct, derr := run(up.URL)
	dtime := time.Since(t0)

	st := store.NewMemory(0)
	defer st.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inproc := &flush.InProcess{MaxConcurrent: envInt("CONDENSE_LOAD_FLUSHES", 1), Orch: &flush.Orchestrator{Store: st, Planner: flush.EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Log: quiet}}
	px, err := New(Options{AnthropicBaseURL: up.URL, OpenAIBaseURL: up.URL + "/v1", Store: st, Policy: testPolicy(), Flusher: inproc, MaxRecoveryRounds: 3, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(px)
	t0 = time.Now()
	proxied, perr := run(srv.URL)
	ptime := time.Since(t0)

	// Unsaturated: the same requests one at a time, each sent direct and then through the
	// proxy; the paired difference is the latency the proxy adds to that request.
	nseq := envInt("CONDENSE_LOAD_SEQUENTIAL", 300)
	pause := time.Duration(envInt("CONDENSE_LOAD_PAUSE_MS", 50)) * time.Millisecond
	var diffs []time.Duration
	client := &http.Client{}
	send := func(base, session string, b []byte, final bool) (time.Duration, error) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(b))
		req.Header.Set("X-Load-Final", map[bool]string{true: "1", false: "0"}[final])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderSession, session)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	seqErrs := 0
	for i := 0; len(diffs) < nseq && i < nsess*perSess; i++ {
		j := jobs[i%nsess]
		k := i / nsess
		if k >= len(j.bodies) {
			continue
		}
		time.Sleep(pause) // agents pause between requests; the previous answer's flush runs meanwhile
		d, err1 := send(up.URL, "seq-"+j.session, j.bodies[k], j.final[k])
		p, err2 := send(srv.URL, "seq-"+j.session, j.bodies[k], j.final[k])
		if err1 != nil || err2 != nil {
			seqErrs++
			continue
		}
		diffs = append(diffs, p-d)
	}
	sort.Slice(diffs, func(a, b int) bool { return diffs[a] < diffs[b] })
	srv.Close()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	_ = inproc.Close(c)
	cancel()
	_ = px.Close()

	q := func(l []time.Duration, p float64) time.Duration {
		if len(l) == 0 {
			return 0
		}
		return l[min(len(l)-1, int(p*float64(len(l))))]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
	report := fmt.Sprintf("| path | requests | errors | wall | p50 ms | p90 ms | p99 ms |\n|---|---:|---:|---:|---:|---:|---:|\n"+
		"| direct to fake upstream | %d | %d | %s | %s | %s | %s |\n| through the proxy | %d | %d | %s | %s | %s | %s |\n"+
		"| **added** | | | | %s | %s | %s |\n",
		len(direct), derr, dtime.Round(time.Millisecond), ms(q(direct, .5)), ms(q(direct, .9)), ms(q(direct, .99)),
		len(proxied), perr, ptime.Round(time.Millisecond), ms(q(proxied, .5)), ms(q(proxied, .9)), ms(q(proxied, .99)),
		ms(q(proxied, .5)-q(direct, .5)), ms(q(proxied, .9)-q(direct, .9)), ms(q(proxied, .99)-q(direct, .99)))
	report += fmt.Sprintf("\nUnsaturated (one request at a time with %s between requests, %d requests, paired direct vs proxied): added p50 %s ms, p90 %s ms, p99 %s ms, errors %d\n",
		pause, len(diffs), ms(q(diffs, .5)), ms(q(diffs, .9)), ms(q(diffs, .99)), seqErrs)
	t.Log("\n" + report)
	if out := os.Getenv("CONDENSE_LOAD_REPORT"); out != "" {
		_ = os.WriteFile(out, []byte(report), 0o644)
	}
	if derr+perr+seqErrs > 0 {
		t.Fatalf("%d direct, %d proxied and %d sequential requests failed", derr, perr, seqErrs)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// endsWithToolResult reports whether a request body's last message carries tool results (the
// previous response was a tool call).
func endsWithToolResult(body []byte) bool {
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) == 0 {
		return false
	}
	found := false
	msgs[len(msgs)-1].Get("content").ForEach(func(_, b gjson.Result) bool {
		if b.Get("type").Str == "tool_result" {
			found = true
			return false
		}
		return true
	})
	return found
}
