package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
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
			b.idSum, b.resultMemo, b.textDec = 0, nil, nil
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
	if got.modified() {
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

// largestRequestMessages returns the messages of the corpus's largest Claude Code request, each
// as sent, and the corpus file's name.
func largestRequestMessages(t *testing.T) ([]json.RawMessage, string) {
	t.Helper()
	body, name := largestClaudeCodeRequest(t)
	full, err := Parse(Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	raws := make([]json.RawMessage, len(full.Messages))
	for i, m := range full.Messages {
		raws[i] = m.Raw()
	}
	return raws, name
}

// TestParseReusingSharesIdenticalPrefix replays a Claude Code corpus conversation the
// way an agent sends it (each request = the previous one plus new messages, with the
// cache_control marker moved to the newest message) and checks every reusing parse
// against a fresh one, and that exactly the unchanged prefix is shared.
func TestParseReusingSharesIdenticalPrefix(t *testing.T) {
	raws, name := largestRequestMessages(t)
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

// TestParseReusingReleasesBodies checks with the garbage collector what pinsBody checks by
// pointer: a session that keeps only its last parsed request keeps no body alive but the
// first (whose messages every later request shares) and its own. pinsBody follows the
// request's pointers; the collector also keeps whatever shares an allocation with what they
// reach, so it finds what pinsBody cannot (the request's top-level object kept alive in a
// slab chunk with the messages the next request shares).
func TestParseReusingReleasesBodies(t *testing.T) {
	raws, _ := largestRequestMessages(t)
	n := min(len(raws)/2, 40)
	t.Run("anthropic", func(t *testing.T) {
		checkBodiesReleased(t, Anthropic, n, claudeCodeSession(raws))
	})
	t.Run("dropped values", func(t *testing.T) {
		// Values the parse reads and then drops: a web search result's content list, the
		// content of a block kind it does not know, a member repeated in one object (the
		// last one counts).
		checkBodiesReleased(t, Anthropic, n, func(i int) []byte {
			var b bytes.Buffer
			b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[`)
			for j := 0; j <= i; j++ {
				if j > 0 {
					b.WriteByte(',')
				}
				text, _ := json.Marshal(string(raws[j]))
				fmt.Fprintf(&b, `{"role":"user","content":"dropped","content":[{"type":"text","text":%s}]},`, text)
				fmt.Fprintf(&b, `{"role":"assistant","content":[{"type":"server_tool_use","id":"s%d","name":"web_search","input":{"query":"q"}},`, j)
				fmt.Fprintf(&b, `{"type":"web_search_tool_result","tool_use_id":"s%d","content":[{"type":"web_search_result","url":"https://example.com/%d","title":"t"}]},`, j, j)
				fmt.Fprintf(&b, `{"type":"future_block","content":[{"type":"text","text":"n%d"}]},{"type":"text","text":"done %d"}]}`, j, j)
			}
			b.WriteString(`]}`)
			return b.Bytes()
		})
	})
	t.Run("openai", func(t *testing.T) {
		checkBodiesReleased(t, OpenAI, n, openAISession(raws))
	})
}

// claudeCodeSession returns request i of a session built from the corpus messages raws: two
// more messages each time, the newest one marked as Claude Code marks it.
func claudeCodeSession(raws []json.RawMessage) func(int) []byte {
	return func(i int) []byte {
		msgs := append([]json.RawMessage(nil), raws[:2*i+2]...)
		last := msgs[len(msgs)-1]
		msgs[len(msgs)-1] = append(append(append([]byte(nil), last[:1]...), `"cache_control":{"type":"ephemeral"},`...), last[1:]...)
		return wrapMessages(msgs)
	}
}

// openAISession returns request i of a Chat Completions session: tools that change every few
// requests, an escaped system prompt, and the text of the corpus messages raws as user turns
// (escaped strings), each answered by a tool call and its result.
func openAISession(raws []json.RawMessage) func(int) []byte {
	return func(i int) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"bash%d","parameters":{"type":"object"}}}],"messages":[{"role":"system","content":"be \"brief\""}`, i/4)
		for j := 0; j <= i; j++ {
			text, _ := json.Marshal(string(raws[j]))
			fmt.Fprintf(&b, `,{"role":"user","content":%s},{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c%d","content":"ok"}`, text, j, j)
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
}

// TestParseReusingCompactsDecodedStrings: strings with escapes, decoded at parse (ids,
// names) or when read (texts), must not share memory sized by the rest of the body: with
// large members after "messages" (SDKs send "system" and "tools" after them), each request's
// new messages would keep such memory — the size of those members — alive for the whole
// session. Measured by what the last request alone keeps alive on the heap.
func TestParseReusingCompactsDecodedStrings(t *testing.T) {
	tools := `"tools":[` + strings.Repeat(`{"name":"tool","description":"`+strings.Repeat("d", 1000)+`","input_schema":{"type":"object"}},`, 300) +
		`{"name":"last","input_schema":{"type":"object"}}]`
	anthropic := func(i int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[`)
		for j := 0; j <= i; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"role":"user","content":"line %d\nnext \"quoted\" line"},`, j)
			fmt.Fprintf(&b, `{"role":"assistant","content":[{"type":"text","text":"ok\n"},{"type":"tool_use","id":"tu\u0030%d","name":"re\u0061d","input":{"path":"a\nb"}}]},`, j)
			fmt.Fprintf(&b, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu0%d","content":[{"type":"text","text":"r\t%d"}]}]}`, j, j)
		}
		// The system prompt changes every few requests, so the system is parsed anew too.
		fmt.Fprintf(&b, `],%s,"system":[{"type":"text","text":"be \"brief\" %d\n"}],"model":"m\u0031"}`, tools, i/3)
		return b.Bytes()
	}
	openai := func(i int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"model":"gpt-4o","messages":[{"role":"system","content":"be \"brief\""}`)
		for j := 0; j <= i; j++ {
			fmt.Fprintf(&b, `,{"role":"user","content":"q\n%d"},{"role":"assistant","content":null,"tool_calls":[{"id":"c\u0030%d","type":"function","function":{"name":"b\u0061sh","arguments":"{\"cmd\":\"ls\"}"}}]},{"role":"tool","tool_call_id":"c0%d","content":"out\n%d"}`, j, j, j, j)
		}
		b.WriteString(`],` + strings.Replace(tools, `"name":"tool","description"`, `"type":"function","function":{"name":"tool"},"description"`, -1) + `}`)
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		f    Format
		body func(int) []byte
	}{{"anthropic", Anthropic, anthropic}, {"openai", OpenAI, openai}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 40
			var prev *Request
			last := parseSession(t, tc.f, n, tc.body, func(i int, b []byte) {
				// Every reusing parse equals a fresh one: detaching keeps every value.
				prev = sameAsParse(t, tc.f, b, prev)
			})
			prev = nil
			if last.ReusedMessages() == 0 {
				t.Fatal("nothing reused")
			}
			lastLen := len(last.Raw())
			kept := heapKept(&last)
			t.Logf("the last request keeps %d KiB alive", kept>>10)
			// At least its own body. At most: its body (~330 KB), the first (whose messages
			// it shares), the parsed form and the decoded strings, about 1.5 MB. Decoded
			// strings each keeping memory the size of the tools cost n × ~330 KB: 14 MB.
			if kept < int64(lastLen) {
				t.Fatalf("the last request keeps %d bytes alive, less than its own %d-byte body: nothing measured", kept, lastLen)
			}
			if limit := int64(4 << 20); kept > limit {
				t.Fatalf("the last request keeps %d KiB alive, want at most %d KiB", kept>>10, limit>>10)
			}
		})
	}
}

// checkBodiesReleased parses the bodies body(0) … body(n-1) as one session's requests, each
// reusing the previous parse, keeps only the last request and waits for the collector to
// free every body but the first and the last.
func checkBodiesReleased(t *testing.T, f Format, n int, body func(int) []byte) {
	t.Helper()
	var mu sync.Mutex
	alive := map[int]bool{}
	last := parseSession(t, f, n, body, func(i int, b []byte) {
		mu.Lock()
		alive[i] = true
		mu.Unlock()
		runtime.SetFinalizer(unsafe.SliceData(b), func(*byte) {
			mu.Lock()
			delete(alive, i)
			mu.Unlock()
		})
	})
	var pinned []int
	for deadline := time.Now().Add(5 * time.Second); ; {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		pinned = pinned[:0]
		for i := range alive {
			if i != 0 && i != n-1 {
				pinned = append(pinned, i)
			}
		}
		mu.Unlock()
		if len(pinned) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(pinned) > 0 {
		t.Fatalf("%d of %d earlier bodies are still alive with only the last request kept (e.g. request %d)", len(pinned), n-2, pinned[0])
	}
	mu.Lock()
	kept := alive[0] && alive[n-1]
	mu.Unlock()
	if !kept {
		t.Fatal("the first or the last body was freed: the last request shares the first's messages and holds its own body")
	}
	if last.ReusedMessages() == 0 {
		t.Fatal("the last request shared no message: the test parsed nothing reused")
	}
	runtime.KeepAlive(last)
}

// parseSession parses the session's requests in a frame of its own, so that nothing but
// the returned last request outlives it; made is told of each body before it is parsed.
//
//go:noinline
func parseSession(t *testing.T, f Format, n int, body func(int) []byte, made func(int, []byte)) *Request {
	var prev *Request
	for i := 0; i < n; i++ {
		b := body(i)
		made(i, b)
		r, err := ParseReusing(f, b, prev)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		prev = r
	}
	return prev
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

// FuzzParseReusingResponses: for any previous request and body, ParseReusing equals Parse in
// the Responses format.
func FuzzParseReusingResponses(f *testing.F) {
	for _, s := range responsesSeeds {
		f.Add([]byte(responsesSample), []byte(s))
		f.Add([]byte(s), []byte(responsesSample))
	}
	f.Add([]byte(responsesSample), []byte(strings.Replace(responsesSample, `"hi"`, `"hello"`, 1)))
	f.Add([]byte(responsesSample), []byte(strings.Replace(responsesSample, `{"type":"compaction","encrypted_content":"opaque"},`, ``, 1)))
	f.Fuzz(func(t *testing.T, prevBody, body []byte) {
		prev, err := Parse(Responses, prevBody)
		if err != nil {
			prev = nil
		}
		sameAsParse(t, Responses, body, prev)
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
		case str(b.Text()) || str(b.ID) || str(b.Name) || str(b.Type) || str(b.Signature):
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
		if in(m.Raw()) || str(string(m.Role)) || (m.contentArr != nil && in(m.contentArr.raw)) || (m.itemsArr != nil && in(m.itemsArr.raw)) {
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
						_ = b.Name + b.Text() + b.ResultText()
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
