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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// loadModel is the workload of one load test run, read from CONDENSE_LOAD_* variables.
type loadModel struct {
	mode       string // "realistic" (default) or "saturate"
	sessions   int    // virtual agent sessions
	perSess    int    // requests per session
	latency    upstreamfake.Latency
	thinkScale float64       // multiplies the recorded think time
	thinkMax   time.Duration // caps one think time (after scaling)
	thinkDef   time.Duration // think time where the corpus has no timestamps
	ramp       time.Duration // session starts are spread over this
	outDef     int           // output tokens where the corpus has no usage
	outMax     int           // caps the recorded output tokens of one answer
	summarizer string        // "in-proxy" or "jobs"
	duration   time.Duration // no session starts a request after this (0: no limit)
	// floor ("buffer" or "stream") runs hack/floorproxy, a proxy that only forwards, in
	// place of condense: what a second hop alone adds on this machine ("": condense).
	floor string
	// beside ("buffer" or "stream") runs hack/floorproxy next to condense and sends every
	// request through it too, so condense is compared with a forwarding-only proxy under the
	// same machine conditions, request by request ("": not run).
	beside string
	// history is how many of the recorded requests before each session's window are sent
	// through the proxy, unmeasured and without model time, before the measured run: a
	// deployed proxy has followed a session from its start, so its first measured request
	// finds the session parsed, its state flushed and its requests pruned (0: each window
	// starts cold, as before session 8).
	history int
	// bodyIDs names each session in its body (metadata.user_id, after the messages, where the
	// SDKs put it) instead of the X-Condense-Session header, as a client that was not set up
	// for condense does: the proxy then finds the session's fields in the body
	// (CONDENSE_LOAD_SESSION_ID=body).
	bodyIDs bool
}

func readLoadModel() loadModel {
	scale := envFloat("CONDENSE_LOAD_TIME_SCALE", 1)
	m := loadModel{
		mode:       os.Getenv("CONDENSE_LOAD_MODE"),
		sessions:   envInt("CONDENSE_LOAD_SESSIONS", 200),
		perSess:    envInt("CONDENSE_LOAD_REQUESTS", 10),
		thinkScale: envFloat("CONDENSE_LOAD_THINK_SCALE", 1) * scale,
		thinkMax:   time.Duration(scale * float64(envInt("CONDENSE_LOAD_THINK_MAX_MS", 20000)) * float64(time.Millisecond)),
		thinkDef:   time.Duration(scale * float64(envInt("CONDENSE_LOAD_THINK_DEFAULT_MS", 3000)) * float64(time.Millisecond)),
		ramp:       time.Duration(scale * float64(envInt("CONDENSE_LOAD_RAMP_MS", 30000)) * float64(time.Millisecond)),
		outDef:     envInt("CONDENSE_LOAD_OUTPUT_TOKENS", 250),
		outMax:     envInt("CONDENSE_LOAD_MAX_OUTPUT_TOKENS", 2000),
		summarizer: os.Getenv("CONDENSE_LOAD_SUMMARIZER"),
		floor:      os.Getenv("CONDENSE_LOAD_FLOOR"),
		beside:     os.Getenv("CONDENSE_LOAD_BESIDE"),
		history:    envInt("CONDENSE_LOAD_HISTORY", 20),
		bodyIDs:    os.Getenv("CONDENSE_LOAD_SESSION_ID") == "body",
		duration:   time.Duration(scale * float64(envInt("CONDENSE_LOAD_DURATION_S", 180)) * float64(time.Second)),
		latency: upstreamfake.Latency{
			TTFT:            time.Duration(scale * float64(envInt("CONDENSE_LOAD_TTFT_MS", 1000)) * float64(time.Millisecond)),
			TokensPerSecond: envFloat("CONDENSE_LOAD_TOKENS_PER_SEC", 60) / scale,
		},
	}
	if m.mode == "" {
		m.mode = "realistic"
	}
	if m.summarizer == "" {
		m.summarizer = "in-proxy"
	}
	if m.mode == "saturate" {
		m.latency, m.thinkScale, m.thinkMax, m.thinkDef, m.ramp, m.duration = upstreamfake.Latency{}, 0, 0, 0, 0, 0
	}
	return m
}

func (m loadModel) String() string {
	if m.floor != "" {
		return fmt.Sprintf("%s; proxy: hack/floorproxy -mode %s (forwarding only, no condense)", m.withoutFloor(), m.floor)
	}
	if m.beside != "" {
		return fmt.Sprintf("%s; every request also sent through hack/floorproxy -mode %s (forwarding only), in rotating order", m.withoutFloor(), m.beside)
	}
	if m.mode == "saturate" {
		return fmt.Sprintf("saturate: %d closed-loop sessions × ≤ %d requests, no model time, no think time, summarizer %s",
			m.sessions, m.perSess, m.summarizer)
	}
	return fmt.Sprintf("realistic: %d sessions × ≤ %d requests, model TTFT %v + recorded output tokens (≤ %d) at %.0f tok/s, think = recorded gap − modeled model time, × %.2f, ≤ %v (%v where not recorded), starts spread over %v, no request starts after %v, summarizer %s, %s, %s",
		m.sessions, m.perSess, m.latency.TTFT, m.outMax, m.latency.TokensPerSecond, m.thinkScale, m.thinkMax, m.thinkDef, m.ramp, m.duration, m.summarizer, m.historyString(), m.sessionIDString())
}

func (m loadModel) sessionIDString() string {
	if m.bodyIDs {
		return "sessions named by metadata.user_id in the body (no X-Condense-Session header)"
	}
	return "sessions named by the X-Condense-Session header"
}

// sessionBody returns body as session id sends it: with bodyIDs, with a metadata.user_id
// member of id appended after its last member.
func (m loadModel) sessionBody(id string, body []byte) []byte {
	if !m.bodyIDs {
		return body
	}
	end := bytes.LastIndexByte(body, '}')
	out := make([]byte, 0, len(body)+64)
	out = append(out, body[:end]...)
	out = append(out, `,"metadata":{"user_id":"`...)
	out = append(out, id...)
	out = append(out, `"}}`...)
	return out
}

func (m loadModel) historyString() string {
	if m.history == 0 {
		return "no history (each session's window starts cold)"
	}
	return fmt.Sprintf("the proxy first followed each session through up to %d recorded requests before its window (unmeasured)", m.history)
}

func (m loadModel) withoutFloor() string {
	m.floor, m.beside = "", ""
	return m.String()
}

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

// loadReport renders a run as markdown.
func loadReport(m loadModel, rs []pairResult, errs int, wall time.Duration, before, after promSample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Model: %s.\n\n", m)
	fmt.Fprintf(&b, "%d paired requests (each sent direct and through the proxy), %d errors, wall %v, %.1f proxied requests/s.\n\n",
		len(rs), errs, wall.Round(time.Second), float64(len(rs))/wall.Seconds())
	col := func(f func(pairResult) time.Duration, keep func(pairResult) bool) []time.Duration {
		var l []time.Duration
		for _, r := range rs {
			if keep == nil || keep(r) {
				l = append(l, f(r))
			}
		}
		sort.Slice(l, func(a, b int) bool { return l[a] < l[b] })
		return l
	}
	big := func(r pairResult) bool { return r.size > 256<<10 }
	first := func(r pairResult) bool { return r.first }
	warm := func(r pairResult) bool { return !r.first }
	fmt.Fprintf(&b, "| ms | n | p50 | p90 | p99 | p99.9 | max |\n|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, l []time.Duration) {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", name, len(l), msq(l, .5), msq(l, .9), msq(l, .99), msq(l, .999), msq(l, 1))
	}
	if m.mode != "saturate" {
		row("direct, end to end", col(func(r pairResult) time.Duration { return r.direct }, nil))
	}
	row("direct, minus modeled provider time", col(func(r pairResult) time.Duration { return r.directRm }, nil))
	row("proxied, minus modeled provider time", col(func(r pairResult) time.Duration { return r.proxiedRm }, nil))
	row("**added** (paired difference)", col(func(r pairResult) time.Duration { return r.added }, nil))
	row("added, bodies > 256 KiB", col(func(r pairResult) time.Duration { return r.added }, big))
	row("added, a session's later requests", col(func(r pairResult) time.Duration { return r.added }, warm))
	row("added, a session's first measured request", col(func(r pairResult) time.Duration { return r.added }, first))
	row("added before the fake had the request", col(func(r pairResult) time.Duration { rq, _ := r.addedSides(); return rq }, nil))
	row("added after the fake answered", col(func(r pairResult) time.Duration { _, rp := r.addedSides(); return rp }, nil))
	if len(rs) > 0 && rs[0].hasFloor {
		row("floor (forwarding only): added", col(func(r pairResult) time.Duration { return r.floorRm - r.directRm }, nil))
		row("floor: added before the fake had the request", col(func(r pairResult) time.Duration { return r.floorReq - r.directReq }, nil))
		row("floor: added after the fake answered", col(func(r pairResult) time.Duration { return r.floorResp - r.directResp }, nil))
		row("**condense over the floor** (proxied − floor)", col(func(r pairResult) time.Duration { return r.proxiedRm - r.floorRm }, nil))
		row("condense over the floor, bodies > 256 KiB", col(func(r pairResult) time.Duration { return r.proxiedRm - r.floorRm }, big))
		row("condense over the floor, before the fake had the request", col(func(r pairResult) time.Duration { return r.proxiedReq - r.floorReq }, nil))
		row("condense over the floor, after the fake answered", col(func(r pairResult) time.Duration { return r.proxiedResp - r.floorResp }, nil))
	}
	fmt.Fprintf(&b, "\n%s\n", tailSides(rs))
	fmt.Fprintf(&b, "\n%s", byTimeInRun(rs, 30*time.Second))
	fmt.Fprintf(&b, "\n%s\n", promSummary(before, after, len(rs)))
	return b.String()
}

// tailSides says where the added time of the slowest 1 % of pairs was: before the fake had
// the request (the proxy's read, own time and send, and the fake's read of the forwarded body)
// or after it answered (the relay back).
func tailSides(rs []pairResult) string {
	if len(rs) == 0 {
		return ""
	}
	top := append([]pairResult(nil), rs...)
	sort.Slice(top, func(a, b int) bool { return top[a].added > top[b].added })
	top = top[:max(1, len(top)/100)]
	var added, req, resp time.Duration
	big, first := 0, 0
	for _, r := range top {
		rq, rp := r.addedSides()
		added, req, resp = added+r.added, req+rq, resp+rp
		if r.size > 256<<10 {
			big++
		}
		if r.first {
			first++
		}
	}
	n := time.Duration(len(top))
	ms := func(d time.Duration) float64 { return float64((d / n).Microseconds()) / 1000 }
	return fmt.Sprintf("The %d pairs with the most added time (the top 1 %%): mean added %.2f ms, of which %.2f ms before the fake had the request and %.2f ms after it answered; %d with bodies > 256 KiB, %d a session's first measured request.",
		len(top), ms(added), ms(req), ms(resp), big, first)
}

// byTimeInRun tabulates the pairs by when their proxied copy was sent, in windows of width
// since the run began: how many, their median body, the direct path's own time, the added
// time and the share of pairs with more than 5 ms added. Sessions send larger bodies as they
// go, fewer of them remain active towards the end of a run, and after its last start the
// proxied copies of the last pairs run on an almost idle machine; the windows show whether
// the tail is spread over the run or comes from part of it. (In a window of under 100 pairs
// the p99 is its slowest pair.)
func byTimeInRun(rs []pairResult, width time.Duration) string {
	if len(rs) == 0 || width <= 0 {
		return ""
	}
	windows := map[int][]pairResult{}
	last := 0
	for _, r := range rs {
		w := int(r.proxAt / width)
		windows[w] = append(windows[w], r)
		last = max(last, w)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The pairs by when their proxied copy was sent:\n\n")
	fmt.Fprintf(&b, "| proxied copy sent (s) | n | median body KiB | direct own p90 / p99 | added p50 / p90 / p99 | added > 5 ms |\n|---|---:|---:|---:|---:|---:|\n")
	for w := 0; w <= last; w++ {
		in := windows[w]
		if len(in) == 0 {
			continue
		}
		var direct, added []time.Duration
		sizes := make([]int, 0, len(in))
		slow := 0
		for _, r := range in {
			direct, added = append(direct, r.directRm), append(added, r.added)
			sizes = append(sizes, r.size)
			if r.added > 5*time.Millisecond {
				slow++
			}
		}
		slices.Sort(direct)
		slices.Sort(added)
		slices.Sort(sizes)
		from, to := (time.Duration(w) * width).Seconds(), (time.Duration(w+1) * width).Seconds()
		fmt.Fprintf(&b, "| %g–%g | %d | %d | %s / %s | %s / %s / %s | %.1f %% |\n", from, to,
			len(in), sizes[len(sizes)/2]>>10, msq(direct, .9), msq(direct, .99), msq(added, .5), msq(added, .9), msq(added, .99),
			100*float64(slow)/float64(len(in)))
	}
	return b.String()
}

// selfCPU returns the CPU time (user + system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// msq formats the q-quantile of a sorted list in milliseconds.
func msq(l []time.Duration, q float64) string {
	if len(l) == 0 {
		return "–"
	}
	d := l[min(len(l)-1, int(q*float64(len(l))))]
	return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v >= 0 {
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
