package pruner

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/codexrollout"
	"github.com/condense-dev/condense/internal/wire"
)

// workloadTx is the reference's benchmark workload: 20 tasks, each a user prompt, 9 turns of
// an assistant with 600 characters of thinking and one tool call plus a 10,000-character
// result, and a final text reply: 400 messages, about 2 MB. uptoTask/uptoTurn cut it short
// (the flush point used to build the state).
func workloadTx(f wire.Format, uptoTask, uptoTurn int) *tx {
	x := newTx(f)
	thinking := strings.Repeat("I should look at the next file carefully. ", 15)[:600]
	for task := 0; task < 20; task++ {
		x.user(fmt.Sprintf("Task %d: fix the failing test in package p%d.", task, task))
		for turn := 0; turn < 9; turn++ {
			if task == uptoTask && turn == uptoTurn {
				return x
			}
			id := fmt.Sprintf("toolu_%02d_%d", task, turn)
			input := fmt.Sprintf(`{"path":"pkg/p%d/file%d.go"}`, task, turn)
			x.asst(thinking, "", tcall{id, "read", input})
			var b strings.Builder
			for b.Len() < 10000 {
				fmt.Fprintf(&b, "%d:%d line of source code in file %d of task %d\n", task, b.Len(), turn, task)
			}
			x.results(tres{id: id, text: b.String()[:10000]})
		}
		x.asst("Done with the task.", fmt.Sprintf("Task %d is fixed.", task))
	}
	return x
}

// workload returns the full request body and the state: 150 results summarized and 12
// chains compressed (flushed at task 17 turn 7 with a rolling window of 4).
func workload(tb testing.TB, f wire.Format) ([]byte, *State, Policy) {
	pol := DefaultPolicy()
	pol.Chain.RollingWindow = 4
	st := flush(tb, workloadTx(f, 16, 6).req(tb), NewState(), pol)
	if len(st.Records) != 150 || len(st.Chains) != 12 {
		tb.Fatalf("workload state: %d records, %d chains", len(st.Records), len(st.Chains))
	}
	return workloadTx(f, -1, -1).body(), st, pol
}

func TestWorkloadShape(t *testing.T) {
	body, st, pol := workload(t, wire.Anthropic)
	req := mustParse(t, wire.Anthropic, body)
	if len(req.Messages) != 400 || len(body) < 1900000 || len(body) > 2300000 {
		t.Fatalf("%d messages, %d bytes", len(req.Messages), len(body))
	}
	res := Render(req, st, pol)
	mustValid(t, req, res)
	if res.Stats.Chains != 12 || res.Stats.Stubbed != 150-12*9 {
		t.Fatalf("%+v", res.Stats)
	}
}

// cpuNanos is the process's user+system CPU time. The team machine is shared and heavily
// loaded, so benchmarks also report CPU time per operation (cpu-ns/op), which contention
// does not inflate the way it inflates wall time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// cpuTimer reports cpu-ns/op when stopped.
type cpuTimer struct {
	b     *testing.B
	start int64
}

func startCPU(b *testing.B) *cpuTimer { b.ResetTimer(); return &cpuTimer{b: b, start: cpuNanos()} }

func (c *cpuTimer) stop() {
	c.b.StopTimer()
	c.b.ReportMetric(float64(cpuNanos()-c.start)/float64(c.b.N), "cpu-ns/op")
}

func benchRender(b *testing.B, f wire.Format, empty bool) {
	body, st, pol := workload(b, f)
	if empty {
		st = NewState()
	}
	benchParseRender(b, f, body, st, pol)
}

// benchParseRender measures parse + render + serialize of body with st.
func benchParseRender(b *testing.B, f wire.Format, body []byte, st *State, pol Policy) {
	benchParse(b, f, body, func(req *wire.Request) int { return len(Render(req, st, pol).Body) })
}

// benchParse measures parsing body and then serialize, which returns the output's length.
func benchParse(b *testing.B, f wire.Format, body []byte, serialize func(*wire.Request) int) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var out int
	ct := startCPU(b)
	for i := 0; i < b.N; i++ {
		req, err := wire.Parse(f, body)
		if err != nil {
			b.Fatal(err)
		}
		out = serialize(req)
	}
	ct.stop()
	b.ReportMetric(float64(out), "out-bytes")
}

// BenchmarkRenderWorkload is parse + render + serialize of the reference workload.
func BenchmarkRenderWorkload(b *testing.B) {
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) { benchRender(b, f, false) })
	}
}

// BenchmarkRenderSegments is the proxy's cold path on the reference workload: parse, render
// and serialize as the Segments the proxy forwards (unchanged bytes referenced, not copied).
func BenchmarkRenderSegments(b *testing.B) {
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			body, st, pol := workload(b, f)
			benchParse(b, f, body, func(req *wire.Request) int {
				return RenderRequest(req, st, pol).Request.Segments().Len()
			})
		})
	}
}

// BenchmarkRenderCodex is parse + render + serialize of the corpus Codex sessions joined into
// one transcript: the Responses request Codex sends at its end (about 1 MB) and the same
// transcript as a Chat Completions request (the importer's OpenAI form, without the reasoning
// items, which that format has no place for), each with the state of a flush three model
// responses earlier.
func BenchmarkRenderCodex(b *testing.B) {
	ro := codexrollout.Joined(b)
	cut := ro.Ends[len(ro.Ends)-3]
	for _, f := range []wire.Format{wire.Responses, wire.OpenAI} {
		b.Run(f.String(), func(b *testing.B) {
			body, prefix := ro.Body(ro.Items), ro.Body(ro.Items[:cut])
			if f == wire.OpenAI {
				body, prefix = ro.ChatBody(ro.Chat), ro.ChatBody(ro.Chat[:ro.ChatEnds[len(ro.ChatEnds)-3]])
			}
			pol := DefaultPolicy()
			st := flush(b, mustParse(b, f, prefix), NewState(), pol)
			b.ReportMetric(float64(len(body)), "in-bytes")
			benchParseRender(b, f, body, st, pol)
		})
	}
}

// BenchmarkRenderWorkloadEmptyState is the same request with an empty state (forwarded as is).
func BenchmarkRenderWorkloadEmptyState(b *testing.B) {
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) { benchRender(b, f, true) })
	}
}

// BenchmarkRenderOnly excludes parsing.
func BenchmarkRenderOnly(b *testing.B) {
	body, st, pol := workload(b, wire.Anthropic)
	req := mustParse(b, wire.Anthropic, body)
	b.ReportAllocs()
	ct := startCPU(b)
	for i := 0; i < b.N; i++ {
		Render(req, st, pol)
	}
	ct.stop()
}

// BenchmarkPlanFlush plans a flush over the workload with its state (30 new results).
func BenchmarkPlanFlush(b *testing.B) {
	body, st, pol := workload(b, wire.Anthropic)
	req := mustParse(b, wire.Anthropic, body)
	b.ReportAllocs()
	ct := startCPU(b)
	for i := 0; i < b.N; i++ {
		if _, err := PlanFlush(req, st, pol, t0); err != nil {
			b.Fatal(err)
		}
	}
	ct.stop()
}

// BenchmarkParseOnly is wire.Parse of the workload body in each format, for reference.
func BenchmarkParseOnly(b *testing.B) {
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			body := workloadTx(f, -1, -1).body()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			ct := startCPU(b)
			for i := 0; i < b.N; i++ {
				if _, err := wire.Parse(f, body); err != nil {
					b.Fatal(err)
				}
			}
			ct.stop()
		})
	}
}

// BenchmarkRenderBody is the proxy's path: RenderBody skips parsing for an empty state.
func BenchmarkRenderBody(b *testing.B) {
	body, st, pol := workload(b, wire.Anthropic)
	for _, c := range []struct {
		name string
		st   *State
	}{{"state", st}, {"empty", NewState()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			ct := startCPU(b)
			for i := 0; i < b.N; i++ {
				if _, err := RenderBody(wire.Anthropic, body, c.st, pol); err != nil {
					b.Fatal(err)
				}
			}
			ct.stop()
		})
	}
}

// BenchmarkRenderSteadyState is the proxy's steady state on the reference workload: the
// request is parsed with wire.ParseReusing against the previous request of the session
// (the same conversation minus its last two messages), then rendered and serialized.
func BenchmarkRenderSteadyState(b *testing.B) {
	for _, f := range formats {
		b.Run(f.String(), func(b *testing.B) {
			body, st, pol := workload(b, f)
			full := mustParse(b, f, body)
			prev := mustParse(b, f, full.WithMessages(full.Messages[:len(full.Messages)-2]).Bytes())
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var out int
			ct := startCPU(b)
			for i := 0; i < b.N; i++ {
				req, err := wire.ParseReusing(f, body, prev)
				if err != nil {
					b.Fatal(err)
				}
				res := Render(req, st, pol)
				out = len(res.Body)
			}
			ct.stop()
			b.ReportMetric(float64(out), "out-bytes")
		})
	}
}
