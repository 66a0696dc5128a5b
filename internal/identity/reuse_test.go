package identity

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// referenceKey is the occurrence key's definition written out plainly (fresh copies, no
// memo), to check the memoised, copy-free occurrenceKey against.
func referenceKey(id, name string, input []byte, result string) string {
	var b bytes.Buffer
	b.WriteString("condense/occurrence/v1")
	for _, f := range [][]byte{[]byte(name), canonicalJSON(input), []byte(result)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		b.Write(n[:])
		b.Write(f)
	}
	sum := sha256.Sum256(b.Bytes())
	return id + "#" + hex.EncodeToString(sum[:4])
}

// TestOccurrenceKeyMemoMatchesDefinition: memo hits, misses, fields whose concatenations
// coincide, invalid input JSON and a memo that overflowed all give the defined key.
func TestOccurrenceKeyMemoMatchesDefinition(t *testing.T) {
	type occ struct {
		id, name, input, result string
	}
	cases := []occ{
		{"t1", "bash", `{"cmd":"ls"}`, "a\nb"},
		{"t1", "bash", `{ "cmd" : "ls" }`, "a\nb"}, // same canonical input
		{"t2", "bash", `{"cmd":"ls"}`, "a\nb"},     // another id, same fields
		{"t1", "bas", `{"cmd":"ls"}`, "ha\nb"},     // name/result boundary shifted
		{"t1", "bash", `{"cmd":"ls"}`, "a\nb "},
		{"t1", "bash", `{"cmd":`, "partial input"}, // not JSON: trimmed raw bytes
		{"t1", "", ``, ""},
		{"t1", "read", `{"path":"é\u00e9"}`, strings.Repeat("x", 100000)},
	}
	for round := 0; round < 3; round++ { // the first round fills the memo, the rest hit it
		for _, c := range cases {
			got := occurrenceKey(c.id, c.name, []byte(c.input), c.result)
			if want := referenceKey(c.id, c.name, []byte(c.input), c.result); got != want {
				t.Fatalf("round %d %+v: %s, want %s", round, c, got, want)
			}
		}
	}
	// Overflow the memo: it starts over and keeps answering correctly.
	for i := 0; i < keyMemoMax+10; i++ {
		r := fmt.Sprint("result ", i)
		if i%9973 == 0 || i >= keyMemoMax {
			if got, want := occurrenceKey("x", "n", []byte(`1`), r), referenceKey("x", "n", []byte(`1`), r); got != want {
				t.Fatalf("entry %d: %s, want %s", i, got, want)
			}
			continue
		}
		occurrenceKey("x", "n", []byte(`1`), r)
	}
	keyMemo.mu.Lock()
	n := len(keyMemo.m)
	keyMemo.mu.Unlock()
	if n > keyMemoMax {
		t.Fatalf("memo holds %d entries, bound %d", n, keyMemoMax)
	}
}

// TestOccurrenceKeyOfMatchesDefinition: the block form gives the defined key for string,
// multi-part, non-text and empty results and non-canonical inputs, cold and from the memo,
// and the same key as occurrenceKey (both forms share the memo).
func TestOccurrenceKeyOfMatchesDefinition(t *testing.T) {
	body := `{"model":"m","messages":[
	  {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"bash","input":{ "cmd" : "ls" }},
	    {"type":"tool_use","id":"b","name":"bash","input":{}},{"type":"tool_use","id":"c","name":"read","input":{"p":"\u00e9"}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"one\ntwo"},
	    {"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"x"},{"type":"image","source":{}},{"type":"text","text":"y"}]},
	    {"type":"tool_result","tool_use_id":"c","content":[]}]}]}`
	r, err := wire.Parse(wire.Anthropic, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	calls, results := r.Messages[0].Blocks, r.Messages[1].Blocks
	for round := 0; round < 2; round++ {
		for i, res := range results {
			call := calls[i]
			want := referenceKey(res.ID, call.Name, call.Input, res.ResultText())
			if got := OccurrenceKeyOf(call, res); got != want {
				t.Fatalf("round %d %s: OccurrenceKeyOf %s, want %s", round, res.ID, got, want)
			}
			if got := occurrenceKey(res.ID, call.Name, call.Input, res.ResultText()); got != want {
				t.Fatalf("round %d %s: occurrenceKey %s, want %s", round, res.ID, got, want)
			}
		}
	}
	// The key remembered on a result (wire.Block.PairMemo) is its call's only: paired with
	// another call it is computed anew, and then the original pair still gets its own.
	for i, res := range results {
		for _, call := range []*wire.Block{calls[(i+1)%len(calls)], calls[i]} {
			if got, want := OccurrenceKeyOf(call, res), referenceKey(res.ID, call.Name, call.Input, res.ResultText()); got != want {
				t.Fatalf("%s with call %s: OccurrenceKeyOf %s, want %s", res.ID, call.ID, got, want)
			}
		}
	}
}

// TestOccurrencesCorpusMatchDefinition checks every occurrence key of a mini-SWE-agent
// corpus conversation (cold memo, then warm) against the plain definition.
func TestOccurrencesCorpusMatchDefinition(t *testing.T) {
	// SWE-agent's history is Chat Completions messages with native tool calls; a tool message
	// names its call in tool_call_ids.
	data, err := os.ReadFile(corpus.File(t, "sweagent_marshmallow-code__marshmallow-1867.traj"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		History []map[string]any `json:"history"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range doc.History {
		if ids, ok := m["tool_call_ids"].([]any); ok && len(ids) == 1 {
			m["tool_call_id"] = ids[0]
		}
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": doc.History})
	r, err := wire.Parse(wire.OpenAI, body)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for round := 0; round < 2; round++ {
		for _, o := range occurrences(r.Messages) {
			call := r.Messages[o.CallMsg].Blocks[o.CallBlock]
			res := r.Messages[o.ResultMsg].Blocks[o.ResultBlock]
			if want := referenceKey(o.ID, call.Name, call.Input, res.ResultText()); o.Key != want {
				t.Fatalf("%s: %s, want %s", o.ID, o.Key, want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no tool call and result pairs in the corpus file")
	}
	t.Logf("%d keys checked", checked)
}

// TestMessageHashMemo: memoised hashes equal fresh ones, also for the same bytes parsed in
// the other format (different blocks, so a different hash).
func TestMessageHashMemo(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"tool","tool_call_id":"c1","content":"out"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"tool","tool_call_id":"c1","content":"out"}]}`)
	var hashes []string
	for _, f := range []wire.Format{wire.OpenAI, wire.Anthropic} {
		r, err := wire.Parse(f, body)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 2; round++ {
			for i, m := range r.Messages {
				if got, want := MessageHash(m), messageHash(m); got != want {
					t.Fatalf("%v message %d round %d: %s, want %s", f, i, round, got, want)
				}
			}
		}
		hashes = append(hashes, MessageHash(r.Messages[0]))
	}
	if hashes[0] == hashes[1] {
		t.Fatal("a tool message and an Anthropic message with the same bytes must hash differently")
	}
}

// TestMessageHashRememberedOnMessage: a message is hashed once — a repeat reads the value
// remembered on it (no allocation, no second pass over its bytes) — and a message the parse
// reuse shares between requests keeps it, while a message with other bytes gets its own.
func TestMessageHashRememberedOnMessage(t *testing.T) {
	body1 := []byte(`{"model":"m","messages":[{"role":"user","content":"read a.go"},{"role":"assistant","content":[{"type":"text","text":"ok"}]},{"role":"user","content":"go on"}]}`)
	body2 := []byte(`{"model":"m","messages":[{"role":"user","content":"read a.go"},{"role":"assistant","content":[{"type":"text","text":"ok"}]},{"role":"user","content":"stop"}]}`)
	r1, err := wire.Parse(wire.Anthropic, body1)
	if err != nil {
		t.Fatal(err)
	}
	m := r1.Messages[0]
	if _, ok := m.HashMemo(); ok {
		t.Fatal("a new parse carries a remembered hash")
	}
	h := MessageHash(m)
	if got, ok := m.HashMemo(); !ok || got != h || h != messageHash(m) {
		t.Fatalf("remembered %q (%v), hash %q, fresh %q", got, ok, h, messageHash(m))
	}
	if n := testing.AllocsPerRun(100, func() { MessageHash(m) }); n != 0 {
		t.Fatalf("a repeat allocated %v times", n)
	}
	r2, err := wire.ParseReusing(wire.Anthropic, body2, r1)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Messages[0] != m {
		t.Fatal("the parse reuse did not share the unchanged first message")
	}
	if got, ok := r2.Messages[0].HashMemo(); !ok || got != h {
		t.Fatal("the shared message lost its hash")
	}
	last := r2.Messages[2]
	if _, ok := last.HashMemo(); ok {
		t.Fatal("a changed message came with a remembered hash")
	}
	if MessageHash(last) != messageHash(last) || MessageHash(last) == MessageHash(r1.Messages[2]) {
		t.Fatal("a changed message hashes like its predecessor")
	}
}
