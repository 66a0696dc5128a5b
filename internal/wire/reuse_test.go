package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// sameAsParse checks that ParseReusing(f, body, prev) is indistinguishable from
// Parse(f, body): the same error, or the same typed values and serialization. It returns
// the reusing result (nil on error).
// dropCaches forgets the derived values cached on msgs and their blocks (identity sums,
// modifier memos).
func dropCaches(msgs []*Message) {
	var blocks func([]*Block)
	blocks = func(bs []*Block) {
		for _, b := range bs {
			b.idSum, b.idSumSet, b.resultMemo = 0, 0, nil
			blocks(b.Content)
		}
	}
	for _, m := range msgs {
		m.blocksMemo, m.hashMemo = nil, nil
		blocks(m.Blocks)
	}
}

func sameAsParse(t *testing.T, f Format, body []byte, prev *Request) *Request {
	t.Helper()
	want, werr := Parse(f, body)
	got, gerr := ParseReusing(f, body, prev)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("Parse error %v, ParseReusing error %v", werr, gerr)
	}
	if werr != nil {
		if got != nil {
			t.Fatal("request returned together with an error")
		}
		if werr.Error() != gerr.Error() || reflect.TypeOf(werr) != reflect.TypeOf(gerr) {
			t.Fatalf("Parse error %T %v, ParseReusing error %T %v", werr, werr, gerr, gerr)
		}
		return nil
	}
	if got.Model != want.Model || got.Stream != want.Stream || got.Format != want.Format {
		t.Fatalf("scalars differ: %q %v / %q %v", got.Model, got.Stream, want.Model, want.Stream)
	}
	// DeepEqual follows the values' unexported raw slices and member indexes, which must
	// match byte for byte wherever they live. Derived caches are not part of a value: the
	// shared messages carry those of the edits below on the previous step.
	dropCaches(got.Messages)
	if !reflect.DeepEqual(got.Messages, want.Messages) {
		t.Fatal("messages differ from a fresh parse")
	}
	if !reflect.DeepEqual(got.System, want.System) || !reflect.DeepEqual(got.Tools, want.Tools) {
		t.Fatal("system or tools differ from a fresh parse")
	}
	if got.Modified() {
		t.Fatal("a reusing parse must be unmodified")
	}
	if out := got.Bytes(); len(body) > 0 && (!bytes.Equal(out, body) || &out[0] != &body[0]) {
		t.Fatal("unmodified request must serialize to its input slice")
	}
	// The same edit on both serializes to the same bytes.
	edit := func(r *Request) []byte {
		msgs := append([]*Message(nil), r.Messages...)
		for i, m := range msgs {
			blocks := append([]*Block(nil), m.Blocks...)
			for j, b := range blocks {
				if b.Kind == KindToolResult {
					blocks[j] = b.WithResultText("pruned " + b.ID)
				}
			}
			msgs[i] = m.WithBlocks(blocks)
		}
		return r.WithMessages(msgs).Bytes()
	}
	if !bytes.Equal(edit(got), edit(want)) {
		t.Fatal("an edit serializes differently after a reusing parse")
	}
	if got.ReusedMessages() > len(got.Messages) {
		t.Fatalf("reused %d of %d messages", got.ReusedMessages(), len(got.Messages))
	}
	if prev != nil {
		for i := 0; i < got.ReusedMessages(); i++ {
			if got.Messages[i] != prev.origMessages[i] {
				t.Fatalf("message %d counted as reused but not shared", i)
			}
		}
	}
	return got
}

// TestParseReusingSharesIdenticalPrefix replays a Claude Code corpus conversation the
// way an agent sends it (each request = the previous one plus new messages, with the
// cache_control marker moved to the newest message) and checks every reusing parse
// against a fresh one, and that exactly the unchanged prefix is shared.
func TestParseReusingSharesIdenticalPrefix(t *testing.T) {
	body, name := largestClaudeCodeRequest(t)
	full, err := Parse(Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	raws := make([]json.RawMessage, len(full.Messages))
	for i, m := range full.Messages {
		raws[i] = m.Raw()
	}
	marker := []byte(`"cache_control":{"type":"ephemeral"},`)
	request := func(n int) []byte {
		msgs := append([]json.RawMessage(nil), raws[:n]...)
		// Mark the last message as Claude Code does: its bytes change between requests.
		last := msgs[n-1]
		msgs[n-1] = append(append(append([]byte(nil), last[:1]...), marker...), last[1:]...)
		return wrapMessages(msgs)
	}
	var prev *Request
	var bodies [][]byte
	steps := 0
	for n := 2; n <= len(raws); n += 2 {
		b := request(n)
		bodies = append(bodies, b)
		r := sameAsParse(t, Anthropic, b, prev)
		if prev != nil {
			if want := n - 3; r.ReusedMessages() != want {
				t.Fatalf("%s, %d messages: reused %d, want %d (all but the previously marked one and the new ones)", name, n, r.ReusedMessages(), want)
			}
			if r.System[0] != prev.System[0] {
				t.Fatal("identical system blocks not shared")
			}
		}
		prev = r
		steps++
	}
	if steps < 10 {
		t.Fatalf("only %d requests replayed", steps)
	}
	// Memory: the last request's values point into no body but the first (whose messages
	// it still shares): a session does not pin every body it sent.
	for j, b := range bodies[1:] {
		if k := pinsBody(prev, b); k != "" {
			t.Fatalf("the last request still points into body %d (%s)", j+1, k)
		}
	}
	// The same request again: everything is shared.
	again := sameAsParse(t, Anthropic, append([]byte(nil), prev.Raw()...), prev)
	if again.ReusedMessages() != len(prev.Messages) {
		t.Fatalf("identical request reused %d of %d messages", again.ReusedMessages(), len(prev.Messages))
	}
}

// TestParseReusingOpenAI does the same for a Chat Completions conversation (the
// mini-SWE-agent corpus file), including tools shared by bytes.
func TestParseReusingOpenAI(t *testing.T) {
	data, err := os.ReadFile(corpus.File(t, "msa_psf__requests-1142.traj.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	tools := `"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]`
	var prev *Request
	for n := 1; n <= len(doc.Messages); n++ {
		var b bytes.Buffer
		b.WriteString(`{"model":"gpt-4o",` + tools + `,"messages":[`)
		for i, m := range doc.Messages[:n] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(m)
		}
		b.WriteString(`]}`)
		r := sameAsParse(t, OpenAI, b.Bytes(), prev)
		if prev != nil {
			if r.ReusedMessages() != n-1 {
				t.Fatalf("%d messages: reused %d, want %d", n, r.ReusedMessages(), n-1)
			}
			if r.Tools[0] != prev.Tools[0] {
				t.Fatal("identical tool not shared")
			}
		}
		prev = r
	}
}

// TestParseReusingMalformedSuffix: errors in the new part are reported exactly as Parse
// reports them, and a previous request of another format is ignored.
func TestParseReusingMalformedSuffix(t *testing.T) {
	prev, err := Parse(Anthropic, []byte(anthropicSample))
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(strings.TrimSpace(anthropicSample), "}")
	i := strings.LastIndex(base, "]")
	head := base[:i]
	for _, tail := range []string{
		`,{"role":"user","content":"bad \q escape"}]}`,
		`,{"role":"user","content":"ctl ` + "\x01" + `"}]}`,
		`,{"role":7,"content":"x"}]}`,
		`,{"role":"user","content":[{"type":"text","text":"x"}]`,
		`,{"role":"user","content":[1]}]}`,
		`,{"content":"no role"}]} trailing`,
		`]}`,
		`,{"role":"user","content":"fine"}]}`,
	} {
		body := []byte(head + tail)
		sameAsParse(t, Anthropic, body, prev)
		sameAsParse(t, OpenAI, body, prev) // other format: prev ignored
	}
	if r, err := ParseReusing(OpenAI, []byte(openAISample), prev); err != nil || r.ReusedMessages() != 0 {
		t.Fatalf("format mismatch: %v, reused %d", err, r.ReusedMessages())
	}
	if _, err := ParseReusing(Format(9), []byte(`{}`), prev); err == nil || errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown format: %v", err)
	}
}

// FuzzParseReusing: for any previous request and body, ParseReusing equals Parse.
func FuzzParseReusing(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(anthropicSample), []byte(s), false)
	}
	f.Add([]byte(anthropicSample), []byte(strings.Replace(anthropicSample, `"max_tokens"`, `"max_tokens_x"`, 1)), false)
	f.Add([]byte(openAISample), []byte(strings.Replace(openAISample, `"be brief"`, `"be briefer"`, 1)), true)
	f.Add([]byte(openAISample), []byte(openAISample[:len(openAISample)/2]), true)
	f.Fuzz(func(t *testing.T, prevBody, body []byte, openAI bool) {
		fm := Anthropic
		if openAI {
			fm = OpenAI
		}
		prev, err := Parse(fm, prevBody)
		if err != nil {
			prev = nil
		}
		sameAsParse(t, fm, body, prev)
	})
}

// pinsBody names a value of r whose bytes lie inside body ("" when none does).
func pinsBody(r *Request, body []byte) string {
	in := func(b []byte) bool { return offsetIn(body, b) >= 0 }
	str := func(s string) bool { return len(s) > 0 && in(unsafe.Slice(unsafe.StringData(s), len(s))) }
	var blk func(b *Block) string
	blk = func(b *Block) string {
		switch {
		case in(b.Raw()):
			return "block raw"
		case str(b.Text) || str(b.ID) || str(b.Name) || str(b.Type) || str(b.Signature):
			return "block string " + b.ID
		case in(b.Input) || in(b.CacheControl):
			return "block input"
		case b.contentArr != nil && in(b.contentArr.raw):
			return "block content array"
		}
		for _, c := range b.Content {
			if k := blk(c); k != "" {
				return "content " + k
			}
		}
		return ""
	}
	for i, m := range r.Messages {
		if in(m.Raw()) || str(string(m.Role)) || (m.contentArr != nil && in(m.contentArr.raw)) {
			return fmt.Sprintf("message %d", i)
		}
		for _, b := range m.Blocks {
			if k := blk(b); k != "" {
				return fmt.Sprintf("message %d %s", i, k)
			}
		}
	}
	for _, b := range r.System {
		if k := blk(b); k != "" {
			return "system " + k
		}
	}
	for _, t := range r.Tools {
		if in(t.Raw()) || str(t.Name) {
			return "tool " + t.Name
		}
	}
	return ""
}

// TestParseReusingConcurrent parses several next requests against one shared previous
// request at once while it is read (run with -race: a reusing parse never writes to what it
// shares).
func TestParseReusingConcurrent(t *testing.T) {
	prev, err := Parse(Anthropic, []byte(anthropicSample))
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(strings.TrimSpace(anthropicSample), "}")
	head := base[:strings.LastIndex(base, "]")]
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func(g int) {
			var err error
			for i := 0; i < 50 && err == nil; i++ {
				body := []byte(head + fmt.Sprintf(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"run %d.%d"}]}]}`, g, i))
				var r *Request
				if r, err = ParseReusing(Anthropic, body, prev); err == nil && r.ReusedMessages() != len(prev.Messages) {
					err = fmt.Errorf("reused %d of %d", r.ReusedMessages(), len(prev.Messages))
				}
				for _, m := range prev.Messages {
					for _, b := range m.Blocks {
						_ = b.Name + b.Text + b.ResultText()
					}
				}
			}
			done <- err
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
