package pruner

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// TestSummaryBlockMemo: a memoised summary block serializes exactly like a new one, in both
// formats; a repeat returns the same block; and the memo starts over past its byte bound.
func TestSummaryBlockMemo(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		for _, text := range []string{"Summary of t1: \"quoted\"\n\ttab é \u2028", "", strings.Repeat("x", 1000)} {
			got := summaryBlock(f, text)
			want := wire.NewTextBlock(f, text)
			if !bytes.Equal(got.Raw(), want.Raw()) || got.Text() != want.Text() || got.Kind != want.Kind {
				t.Fatalf("%v %q: memoised block %s, new block %s", f, text, got.Raw(), want.Raw())
			}
			if again := summaryBlock(f, text); again != got {
				t.Fatalf("%v %q: a repeat built a new block", f, text)
			}
		}
	}
	if summaryBlock(wire.Anthropic, "same") == summaryBlock(wire.OpenAI, "same") {
		t.Fatal("formats share a memo entry")
	}
	big := strings.Repeat("y", summaryMemoMaxBytes/4)
	for i := range 6 {
		summaryBlock(wire.Anthropic, big+strings.Repeat("z", i))
	}
	summaryMemo.mu.Lock()
	n := summaryMemo.bytes
	summaryMemo.mu.Unlock()
	if n > summaryMemoMaxBytes {
		t.Fatalf("memo holds %d bytes, bound %d", n, summaryMemoMaxBytes)
	}
}

// TestQueryTool: the shared query tool is the schema parsed, per format, built once.
func TestQueryTool(t *testing.T) {
	for _, f := range formats {
		q := QueryTool(f)
		if q == nil || q.Name != QueryToolName || !bytes.Equal(q.Raw(), QueryToolSchema(f)) {
			t.Fatalf("%v: QueryTool = %+v", f, q)
		}
		if QueryTool(f) != q {
			t.Fatalf("%v: QueryTool built the tool again", f)
		}
	}
	if QueryTool(0) != nil {
		t.Fatal("QueryTool of an unknown format is not nil")
	}
	// Responses: a flat function tool, not strict (its schema has no additionalProperties).
	var def struct {
		Type, Name string
		Strict     *bool
		Parameters map[string]any
	}
	if err := json.Unmarshal(QueryToolSchema(wire.Responses), &def); err != nil || def.Type != "function" || def.Name != QueryToolName ||
		def.Strict == nil || *def.Strict || def.Parameters["type"] != "object" {
		t.Fatalf("Responses query tool: %s", QueryToolSchema(wire.Responses))
	}
	req := mustParse(t, wire.Responses, []byte(`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`))
	out := mustParse(t, wire.Responses, req.WithTools(append(req.Tools, QueryTool(wire.Responses))).Bytes())
	if len(out.Tools) != 2 || out.Tools[1].Name != QueryToolName {
		t.Fatalf("%s", out.Raw())
	}
}

// TestShownSummaryRemembered: a summary is shown as the same block (Anthropic) or message
// (OpenAI) on every render, equal to a new one; a copy with another text, or another
// format, gets its own.
func TestShownSummaryRemembered(t *testing.T) {
	s := &Summary{ID: "s1", Text: "Summary of `t1`: read a.go \"quoted\""}
	b := s.shownIn(wire.Anthropic).b
	if want := wire.NewTextBlock(wire.Anthropic, s.Text); !bytes.Equal(b.Raw(), want.Raw()) {
		t.Fatalf("block %s, want %s", b.Raw(), want.Raw())
	}
	summaryMemo.mu.Lock()
	clear(summaryMemo.m) // the repeat must come from the summary, not the process-wide memo
	summaryMemo.mu.Unlock()
	if s.shownIn(wire.Anthropic).b != b {
		t.Fatal("a repeat made a new block")
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.shownIn(wire.Anthropic).b }); n != 0 {
		t.Fatalf("a repeat allocated %v times", n)
	}
	m := s.shownIn(wire.OpenAI).m
	if want := wire.NewTextMessage(wire.OpenAI, wire.RoleUser, s.Text); !bytes.Equal(m.Bytes(), want.Bytes()) || m.Role != wire.RoleUser {
		t.Fatalf("message %s, want %s", m.Bytes(), want.Bytes())
	}
	if s.shownIn(wire.OpenAI).m != m {
		t.Fatal("a repeat made a new message")
	}
	c := *s
	c.Text = "Summary of `t2`"
	if got := c.shownIn(wire.Anthropic).b; got.Text() != c.Text {
		t.Fatalf("a copy with another text shows %q", got.Text())
	}
	if got := s.shownIn(wire.Anthropic).b; got.Text() != s.Text {
		t.Fatalf("the original shows %q after its copy", got.Text())
	}
}

// TestStubEntries: what stubOf remembers per occurrence key is what the state's lookups give
// (records, dedup aliases, spilled records, unknown keys and aliases of nothing), repeats
// come from the memo, and a copy of the state neither reads nor writes its original's memo
// (before its rebuild it memoises nothing; after it, it has its own).
func TestStubEntries(t *testing.T) {
	st := NewState()
	st.Records = map[string]*Record{
		"a#1": {Key: "a#1", ID: "a", Tool: "read", Ref: "t1", Summary: "s1"},
		"b#2": {Key: "b#2", ID: "b", Tool: "bash", Spilled: true, Bytes: 5000, Preview: "head"},
		"c#3": {Key: "c#3", ID: "c", Tool: "grep", Ref: "t3", Backfilled: true},
	}
	st.Aliases = map[string]string{"d#4": "a#1", "e#5": "gone#9"}
	st.Summaries = []*Summary{{ID: "s1", Keys: []string{"a#1"}, Refs: []string{"t1"}, Text: "sum"}}
	st.rebuild()
	want := func(s *State, key string) (stubEntry, bool) { // the lookups stubOf stands for
		if !s.IsSummarized(key) {
			return stubEntry{}, false
		}
		rk, _ := s.Resolve(key)
		rec := s.Records[rk]
		if rec == nil {
			return stubEntry{}, false
		}
		si, ok := s.sumOf[rk]
		if !ok {
			si = -1
		}
		ref := s.RefOf(key)
		if ref == "" {
			ref = key
		}
		text := StubText(ref)
		if rec.Spilled {
			text = SpillStubText(rec.Tool, ref, rec.Bytes, rec.Preview)
		}
		return stubEntry{rk: rk, rec: rec, si: si, ref: ref, text: text}, true
	}
	keys := []string{"a#1", "b#2", "c#3", "d#4", "e#5", "t1", "a", "unknown#0"}
	for round := 0; round < 2; round++ {
		for _, k := range keys {
			got, ok := st.stubOf(k)
			w, wok := want(st, k)
			if ok != wok || ok && got != w {
				t.Fatalf("round %d %s: %+v %v, want %+v %v", round, k, got, ok, w, wok)
			}
		}
	}
	if e, _ := st.stubOf("d#4"); e.rk != "a#1" || e.si != 0 || e.text != StubText("t1") {
		t.Fatalf("alias entry %+v", e)
	}
	if n := testing.AllocsPerRun(100, func() { st.stubOf("a#1") }); n != 0 {
		t.Fatalf("a repeat allocated %v times", n)
	}
	n := st.clone()
	n.Records["c#3"] = &Record{Key: "c#3", ID: "c", Tool: "grep", Spilled: true, Bytes: 10}
	if e, ok := n.stubOf("c#3"); !ok || e.text != SpillStubText("grep", "t3", 10, "") { // before its rebuild
		t.Fatalf("a copy before its rebuild: %+v %v", e, ok)
	}
	if e, _ := st.stubOf("c#3"); e.text != StubText("t3") {
		t.Fatalf("the original after its copy changed: %+v", e)
	}
	n.Aliases["f#6"] = "c#3"
	n.rebuild()
	if e, ok := n.stubOf("f#6"); !ok || e.rk != "c#3" || e.text != SpillStubText("grep", "f#6", 10, "") {
		t.Fatalf("the rebuilt copy: %+v %v", e, ok)
	}
	if _, ok := st.stubOf("f#6"); ok {
		t.Fatal("the original sees its copy's alias")
	}
	st.Records["c#3"] = &Record{Key: "c#3", ID: "c", Tool: "grep", Ref: "t9"} // memoised above
	st.rebuild()
	if e, ok := st.stubOf("c#3"); !ok || e.text != StubText("t9") {
		t.Fatalf("a rebuild kept the memo's entry: %+v %v", e, ok)
	}
	bare := &State{Records: st.Records, Aliases: st.Aliases} // never rebuilt: no memo
	if e, ok := bare.stubOf("b#2"); !ok || e.text != SpillStubText("bash", "b#2", 5000, "head") {
		t.Fatalf("an unbuilt state: %+v %v", e, ok)
	}
}
