package fidelity

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// js encodes s as a JSON string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A hand-made Anthropic session in which every use is known:
//
//	m0 user       fix the failing test in the store package
//	m1 assistant  bash go test ./internal/store/                      (call a)
//	m2 user       result a: FAIL TestOpenRedis, redis_test.go:31: dial tcp: connection refused
//	m3 assistant  "TestOpenRedis fails at redis_test.go:31", read internal/store/redis_test.go (call b)
//	m4 user       result b: the test's source, with c := openClient("127.0.0.1:6379")
//	m5 assistant  edit: that line → c := openClient(redisAddr(t))     (call c)
//	m6 user       result c: ok
//
// Request k holds the messages before the (k+1)-th assistant message: R0 = m0, R1 = m0..m2,
// R2 = m0..m4, R3 = m0..m6.
var session = []string{
	`{"role":"user","content":"fix the failing test in the store package"}`,
	`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{"command":"go test ./internal/store/"}}]}`,
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":` +
		js("--- FAIL: TestOpenRedis (0.01s)\n    redis_test.go:31: dial tcp: connection refused\nFAIL\tgithub.com/x/internal/store\t0.02s") + `}]}`,
	`{"role":"assistant","content":[{"type":"text","text":"TestOpenRedis fails at redis_test.go:31; reading it."},` +
		`{"type":"tool_use","id":"b","name":"read","input":{"path":"internal/store/redis_test.go"}}]}`,
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"b","content":` +
		js("func TestOpenRedis(t *testing.T) {\n\tc := openClient(\"127.0.0.1:6379\")\n\tdefer c.Close()\n}") + `}]}`,
	`{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"edit","input":{"path":"internal/store/redis_test.go",` +
		`"old":` + js("\tc := openClient(\"127.0.0.1:6379\")") + `,"new":` + js("\tc := openClient(redisAddr(t))") + `}}]}`,
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"ok"}]}`,
}

var requestEnds = []int{1, 3, 5, 7}

func request(t *testing.T, msgs []string) *wire.Request {
	t.Helper()
	r, err := wire.Parse(wire.Anthropic, []byte(`{"model":"m","messages":[`+strings.Join(msgs, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func requests(t *testing.T) []*wire.Request {
	var out []*wire.Request
	for _, n := range requestEnds {
		out = append(out, request(t, session[:n]))
	}
	return out
}

// withResult returns msgs with tool result id's content replaced by text.
func withResult(msgs []string, id, text string) []string {
	out := append([]string(nil), msgs...)
	for i, m := range out {
		if strings.Contains(m, `"tool_use_id":"`+id+`"`) {
			out[i] = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":` + js(text) + `}]}`
		}
	}
	return out
}

func texts(vs []Verdict) map[string]Outcome {
	out := map[string]Outcome{}
	for _, v := range vs {
		out[v.Text] = v.Outcome
	}
	return out
}

// TestUsesOfHandMadeSession: the uses of each response are exactly the salient tokens it
// wrote that the request showed only inside tool results, with the calls that showed them.
func TestUsesOfHandMadeSession(t *testing.T) {
	rs := requests(t)
	want := [][]string{
		nil, // the response to R0 (call a) uses nothing: "./internal/store/" is no salient path
		{"TestOpenRedis", "redis_test.go:31", "redis_test.go"},
		// The path of the edit is in call b's arguments (not only in a result); the old line,
		// its identifier and the address are in result b only.
		{"c := openClient(\"127.0.0.1:6379\")", "openClient", "127.0.0.1"},
	}
	for k := 0; k+1 < len(rs); k++ {
		x := NewIndex(nil)
		x.Update(rs[k])
		uses := x.Uses(Response(rs[k], rs[k+1]))
		var got []string
		for _, u := range uses {
			got = append(got, u.Text)
			src := map[int]string{1: "a", 2: "b"}[k]
			if !slices.Equal(u.Sources, []string{src}) {
				t.Errorf("R%d use %q: sources %v, want [%s]", k, u.Text, u.Sources, src)
			}
		}
		if !slices.Equal(distinct(got), distinct(append([]string(nil), want[k]...))) {
			t.Errorf("uses of R%d = %q, want %q", k, got, want[k])
		}
	}
}

// TestClassifyRenderings judges R1's uses against the renderings three strategies send.
func TestClassifyRenderings(t *testing.T) {
	rs := requests(t)
	original := rs[1]
	response := Response(rs[1], rs[2])
	summary := "- `t1` bash command=\"go test ./internal/store/\" → ERROR, 3 line(s)\n" +
		"  - error: redis_test.go:31: dial tcp: connection refused"
	recoverA := func(id string) bool { return id == "a" }
	for _, tc := range []struct {
		name        string
		rendered    []string
		recoverable func(string) bool
		want        map[string]Outcome
		source      string
	}{
		{"unchanged", session[:3], nil,
			map[string]Outcome{"TestOpenRedis": Kept, "redis_test.go:31": Kept, "redis_test.go": Kept}, ""},
		{"stub and summary", append(withResult(session[:3], "a", "[Summarized in pruner summary, ref `t1`. Use context_tree_query to retrieve full output.]"),
			`{"role":"assistant","content":[{"type":"text","text":`+js(summary)+`}]}`, `{"role":"user","content":"continue"}`), recoverA,
			map[string]Outcome{"TestOpenRedis": Recoverable, "redis_test.go:31": Kept, "redis_test.go": Kept}, "a"},
		{"masked", withResult(session[:3], "a", "[earlier tool output omitted]"), nil,
			map[string]Outcome{"TestOpenRedis": Lost, "redis_test.go:31": Lost, "redis_test.go": Lost}, "a"},
	} {
		vs := measure(original, request(t, tc.rendered), response, pruner.ObservationPolicy{}, tc.recoverable)
		if got := texts(vs); len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		} else {
			for k, o := range tc.want {
				if got[k] != o {
					t.Errorf("%s: %q is %s, want %s", tc.name, k, got[k], o)
				}
			}
		}
		for _, v := range vs {
			if (v.Outcome == Kept) != (v.Source == "") || (v.Outcome != Kept && v.Source != tc.source) {
				t.Errorf("%s: %q (%s) source %q, want %q", tc.name, v.Text, v.Outcome, v.Source, tc.source)
			}
		}
		var tally Tally
		tally.Add(vs)
		if tally.Uses != 3 || tally.Kept+tally.Recoverable+tally.Lost != 3 {
			t.Errorf("%s: tally %+v", tc.name, tally)
		}
	}
}

// TestIndexFollowsSession: an index moved from request to request (as the replay does,
// including a compaction that drops messages and a rewrite of an earlier result) answers as
// a fresh index of each request.
func TestIndexFollowsSession(t *testing.T) {
	seq := [][]string{
		session[:1], session[:3], session[:5],
		withResult(session[:5], "a", "[earlier tool output omitted]"),
		session[:7],
		{`{"role":"user","content":"summary of the work so far: openClient fixed"}`}, // compaction
		append([]string{`{"role":"user","content":"summary"}`}, session[1:3]...),
	}
	probe := []string{"TestOpenRedis", "redis_test.go:31", "openClient", "127.0.0.1", "c := openClient(\"127.0.0.1:6379\")", "internal/store/redis_test.go"}
	follow := NewIndex(nil)
	for i, msgs := range seq {
		r := request(t, msgs)
		follow.Update(r)
		fresh := NewIndex(nil)
		fresh.Update(r)
		for _, p := range probe {
			tk := TokenOf(p)
			if follow.Shows(tk) != fresh.Shows(tk) || follow.OnlyInToolResults(tk) != fresh.OnlyInToolResults(tk) {
				t.Errorf("step %d, %q: following %v/%v, fresh %v/%v", i, p, follow.Shows(tk), follow.OnlyInToolResults(tk), fresh.Shows(tk), fresh.OnlyInToolResults(tk))
			}
		}
	}
}

// TestRestrictedMemo: an index over a restricted memo (what each replayed strategy uses)
// answers for the kept tokens exactly as the full one.
func TestRestrictedMemo(t *testing.T) {
	rs := requests(t)
	full := NewMemo()
	x := NewIndex(full)
	for _, r := range rs {
		x.Update(r)
	}
	keep := map[Token]struct{}{TokenOf("openClient"): {}, TokenOf("TestOpenRedis"): {}}
	y := NewIndex(full.Restrict(keep).Overlay())
	masked := request(t, withResult(session[:5], "b", "[earlier tool output omitted]")) // before the edit names openClient
	for _, r := range append(rs, masked) {
		x.Update(r)
		y.Update(r)
		for tk := range keep {
			if x.Shows(tk) != y.Shows(tk) {
				t.Fatalf("restricted index differs on %v", tk)
			}
		}
	}
	if y.Shows(TokenOf("openClient")) {
		t.Fatal("masked result b still shows openClient")
	}
	if y.Shows(TokenOf("redis_test.go:31")) {
		t.Fatal("a restricted index shows a token it does not keep")
	}
}

// TestResponse: the response is the assistant messages the next request appends; a next
// request that rewrites the previous one's last message (a compaction) yields none.
func TestResponse(t *testing.T) {
	rs := requests(t)
	if got := Response(rs[0], rs[1]); len(got) != 1 || got[0].Blocks[0].ID != "a" {
		t.Fatalf("response to R0: %v", got)
	}
	compacted := request(t, []string{`{"role":"user","content":"summary"}`, session[1], session[2]})
	if got := Response(rs[1], compacted); got != nil {
		t.Fatalf("response across a compaction: %v", got)
	}
}

// measure judges the uses of response (the agent's reply to original) against rendered, what
// the provider received instead, with fresh indexes; obs and recoverable as for Observe, Classify.
func measure(original, rendered *wire.Request, response []*wire.Message, obs pruner.ObservationPolicy, recoverable func(id string) bool) []Verdict {
	memo := NewMemo()
	orig := NewIndex(memo)
	orig.Observe(obs)
	orig.Update(original)
	uses := orig.Uses(response)
	seen := NewIndex(memo)
	seen.Observe(obs)
	seen.Update(rendered)
	return seen.Classify(uses, recoverable)
}
