package cachepolicy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/wire"
)

// sonnet is an Anthropic-cached price: $3/MTok input, read 0.1×, write 1.25× (5m) / 2× (1h).
var sonnet = cost.Price{Input: 3, Output: 15, Cache: cost.CacheAnthropic, CacheRead: 0.1, CacheWrite5m: 1.25, CacheWrite1h: 2}

func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		keep bool
		gain float64
		loss float64
		why  string
	}{
		{"expired cache: always free",
			Input{CurrentTokens: 1000, NextTokens: 999, CurrentCached: 1000, NextCached: 0, Price: sonnet, Remaining: 8},
			true, 0, 0, "expired"},
		{"expired cache even when the flush grows the prompt",
			Input{CurrentTokens: 1000, NextTokens: 2000, Price: sonnet, Remaining: 8, SummarizerUSD: 1},
			true, 0, 1, "expired"},
		// gain = 50,000 × 0.1 × 8 × 3e-6 = 0.12; loss = 100,000 × 1.15 × 3e-6 = 0.345
		{"warm cache, small saving: defer",
			Input{CurrentTokens: 100_000, NextTokens: 50_000, CurrentCached: 100_000, NextCached: 0, CacheAlive: true, Price: sonnet, Remaining: 8},
			false, 0.12, 0.345, "re-writing 100000 cached tokens"},
		// gain = 90,000 × 0.1 × 32 × 3e-6 = 0.864; loss = 0.345
		{"warm cache, big saving over a long horizon: keep",
			Input{CurrentTokens: 100_000, NextTokens: 10_000, CurrentCached: 100_000, NextCached: 0, CacheAlive: true, Price: sonnet, Remaining: 32},
			true, 0.864, 0.345, "saves 90000 tokens × 32 requests"},
		// only the tail after the first change is lost: 20,000 × 1.15 × 3e-6 = 0.069
		{"warm cache, change deep in the prompt: keep",
			Input{CurrentTokens: 100_000, NextTokens: 70_000, CurrentCached: 100_000, NextCached: 80_000, CacheAlive: true, Price: sonnet, Remaining: 8},
			true, 0.072, 0.069, ""},
		{"summarizer cost tips it",
			Input{CurrentTokens: 100_000, NextTokens: 70_000, CurrentCached: 100_000, NextCached: 80_000, CacheAlive: true, Price: sonnet, Remaining: 8, SummarizerUSD: 0.01},
			false, 0.072, 0.079, ""},
		// 1h writes cost 2×: loss = 20,000 × 1.9 × 3e-6 = 0.114
		{"1-hour cache entries cost more to re-write",
			Input{CurrentTokens: 100_000, NextTokens: 70_000, CurrentCached: 100_000, NextCached: 80_000, CacheAlive: true, TTL: time.Hour, Price: sonnet, Remaining: 8},
			false, 0.072, 0.114, ""},
		{"nothing cached yet: any saving is kept",
			Input{CurrentTokens: 10_000, NextTokens: 9_000, CacheAlive: true, Price: sonnet, Remaining: 8},
			true, 0.0024, 0, ""},
		{"a flush that saves nothing is deferred",
			Input{CurrentTokens: 10_000, NextTokens: 10_000, CacheAlive: true, Price: sonnet, Remaining: 8},
			false, 0, 0, ""},
		{"a cached prefix that grows is no loss",
			Input{CurrentTokens: 10_000, NextTokens: 9_000, CurrentCached: 0, NextCached: 5_000, CacheAlive: true, Price: sonnet, Remaining: 8},
			true, 0.0024, 0, ""},
		// no caching: read and write at the base price, so nothing is lost by rewriting
		{"model without caching",
			Input{CurrentTokens: 10_000, NextTokens: 9_000, CurrentCached: 10_000, CacheAlive: true, Price: cost.Price{Input: 2, Cache: cost.CacheNone}, Remaining: 8},
			true, 0.016, 0, ""},
		// automatic caching: read 0.5×, writes at the base price: loss = 10,000 × 0.5 × 2e-6
		{"automatic caching",
			Input{CurrentTokens: 10_000, NextTokens: 9_900, CurrentCached: 10_000, CacheAlive: true, Price: cost.Price{Input: 2, Cache: cost.CacheAutomatic, CacheRead: 0.5}, Remaining: 8},
			false, 0.0008, 0.01, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.in)
			if d.Keep != c.keep {
				t.Fatalf("Keep = %v, want %v (%s)", d.Keep, c.keep, d.Reason)
			}
			if !near(d.GainUSD, c.gain) || !near(d.LossUSD, c.loss) {
				t.Fatalf("gain %.6f loss %.6f, want %.6f %.6f", d.GainUSD, d.LossUSD, c.gain, c.loss)
			}
			if d.Reason == "" || !strings.Contains(d.Reason, c.why) {
				t.Fatalf("reason %q, want it to mention %q", d.Reason, c.why)
			}
		})
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

func TestHorizonRemaining(t *testing.T) {
	cases := []struct {
		h     Horizon
		soFar int
		want  float64
	}{
		{Horizon{}, 0, DefaultHorizon},
		{Horizon{}, 20, 20},
		{Horizon{}, 100, DefaultMaxHorizon},
		{Horizon{Min: 4, Max: 10}, 2, 4},
		{Horizon{Min: 4, Max: 10}, 7, 7},
		{Horizon{Min: 4, Max: 10}, 11, 10},
		{Horizon{Min: 16, Max: 4}, 40, 16}, // Max below Min is raised to Min
		{Horizon{Min: 1, Max: 1}, -3, 1},
	}
	for _, c := range cases {
		if got := c.h.Remaining(c.soFar); got != c.want {
			t.Errorf("%+v.Remaining(%d) = %v, want %v", c.h, c.soFar, got, c.want)
		}
	}
}

func TestAlive(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		last time.Time
		now  time.Time
		ttl  time.Duration
		want bool
	}{
		{time.Time{}, t0, cost.TTL5m, false},
		{t0, t0.Add(4*time.Minute + 59*time.Second), cost.TTL5m, true},
		{t0, t0.Add(5 * time.Minute), cost.TTL5m, false},
		{t0, t0.Add(4 * time.Minute), 0, true},
		{t0, t0.Add(6 * time.Minute), 0, false},
		{t0, t0.Add(59 * time.Minute), cost.TTL1h, true},
		{t0, t0.Add(61 * time.Minute), cost.TTL1h, false},
		{t0, t0.Add(-time.Minute), cost.TTL5m, true}, // a clock step back keeps it alive
	}
	for i, c := range cases {
		if got := Alive(c.last, c.now, c.ttl); got != c.want {
			t.Errorf("case %d: Alive = %v, want %v", i, got, c.want)
		}
	}
}

func TestPromptTTLAndSharedPrefix(t *testing.T) {
	body := func(ttl string) []byte {
		cc := `{"type":"ephemeral"}`
		if ttl != "" {
			cc = `{"type":"ephemeral","ttl":"` + ttl + `"}`
		}
		return []byte(`{"model":"claude-sonnet-4-5","system":[{"type":"text","text":"You are a coding agent.","cache_control":` + cc + `}],` +
			`"messages":[{"role":"user","content":"first question, long enough to count"},{"role":"assistant","content":"an answer"},{"role":"user","content":"second"}]}`)
	}
	p5, err := cost.FromBody(body(""), cost.PromptOptions{Format: wire.Anthropic, Breakpoints: cost.BreakpointsClient})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := cost.FromBody(body("1h"), cost.PromptOptions{Format: wire.Anthropic, Breakpoints: cost.BreakpointsClient})
	if err != nil {
		t.Fatal(err)
	}
	if got := PromptTTL(&p5); got != cost.TTL5m {
		t.Errorf("PromptTTL without ttl = %v", got)
	}
	if got := PromptTTL(&p1); got != cost.TTL1h {
		t.Errorf("PromptTTL with ttl 1h = %v", got)
	}
	if got, want := sharedPrefix(&p5, &p5), int64(p5.Tokens()); got != want {
		t.Errorf("sharedPrefix(p, p) = %d, want %d", got, want)
	}
	edited, _ := cost.FromBody([]byte(strings.Replace(string(body("")), "an answer", "a different answer", 1)), cost.PromptOptions{Format: wire.Anthropic})
	sh := sharedPrefix(&p5, &edited)
	want := int64(p5.Segments[0].Tokens + p5.Segments[1].Tokens) // system + first user message
	if sh != want {
		t.Errorf("SharedPrefix after an edit of message 2 = %d, want %d", sh, want)
	}
}

// run parses messages from a compact script: u = user text, a = assistant text, t = assistant
// with a tool call, r = user with its tool result.
func run(t *testing.T, script string) []*wire.Message {
	t.Helper()
	var msgs []string
	n := 0
	for _, c := range script {
		switch c {
		case 'u':
			msgs = append(msgs, `{"role":"user","content":"question"}`)
		case 'a':
			msgs = append(msgs, `{"role":"assistant","content":"final answer"}`)
		case 't':
			n++
			msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"read","input":{}}]}`, n))
		case 'r':
			msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"result %d"}]}`, n, n))
		}
	}
	req, err := wire.Parse(wire.Anthropic, []byte(`{"model":"m","messages":[`+strings.Join(msgs, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	return req.Messages
}

func TestMidRunCut(t *testing.T) {
	cases := []struct {
		script string
		grace  int
		want   int
	}{
		{"u", 3, 0},
		{"utrtrtr", 3, 0},        // exactly grace tool turns: nothing may be touched
		{"utrtrtrtr", 3, 3},      // 4 turns: the first turn and its result
		{"utrtrtrtrtr", 3, 5},    // the cut moves with the run
		{"utrtrtrtr", 1, 7},      // grace 1: everything before the latest turn
		{"utrtrtrtr", 0, 3},      // 0 means the default (3)
		{"utrauatrtrtrtr", 3, 8}, // a finished chain and the first turn of the new run
		{"utrtrtrar", 3, 0},      // three tool turns and a final reply: still within grace
		{"utrtr", 1, 3},          // grace 1: the first turn
	}
	for _, c := range cases {
		msgs := run(t, c.script)
		got, key := MidRunCut(msgs, c.grace)
		if got != c.want {
			t.Errorf("%s grace %d: cut %d, want %d", c.script, c.grace, got, c.want)
			continue
		}
		if got > 0 && (msgs[got].Role != "assistant" || key == 0) {
			t.Errorf("%s: cut %d is not at an assistant message (key %x)", c.script, got, key)
		}
	}
	a, ka := MidRunCut(run(t, "utrtrtrtr"), 3)
	b, kb := MidRunCut(run(t, "utrtrtrtrtr"), 3)
	if a == b || ka == kb {
		t.Errorf("moving cut must change the key: %d/%x vs %d/%x", a, ka, b, kb)
	}
}

func TestMidRunDue(t *testing.T) {
	cases := []struct {
		key, last uint64
		alive     bool
		want      bool
	}{
		{1, 0, true, true},  // first cut
		{1, 1, true, false}, // same cut, warm cache: already weighed
		{1, 1, false, true}, // same cut, cache expired: free now
		{2, 1, true, true},  // the cut moved
	}
	for _, c := range cases {
		if got := MidRunDue(c.key, c.last, c.alive); got != c.want {
			t.Errorf("MidRunDue(%d, %d, %v) = %v, want %v", c.key, c.last, c.alive, got, c.want)
		}
	}
}

func TestRequestTTL(t *testing.T) {
	cases := map[string]time.Duration{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                                                                                          cost.TTL5m,
		`{"model":"m","system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`:               cost.TTL5m,
		`{"model":"m","system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"}]}`:    cost.TTL1h,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`:                 cost.TTL1h,
		`{"model":"m","tools":[{"name":"x","input_schema":{},"cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"}]}`: cost.TTL1h,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]}`:                 cost.TTL5m,
	}
	for body, want := range cases {
		req, err := wire.Parse(wire.Anthropic, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := RequestTTL(req); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}

// sharedPrefix returns the tokens of the leading segments a and b have in common: what a
// cache written by a could serve to b, before breakpoint placement is taken into account.
func sharedPrefix(a, b *cost.Prompt) int64 {
	var n int64
	for i := 0; i < len(a.Segments) && i < len(b.Segments); i++ {
		if a.Segments[i].Key != b.Segments[i].Key {
			break
		}
		n += int64(b.Segments[i].Tokens)
	}
	return n
}
