package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// benchBody builds an Anthropic request of a tool-using session: `turns` tool calls with
// results of resultLines lines each, then a final answer and a new user prompt.
func benchBody(turns, resultLines int) []byte { return benchBodyTagged(turns, resultLines, "") }

// benchBodyTagged is benchBody with tag in every tool output, so that two tags give two
// sessions no summary or memo in common.
func benchBodyTagged(turns, resultLines int, tag string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-sonnet-test","max_tokens":1024,"system":"You are a coding agent.","tools":[{"name":"bash","input_schema":{"type":"object"}}],"messages":[`)
	b.WriteString(`{"role":"user","content":"Fix the build."}`)
	for i := 0; i < turns; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Step %d."},{"type":"tool_use","id":"toolu_%03d","name":"bash","input":{"cmd":"make step%d"}}]}`, i, i, i)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%03d","content":%q}]}`, i, bigOutput(fmt.Sprintf("%ss%d", tag, i), resultLines))
	}
	b.WriteString(`,{"role":"assistant","content":[{"type":"text","text":"Done."}]},{"role":"user","content":"Thanks, next task."}]}`)
	return b.Bytes()
}

// benchServer returns a proxy whose session "bench" has a committed state covering body.
func benchServer(b *testing.B, up *upstreamfake.Server, body []byte) *Server {
	st := store.NewMemory(0)
	b.Cleanup(func() { _ = st.Close() })
	if body != nil {
		orch := &flush.Orchestrator{Store: st, Planner: flush.EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{},
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		res, err := orch.Flush(context.Background(), &flush.Job{Queued: flush.Queued{Session: "bench", Format: wire.Anthropic, Body: body, Trigger: "bench"}})
		if err != nil || res.Version == 0 {
			b.Fatalf("flush: %v %+v", err, res)
		}
	}
	px, err := New(Options{AnthropicBaseURL: up.URL, OpenAIBaseURL: up.URL + "/v1", Store: st, Policy: testPolicy(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = px.Close() })
	return px
}

// BenchmarkPrepare measures the proxy's hot path before forwarding: parse, session id,
// store load (in-memory), view (query tool), render and serialize.
//
// The cold variant parses every request from scratch (a session's first request, or a proxy
// replica that has not seen the session); steady parses as the handler does, reusing the
// session's previous parse (wire.ParseReusing through the parse cache).
//
// The recent variant is steady with a state that covers only the first quarter of the
// session's turns (as inside a long tool run between flushes): most of the body is forwarded
// as it came. The new variant is cold for a session with no state yet (nothing flushed), as
// when a proxy first sees a long session, and as a load test's first requests are. The
// 200sessions variants are steady over many sessions whose data is out of the CPU caches, as
// under load (benchPrepareMany).
func BenchmarkPrepare(b *testing.B) {
	for _, size := range []struct{ turns, lines int }{{20, 100}, {60, 150}} {
		body := benchBody(size.turns, size.lines)
		for _, steady := range []bool{false, true} {
			benchPrepare(b, body, body, steady, "")
		}
	}
	benchPrepare(b, benchBody(60, 150), benchBody(15, 150), true, "/recent")
	benchPrepare(b, benchBody(60, 150), nil, false, "/new")
	benchPrepareMany(b, benchBody(60, 150), 200, 0)
	benchPrepareMany(b, benchBody(60, 150), 200, 5*time.Millisecond)
}

// benchPrepareMany is the steady variant over many sessions in turn, each with its own state
// and its requests in another buffer than the one its remembered parse came from (a server
// reads every request into a new buffer, so the parse reuse compares the bytes with those of
// the previous request), as a loaded proxy
// sees them: each request finds its session's parse, state and bytes out of the CPU caches
// (200 sessions of 812 KB are about 500 MB of bodies and parses), where the plain steady
// variant runs one session from cache.
//
// A pause > 0 sleeps that long before each request, outside the timing, as requests arrive
// one by one under a realistic load: what else the machine runs meanwhile evicts the
// proxy's code and data from the caches too.
func benchPrepareMany(b *testing.B, body []byte, sessions int, pause time.Duration) {
	name := fmt.Sprintf("%dKB/steady/%dsessions", len(body)>>10, sessions)
	if pause > 0 {
		name += fmt.Sprintf("/paced%v", pause)
	}
	b.Run(name, func(b *testing.B) {
		up := upstreamfake.Start()
		defer up.Close()
		px := benchServer(b, up, nil)
		bodies, hdrs := manySessions(b, px, body, sessions)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if pause > 0 {
				b.StopTimer()
				time.Sleep(pause)
				b.StartTimer()
			}
			k := i % sessions
			prepareOnce(b, px, hdrs[k], bodies[k][1])
		}
	})
}

// manySessions gives px sessions "bench-000"… each with a committed state covering body and
// its parse remembered, and returns two copies of body per session (the parse is of the
// first; send the second) and each session's request header.
func manySessions(b *testing.B, px *Server, body []byte, sessions int) ([][2][]byte, []http.Header) {
	orch := &flush.Orchestrator{Store: px.opt.Store, Planner: flush.EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	bodies := make([][2][]byte, sessions)
	hdrs := make([]http.Header, sessions)
	for i := range bodies {
		bodies[i] = [2][]byte{bytes.Clone(body), bytes.Clone(body)}
		sid := fmt.Sprintf("bench-%03d", i)
		hdrs[i] = http.Header{HeaderSession: []string{sid}}
		if res, err := orch.Flush(context.Background(), &flush.Job{Queued: flush.Queued{Session: sid, Format: wire.Anthropic, Body: bodies[i][0], Trigger: "bench"}}); err != nil || res.Version == 0 {
			b.Fatalf("flush: %v %+v", err, res)
		}
		req, err := px.parses.parse(wire.Anthropic, sid, bodies[i][0])
		if err != nil {
			b.Fatal(err)
		}
		px.parses.put(wire.Anthropic, sid, req)
	}
	return bodies, hdrs
}

// benchPrepare runs the request body against a session whose state is a flush of flushed
// (nil: no state).
func benchPrepare(b *testing.B, body, flushed []byte, steady bool, variant string) {
	{
		name := fmt.Sprintf("%dKB", len(body)>>10)
		if steady {
			name += "/steady"
		} else {
			name += "/cold"
		}
		b.Run(name+variant, func(b *testing.B) {
			up := upstreamfake.Start()
			defer up.Close()
			px := benchServer(b, up, flushed)
			hdr := http.Header{HeaderSession: []string{"bench"}}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			var out int
			for i := 0; i < b.N; i++ {
				sid, _ := sessionID(wire.Anthropic, hdr, body)
				var req *wire.Request
				var err error
				if steady {
					req, err = px.parses.parse(wire.Anthropic, sid, body)
					px.parses.put(wire.Anthropic, sid, req)
				} else {
					req, err = wire.Parse(wire.Anthropic, body)
				}
				if err != nil {
					b.Fatal(err)
				}
				t := &turn{f: wire.Anthropic, ep: epMessages, hdr: hdr, client: req, log: px.log, sid: sid}
				px.prepare(context.Background(), t)
				if t.open != "" {
					b.Fatalf("failed open: %s", t.open)
				}
				out = t.body.Len()
			}
			b.ReportMetric(float64(out), "bytes-out")
		})
	}
}

// BenchmarkProxyRoundTripSessions is a whole non-streaming round trip of an 812 KB steady
// request through the proxy, over loopback, for 200 sessions in turn (as
// BenchmarkPrepare/812KB/steady/200sessions): the client's bytes arrive in pieces while the
// proxy reads them.
func BenchmarkProxyRoundTripSessions(b *testing.B) {
	body := benchBody(60, 150)
	up := quietUpstream(b)
	px := benchServer(b, up, nil)
	bodies, hdrs := manySessions(b, px, body, 200)
	roundTripEach(b, serve(b, px), len(body), func(i int) ([]byte, string) {
		k := i % len(bodies)
		return bodies[k][1], hdrs[k].Get(HeaderSession)
	})
}

// BenchmarkProxyRoundTrip measures a whole non-streaming request through the proxy to the
// fake upstream over loopback, against BenchmarkDirectRoundTrip (same request, no proxy).
func BenchmarkProxyRoundTrip(b *testing.B) {
	body := benchBody(20, 100)
	up := quietUpstream(b)
	px := benchServer(b, up, body)
	roundTrip(b, serve(b, px), body)
	reportFinish(b, px)
}

// BenchmarkDirectRoundTrip is the baseline of BenchmarkProxyRoundTrip.
func BenchmarkDirectRoundTrip(b *testing.B) {
	body := benchBody(20, 100)
	up := quietUpstream(b)
	roundTrip(b, up.URL, body)
}

// quietUpstream starts a fake upstream that keeps no record of requests, closed when b ends.
func quietUpstream(b *testing.B) *upstreamfake.Server {
	up := upstreamfake.Start()
	b.Cleanup(up.Close)
	up.SetRecording(false)
	return up
}

// serve serves px over loopback until b ends and returns its base URL.
func serve(b *testing.B, px *Server) string {
	srv := httptest.NewServer(px)
	b.Cleanup(srv.Close)
	return srv.URL
}

func roundTrip(b *testing.B, base string, body []byte) {
	roundTripEach(b, base, len(body), func(int) ([]byte, string) { return body, "bench" })
}

// roundTripEach sends b.N requests to base, the i-th with the body and session next(i)
// returns, and checks each answer.
func roundTripEach(b *testing.B, base string, size int, next func(i int) (body []byte, sid string)) {
	client := &http.Client{}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body, sid := next(i)
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
		req.Header.Set(HeaderSession, sid)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(data), `"ok"`) {
			b.Fatalf("%d %s", resp.StatusCode, data)
		}
	}
}

// BenchmarkPrepareAfterFlush is BenchmarkPrepare's steady 812 KB request as the first request
// of a session after a flush of this process committed a new state, the request that follows
// every final answer: each iteration gives a new session (its own tool outputs) a flushed
// 40-turn request, then the 60-turn one and its in-process flush (with the final answer the
// fake gives), through the handler, and waits for that flush; then it times one Prepare of
// the 60-turn request read into another buffer. The "/second" variant times the request after
// that one instead, with nothing committed in between: the steady case. The "/worker" variant
// has no flusher in the proxy: the flushes run on the shared store as a condense pruner worker
// runs them, and the proxy warms the state on their commit notifications.
func BenchmarkPrepareAfterFlush(b *testing.B) {
	for _, variant := range []string{"first", "second", "worker"} {
		b.Run(variant, func(b *testing.B) {
			up := quietUpstream(b)
			st := store.NewMemory(0)
			b.Cleanup(func() { _ = st.Close() })
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			orch := &flush.Orchestrator{Store: st, Planner: flush.EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Log: quiet}
			opt := Options{AnthropicBaseURL: up.URL, OpenAIBaseURL: up.URL + "/v1", Store: st, Policy: testPolicy(), Logger: quiet}
			if variant != "worker" {
				inproc := &flush.InProcess{MaxConcurrent: 1, Orch: orch}
				b.Cleanup(func() { _ = inproc.Close(context.Background()) })
				opt.Flusher = inproc
			}
			px, err := New(opt)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = px.Close() })
			// send sends a request through the handler and waits for its flush: the proxy's
			// own, or for "worker" one run on the store as a pruner worker runs it, and the
			// proxy's warm-up on its commit notification.
			send := func(sid string, body []byte) {
				sendSettled(b, px, sid, body)
				if variant != "worker" {
					return
				}
				warmed := testutil.ToFloat64(px.met.Warmups)
				if _, err := orch.Flush(context.Background(), &flush.Job{Queued: flush.Queued{Session: sid, Format: wire.Anthropic, Body: body, Trigger: "agent-message"}}); err != nil {
					b.Fatal(err)
				}
				for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(px.met.Warmups) == warmed; {
					if time.Now().After(deadline) {
						b.Fatal("no warm-up after the worker's commit")
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			b.SetBytes(int64(len(benchBody(60, 150))))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if i > 0 {
					settleFlush(px, fmt.Sprintf("after-%d", i-1))
				}
				sid, tag := fmt.Sprintf("after-%d", i), fmt.Sprintf("x%d-", i)
				send(sid, benchBodyTagged(40, 150, tag))
				body := benchBodyTagged(60, 150, tag)
				send(sid, body)
				hdr := http.Header{HeaderSession: []string{sid}}
				if variant == "second" {
					prepareOnce(b, px, hdr, bytes.Clone(body))
					settleFlush(px, sid)
				}
				again := bytes.Clone(body)
				b.StartTimer()
				prepareOnce(b, px, hdr, again)
			}
		})
	}
}

// prepareOnce parses body as the handler does (reusing the session's remembered parse) and
// runs Prepare on it.
func prepareOnce(b testing.TB, px *Server, hdr http.Header, body []byte) {
	sid := hdr.Get(HeaderSession)
	req, err := px.parses.parse(wire.Anthropic, sid, body)
	if err != nil {
		b.Fatal(err)
	}
	px.parses.put(wire.Anthropic, sid, req)
	t := &turn{f: wire.Anthropic, ep: epMessages, hdr: hdr, client: req, log: px.log, sid: sid}
	px.prepare(context.Background(), t)
	if t.open != "" {
		b.Fatalf("failed open: %s", t.open)
	}
}

// sendSettled sends body through px's handler as session sid, checks the answer, and waits
// until the flushes it started have ended (settleFlush).
func sendSettled(tb testing.TB, px *Server, sid string, body []byte) {
	tb.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
	req.Header.Set(HeaderSession, sid)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	px.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("%d %s", rec.Code, rec.Body.Bytes())
	}
	settleFlush(px, sid)
}

// settleFlush waits until px's background work has finished and the session's last flush has
// ended (and with it the state and render warm-up after a commit).
func settleFlush(px *Server, sid string) {
	px.bg.Wait()
	if f, ok := px.flights.Load(sid); ok {
		<-f.(*flight).done
	}
}
