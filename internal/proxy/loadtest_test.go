//go:build loadtest

package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// loadStep is one request of a virtual session and the pause after its response.
type loadStep struct {
	body   []byte
	final  bool // the recorded response was a final answer
	output int  // recorded output tokens
	think  time.Duration
}

// loadSession is one virtual agent session.
type loadSession struct {
	id    string
	steps []loadStep
	// src and history are the recorded session and the indexes of its requests before the
	// window that the proxy follows before the measured run (loadModel.history).
	src     *transcripts.Session
	history []int
}

// loadSessions builds the virtual sessions: each replays a window of one corpus session's
// requests (Anthropic form, bodies ≤ 1 MiB) with its recorded output tokens and think times.
func loadSessions(t *testing.T, m loadModel) []loadSession {
	var imported []*transcripts.Session
	for _, f := range corpus.Files(t) {
		s, err := transcripts.ImportFile(f, transcripts.FormatAuto)
		if err != nil {
			t.Logf("skip %s: %v", filepath.Base(f), err)
			continue
		}
		imported = append(imported, s)
	}
	if len(imported) == 0 {
		t.Skip("no importable corpus sessions")
	}
	out := make([]loadSession, m.sessions)
	for v := range out {
		s := imported[v%len(imported)]
		n := s.Len()
		start := 0
		if n > m.perSess {
			start = (v * 7919) % (n - m.perSess)
		}
		out[v].id = fmt.Sprintf("load-%03d", v)
		out[v].src = s
		for k := max(0, start-m.history); k < start; k++ {
			out[v].history = append(out[v].history, k)
		}
		for k := start; k < n && len(out[v].steps) < m.perSess; k++ {
			b, err := s.Request(k, transcripts.Anthropic)
			if err != nil || len(b) > 1<<20 {
				continue
			}
			st := loadStep{body: m.sessionBody(out[v].id, b), output: m.outDef, think: m.thinkDef}
			next, err := s.Request(k+1, transcripts.Anthropic)
			st.final = err != nil || !endsWithToolResult(next)
			pt := s.Point(k)
			if pt.Usage != nil && pt.Usage.OutputTokens > 0 {
				st.output = int(pt.Usage.OutputTokens)
			}
			st.output = min(st.output, m.outMax)
			if k+1 < n {
				if t1 := s.Point(k + 1).Time; !pt.Time.IsZero() && !t1.IsZero() {
					// The recorded gap held the real model's answer and the agent's tools; the
					// modeled answer time (unscaled) comes off, the rest is the think time.
					gap := t1.Sub(pt.Time) - upstreamfake.Latency{TTFT: time.Second, TokensPerSecond: 60}.Total(st.output)
					st.think = time.Duration(float64(max(0, gap)) * m.thinkScale)
				}
			}
			st.think = min(st.think, m.thinkMax)
			out[v].steps = append(out[v].steps, st)
		}
	}
	return out
}

// pairResult is one request sent both straight to the fake upstream and through the proxy.
type pairResult struct {
	size                 int
	at                   time.Duration // when the pair started, since the run began
	first                bool          // the session's first measured request (cold, unless the proxy followed its history)
	direct, proxied      time.Duration // end to end
	directRm, proxiedRm  time.Duration // end to end minus the fake's modeled provider time
	added                time.Duration // proxiedRm − directRm
	modelTime, thinkTime time.Duration
	proxStart            time.Time     // when the proxied copy was sent
	proxAt               time.Duration // the same, since the run began
	// The two sides of each end-to-end time (upstreamfake.Timing): from sending until the fake
	// had read the body, and from the fake's answer until the client had read all of it.
	directReq, directResp, proxiedReq, proxiedResp time.Duration
	// The copy sent through the forwarding-only proxy (CONDENSE_LOAD_BESIDE), when hasFloor.
	hasFloor                            bool
	floor, floorRm, floorReq, floorResp time.Duration
}

// addedSides returns the added time split at the fake: before it had the request, and after
// it answered. Their sum is the added time but for the fake's own jitter in between.
func (r pairResult) addedSides() (req, resp time.Duration) {
	return r.proxiedReq - r.directReq, r.proxiedResp - r.directResp
}

// TestLoadTest replays corpus sessions as concurrent agent sessions against the fake upstream,
// sending every request both straight to the fake and through a `condense proxy` process, and
// reports the latency the proxy adds. Run with `make loadtest`; docs/performance.md ("Proxy
// load") describes the model and the CONDENSE_LOAD_* variables.
func TestLoadTest(t *testing.T) {
	m := readLoadModel()
	jobs := loadSessions(t, m)
	total, totalBytes := 0, 0
	var model, think time.Duration
	for _, j := range jobs {
		for _, st := range j.steps {
			total++
			totalBytes += len(st.body)
			model += m.latency.Total(st.output)
			think += st.think
		}
	}
	t.Logf("%s", m)
	t.Logf("%d requests, %.1f MB of request bodies, mean modeled answer %v, mean think %v, test GOMAXPROCS=%d",
		total, float64(totalBytes)/1e6, (model / time.Duration(max(1, total))).Round(time.Millisecond), (think / time.Duration(max(1, total))).Round(time.Millisecond), runtime.GOMAXPROCS(0))

	up := upstreamfake.Start()
	defer up.Close()
	up.SetRecording(false)
	up.SetLatency(m.latency)
	var timings sync.Map // X-Load-Id → upstreamfake.Timing
	up.SetObserver(func(r upstreamfake.Recorded, tm upstreamfake.Timing) {
		if id := r.Header.Get("X-Load-Id"); id != "" {
			timings.Store(id, tm)
		}
	})
	var loadID atomic.Int64
	// The fake answers as the recorded agent's model did: a final text where the session's next
	// request starts a new user turn, a tool call otherwise (so flushes run as often as for
	// real), with the recorded output token count (which sets the modeled answer time).
	up.SetResponder(func(r upstreamfake.Recorded) upstreamfake.Reply {
		out, _ := strconv.Atoi(r.Header.Get("X-Load-Output-Tokens"))
		if r.Header.Get("X-Load-Final") == "0" {
			return upstreamfake.Reply{Text: "Running it.", ToolCalls: []upstreamfake.ToolCall{{Name: "bash", Input: `{"cmd":"true"}`}}, Usage: upstreamfake.Usage{OutputTokens: out}}
		}
		return upstreamfake.Reply{Text: "Done.", Usage: upstreamfake.Usage{OutputTokens: out}}
	})

	px := startProxyProcess(t, m, up.URL)
	defer px.stop()
	var fl *proxyProc
	if m.beside != "" {
		fl = startFloorProxy(t, loadModel{floor: m.beside}, up.URL)
		defer fl.stop()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * m.sessions, MaxIdleConns: 4 * m.sessions, DisableCompression: true}}
	var history string
	if m.history > 0 && m.floor == "" {
		history = followHistory(t, m, jobs, px, up, client)
	}
	before := px.scrape(t)
	profiled := px.profile(t, m)

	var mu sync.Mutex
	var results []pairResult
	errs := 0
	send := func(base string, sid string, st loadStep, sent *time.Time, reqSide, respSide *time.Duration) (total, rm time.Duration, err error) {
		req := loadRequest(base, sid, st, !m.bodyIDs)
		id := strconv.FormatInt(loadID.Add(1), 10)
		req.Header.Set("X-Load-Id", id)
		start := time.Now()
		if base == px.url {
			*sent = start
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		end := time.Now()
		total = end.Sub(start)
		if resp.StatusCode != 200 {
			return 0, 0, fmt.Errorf("%s: status %d", base, resp.StatusCode)
		}
		v, ok := timings.LoadAndDelete(id)
		if !ok {
			return 0, 0, fmt.Errorf("%s: the fake did not time request %s", base, id)
		}
		tm := v.(upstreamfake.Timing)
		*reqSide, *respSide = tm.Received.Sub(start), end.Sub(tm.Answered)
		slept, _ := strconv.ParseInt(resp.Header.Get(upstreamfake.HeaderSlept), 10, 64)
		return total, total - time.Duration(slept)*time.Microsecond, nil
	}
	probe := startStallProbe(t)
	cpu0 := selfCPU()
	t0 := time.Now()
	var wg sync.WaitGroup
	for v, j := range jobs {
		wg.Add(1)
		go func(v int, j loadSession) {
			defer wg.Done()
			time.Sleep(time.Duration(int64(m.ramp) * int64(v) / int64(m.sessions)))
			for k, st := range j.steps {
				if m.duration > 0 && time.Since(t0) > m.duration {
					return
				}
				var r pairResult
				r.size, r.modelTime, r.thinkTime, r.at, r.first = len(st.body), m.latency.Total(st.output), st.think, time.Since(t0), k == 0
				type leg struct {
					name, base                   string
					total, rm, reqSide, respSide *time.Duration
				}
				legs := []leg{
					{"direct", up.URL, &r.direct, &r.directRm, &r.directReq, &r.directResp},
					{"proxied", px.url, &r.proxied, &r.proxiedRm, &r.proxiedReq, &r.proxiedResp},
				}
				if fl != nil {
					r.hasFloor = true
					legs = append(legs, leg{"floor", fl.url, &r.floor, &r.floorRm, &r.floorReq, &r.floorResp})
				}
				// Rotate the order so no path always runs first.
				var failed []string
				for i := range legs {
					l := legs[(v+k+i)%len(legs)]
					var err error
					*l.total, *l.rm, err = send(l.base, j.id, st, &r.proxStart, l.reqSide, l.respSide)
					if err != nil {
						failed = append(failed, l.name+": "+err.Error())
					}
				}
				r.added, r.proxAt = r.proxiedRm-r.directRm, r.proxStart.Sub(t0)
				mu.Lock()
				if len(failed) > 0 {
					errs++
					if errs <= 5 {
						t.Logf("error: %s", strings.Join(failed, "; "))
					}
				} else {
					results = append(results, r)
				}
				mu.Unlock()
				// The direct (and floor) copies of the request stand in for part of the think
				// time, so the proxied requests arrive at the recorded cadence (model time +
				// think time).
				time.Sleep(max(0, st.think-r.direct-r.floor))
			}
		}(v, j)
	}
	wg.Wait()
	wall := time.Since(t0)
	after := px.scrape(t)
	if profiled != nil {
		profiled()
	}

	if px.profiling {
		var csv strings.Builder
		csv.WriteString("at_ms,bytes,first,direct_ms,proxied_ms,added_ms,added_request_side_ms,added_response_side_ms\n")
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		for _, r := range results {
			rq, rp := r.addedSides()
			fmt.Fprintf(&csv, "%d,%d,%t,%.3f,%.3f,%.3f,%.3f,%.3f\n", r.at.Milliseconds(), r.size, r.first, ms(r.directRm), ms(r.proxiedRm), ms(r.added), ms(rq), ms(rp))
		}
		_ = os.WriteFile(filepath.Join(px.dir, "requests.csv"), []byte(csv.String()), 0o644)
	}
	report := history + loadReport(m, results, errs, wall, before, after)
	if probe != nil {
		stalls, summary := probe.stop()
		report += probeReport(results, stalls, summary)
	}
	report += gcReport(results, readGCCycles(filepath.Join(px.dir, "proxy.log"), px.started), wall)
	report += fmt.Sprintf("\nLoad generator and fake upstream (this test process): %.1f s CPU over the run (%.2f ms per paired request).\n",
		(selfCPU() - cpu0).Seconds(), float64((selfCPU()-cpu0).Microseconds())/1000/float64(max(1, len(results))))
	t.Log("\n" + report)
	if out := os.Getenv("CONDENSE_LOAD_REPORT"); out != "" {
		_ = os.WriteFile(out, []byte(report), 0o644)
	}
	if errs > 0 {
		t.Fatalf("%d of %d paired requests failed", errs, total)
	}
}

// loadRequest builds the request of one step of session sid to base: the fake answers it
// as the recorded model did (X-Load-Final, X-Load-Output-Tokens). With header it names the
// session in X-Condense-Session; without, the body names it (loadModel.sessionBody).
func loadRequest(base, sid string, st loadStep, header bool) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(st.body))
	req.Header.Set("X-Load-Final", map[bool]string{true: "1", false: "0"}[st.final])
	req.Header.Set("X-Load-Output-Tokens", strconv.Itoa(st.output))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if header {
		req.Header.Set(HeaderSession, sid)
	}
	req.Header.Set("x-api-key", "load")
	return req
}

// followHistory sends each session's recorded requests before its window through the proxy,
// unmeasured and with no model time, a few sessions at a time, so that the measured run
// starts where a deployed proxy would be: every session parsed, its state flushed, its
// requests pruned. It then waits for the proxy's background flushes to finish (its CPU use
// under 2 % over two 2-second windows in a row; in jobs mode the workers' flushes are not
// waited for) and returns a line for the report.
func followHistory(t *testing.T, m loadModel, jobs []loadSession, px *proxyProc, up *upstreamfake.Server, client *http.Client) string {
	up.SetLatency(upstreamfake.Latency{})
	defer up.SetLatency(m.latency)
	t0 := time.Now()
	var n, size atomic.Int64
	var errs atomic.Int64
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func(j loadSession) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for i, k := range j.history {
				body, err := j.src.Request(k, transcripts.Anthropic)
				if err != nil {
					continue
				}
				next, err := j.src.Request(k+1, transcripts.Anthropic)
				st := loadStep{body: m.sessionBody(j.id, body), final: err != nil || !endsWithToolResult(next), output: m.outDef}
				resp, err := client.Do(loadRequest(px.url, j.id, st, !m.bodyIDs))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					if errs.Add(1) <= 5 {
						t.Logf("history request %d of %s: %v", i, j.id, err)
					}
					continue
				}
				n.Add(1)
				size.Add(int64(len(body)))
			}
		}(j)
	}
	wg.Wait()
	sent := time.Since(t0)
	settled := px.waitIdle(2*time.Second, 2*time.Minute)
	if e := errs.Load(); e > 0 {
		t.Fatalf("%d history requests failed", e)
	}
	line := fmt.Sprintf("History: the proxy followed the sessions through %d earlier requests (%.0f MB) in %v; its flushes settled %v later.\n\n",
		n.Load(), float64(size.Load())/1e6, sent.Round(time.Second), settled.Round(time.Second))
	t.Log(line)
	return line
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
