package summarize

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/testutil/corpus"
)

var update = flag.Bool("update", false, "rewrite golden files")

// serialize writes calls in the engine's per-batch serialization (reference §8.1).
func serialize(assistant string, calls []Call) string {
	var parts []string
	if assistant != "" {
		parts = append(parts, "Assistant said: "+assistant+"\n")
	}
	var cs []string
	for i, c := range calls {
		var pretty strings.Builder
		var v any
		if json.Unmarshal(c.Args, &v) == nil {
			b, _ := json.MarshalIndent(v, "", "  ")
			pretty.Write(b)
		} else {
			pretty.Write(c.Args)
		}
		st := "OK"
		if c.IsError {
			st = "ERROR"
		}
		text := c.Result
		if r := []rune(text); len(r) > 2000 {
			text = string(r[:2000]) + fmt.Sprintf(" ...[%d chars truncated]", len(r)-2000)
		}
		cs = append(cs, fmt.Sprintf("[[%d:%s]] Tool: %s(%s)\nResult (%s): %s", i+1, c.Tool, c.Tool, pretty.String(), st, text))
	}
	parts = append(parts, strings.Join(cs, "\n---\n"))
	return "You summarize tool calls.\n\n<tool-call-batch>\n" + strings.Join(parts, "\n") + "\n</tool-call-batch>"
}

var goldenCalls = []Call{
	{Tool: "read", Args: []byte(`{"path":"internal/store/redis.go","offset":10,"limit":200}`), Result: "package store\n\nimport (\n\t\"context\"\n)\n\nfunc Open() {}\n"},
	{Tool: "bash", Args: []byte(`{"command":"go test ./...\n","timeout":120}`), IsError: true, Result: "ok   pkg/a 0.1s\n--- FAIL: TestX (0.00s)\n    x_test.go:12: expected 3, got 4\nFAIL\nFAIL pkg/b 0.2s\nerror: exit status 1\nsummary line"},
	{Tool: "edit", Args: []byte(`{"path":"a.go","edits":[{"old":"a","new":"b"}]}`), Result: ""},
	{Tool: "grep", Args: []byte(`not json (`), Result: "a.go:1: match\n---\nb.go:2: match"},
}

func TestExtractiveGolden(t *testing.T) {
	prompt := serialize("Let me look at the store.\nThen run tests.", goldenCalls)
	res, err := Extractive{}.Summarize(context.Background(), &Request{ID: "b1", Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "extractive_batch.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(res.Text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text+"\n" != string(want) {
		t.Fatalf("extractive output differs from %s:\n%s", golden, res.Text)
	}
	if res.Model != ExtractiveModel || res.Usage != (Usage{}) {
		t.Fatalf("res %+v", res)
	}
	// Structured calls give the same text as the parsed prompt (minus the assistant line).
	res2, err := Extractive{}.Summarize(context.Background(), &Request{ID: "b1", Prompt: "ignored", Calls: goldenCalls})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Text, res2.Text) {
		t.Fatalf("structured vs parsed:\n%s\n---\n%s", res2.Text, res.Text)
	}
}

func TestExtractiveLabelContract(t *testing.T) {
	prompt := serialize("", goldenCalls)
	res, err := Extractive{}.Summarize(context.Background(), &Request{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	// Exactly one line per call starts with its label as the first token after "- ", in order.
	re := regexp.MustCompile(`(?m)^- \[\[(\d+):([^\]\n]+)\]\] `)
	m := re.FindAllStringSubmatch(res.Text, -1)
	if len(m) != len(goldenCalls) {
		t.Fatalf("labels %v in\n%s", m, res.Text)
	}
	for i, x := range m {
		if x[1] != strconv.Itoa(i+1) || x[2] != goldenCalls[i].Tool {
			t.Fatalf("label %d = %v", i, x)
		}
	}
	// No other [[N:...]] token anywhere.
	if n := len(labelTok.FindAllString(res.Text, -1)); n != len(goldenCalls) {
		t.Fatalf("%d label tokens", n)
	}
}

func TestParseBatchPromptRoundTrip(t *testing.T) {
	a, calls := ParseBatchPrompt(serialize("hi there", goldenCalls))
	if a != "hi there" || len(calls) != len(goldenCalls) {
		t.Fatalf("assistant %q calls %d", a, len(calls))
	}
	for i, c := range calls {
		g := goldenCalls[i]
		if c.Label != i+1 || c.Tool != g.Tool || c.IsError != g.IsError || c.Result != g.Result {
			t.Fatalf("call %d: %+v", i, c)
		}
		var x, y any
		if json.Unmarshal(g.Args, &x) == nil {
			if err := json.Unmarshal(c.Args, &y); err != nil || !reflect.DeepEqual(x, y) {
				t.Fatalf("args %d: %s", i, c.Args)
			}
		}
	}
	// A result that itself contains a header-like line out of sequence stays result text.
	_, calls = ParseBatchPrompt(serialize("", []Call{{Tool: "cat", Args: []byte(`{}`), Result: "[[7:x]] Tool: x()\nmore"}}))
	if len(calls) != 1 || calls[0].Result != "[[7:x]] Tool: x()\nmore" {
		t.Fatalf("%+v", calls)
	}
	// Quoted text never carries a label of its own.
	res, _ := Extractive{}.Summarize(context.Background(), &Request{Calls: calls})
	if n := len(labelTok.FindAllString(res.Text, -1)); n != 1 {
		t.Fatalf("%d labels in\n%s", n, res.Text)
	}
	if _, calls := ParseBatchPrompt("no batch here"); calls != nil {
		t.Fatal("calls from nothing")
	}
}

func TestExtractiveRange(t *testing.T) {
	footer := "\n\n---\n**Summarized tool refs**: `t1`, `t2`\nUse `context_tree_query` with these refs to retrieve the original full outputs."
	parts := []string{"- `t1` Read a.go\n- `t2` ran tests: FAIL" + footer, "- `t3` edited a.go\n- `t2` ran tests: FAIL\nplain note" + footer}
	prompt := "Fuse these.\n\n<sub-task-summaries>\n" + strings.Join(parts, "\n\n") + "\n</sub-task-summaries>"
	res, err := Extractive{}.Summarize(context.Background(), &Request{Kind: KindRange, Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	want := "- `t1` Read a.go\n- `t2` ran tests: FAIL\n- `t3` edited a.go\n- plain note"
	if res.Text != want {
		t.Fatalf("got\n%s", res.Text)
	}
	res2, _ := Extractive{}.Summarize(context.Background(), &Request{Kind: KindRange, Parts: parts})
	if res2.Text != want {
		t.Fatalf("parts: %s", res2.Text)
	}
	if _, err := (Extractive{}).Summarize(context.Background(), &Request{Kind: KindRange, Prompt: "<sub-task-summaries>\n\n</sub-task-summaries>"}); KindOf(err) != KindUnusable {
		t.Fatalf("err %v", err)
	}
}

// corpusBatches builds per-turn batches (assistant tool_use blocks with their tool_result
// blocks) from the Claude Code sessions of the corpus.
func corpusBatches(tb testing.TB) [][]Call {
	var out [][]Call
	for _, path := range corpus.Files(tb) {
		base := filepath.Base(path)
		if !strings.HasPrefix(base, "cc") {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		pending := map[string]*Call{}
		var cur []Call
		var order []string
		flush := func() {
			var b []Call
			for _, id := range order {
				if c := pending[id]; c != nil && c.Result != "" {
					b = append(b, *c)
				}
			}
			if len(b) > 0 {
				out = append(out, b)
			}
			pending, order, cur = map[string]*Call{}, nil, cur[:0]
		}
		for sc.Scan() {
			line := sc.Bytes()
			typ := gjson.GetBytes(line, "type").String()
			content := gjson.GetBytes(line, "message.content")
			if !content.IsArray() {
				continue
			}
			for _, blk := range content.Array() {
				switch blk.Get("type").String() {
				case "tool_use":
					if typ == "assistant" {
						id := blk.Get("id").String()
						pending[id] = &Call{Tool: blk.Get("name").String(), Args: []byte(blk.Get("input").Raw)}
						order = append(order, id)
					}
				case "tool_result":
					c := pending[blk.Get("tool_use_id").String()]
					if c == nil {
						continue
					}
					c.IsError = blk.Get("is_error").Bool()
					if r := blk.Get("content"); r.Type == gjson.String {
						c.Result = r.String()
					} else {
						var parts []string
						for _, p := range r.Array() {
							if p.Get("type").String() == "text" {
								parts = append(parts, p.Get("text").String())
							}
						}
						c.Result = strings.Join(parts, "\n")
					}
				}
			}
			if typ == "user" && len(order) > 0 {
				flush()
			}
		}
		f.Close()
	}
	return out
}

var labelTok = regexp.MustCompile(`\[\[\d+:[^\]\n]+\]\]`)

func TestExtractiveCorpusDeterministic(t *testing.T) {
	batches := corpusBatches(t)
	if len(batches) == 0 {
		t.Fatal("no Claude Code batches in the corpus")
	}
	x := Extractive{}
	var raw, sum int
	for i, b := range batches {
		p := serialize("", b)
		r1, err := x.Summarize(context.Background(), &Request{Prompt: p})
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		r2, _ := x.Summarize(context.Background(), &Request{Prompt: p})
		if r1.Text != r2.Text {
			t.Fatalf("batch %d not deterministic", i)
		}
		if n := len(labelTok.FindAllString(r1.Text, -1)); n != len(b) {
			t.Fatalf("batch %d: %d labels for %d calls:\n%s", i, n, len(b), r1.Text)
		}
		for _, c := range b {
			raw += len(c.Result)
		}
		sum += len(r1.Text)
	}
	t.Logf("%d corpus batches: %d raw result bytes → %d summary bytes", len(batches), raw, sum)
}

func BenchmarkExtractiveCorpus(b *testing.B) {
	batches := corpusBatches(b)
	if len(batches) == 0 {
		b.Fatal("no Claude Code batches in the corpus")
	}
	reqs := make([]*Request, len(batches))
	var bytes int64
	for i, bt := range batches {
		reqs[i] = &Request{Prompt: serialize("", bt)}
		bytes += int64(len(reqs[i].Prompt))
	}
	x := Extractive{}
	ctx := context.Background()
	b.SetBytes(bytes / int64(len(reqs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := x.Summarize(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParsesEnginePrompts checks the parsers against the pruning engine's own serializers.
func TestParsesEnginePrompts(t *testing.T) {
	var bc []pruner.BatchCall
	for i, c := range goldenCalls {
		bc = append(bc, pruner.BatchCall{Label: i + 1, Key: fmt.Sprintf("k%d", i), Tool: c.Tool, Args: c.Args, Result: c.Result, IsError: c.IsError})
	}
	a, calls := ParseBatchPrompt(pruner.BatchPrompt("Let me look.", bc))
	if a != "Let me look." || len(calls) != len(goldenCalls) {
		t.Fatalf("assistant %q, %d calls", a, len(calls))
	}
	for i, c := range calls {
		g := goldenCalls[i]
		if c.Tool != g.Tool || c.IsError != g.IsError || c.Result != g.Result || c.Label != i+1 {
			t.Fatalf("call %d: %+v", i, c)
		}
	}
	viaPrompt, _ := Extractive{}.Summarize(context.Background(), &Request{Prompt: pruner.BatchPrompt("", bc)})
	viaCalls, _ := Extractive{}.Summarize(context.Background(), &Request{Calls: goldenCalls})
	if viaPrompt.Text != viaCalls.Text {
		t.Fatalf("prompt vs structured:\n%s\n---\n%s", viaPrompt.Text, viaCalls.Text)
	}
	parts := []string{"- `t1` read a.go", "- `t2` ran tests\n- `t1` read a.go"}
	fused, err := Extractive{}.Summarize(context.Background(), &Request{Kind: KindRange, Prompt: pruner.RangeFusionPrompt(parts)})
	if err != nil || fused.Text != "- `t1` read a.go\n- `t2` ran tests" {
		t.Fatalf("fused %+v err %v", fused, err)
	}
}

// TestExtractiveNames: a call's "names:" line lists the result's salient names the batch's
// summary does not show yet, most frequent first, within min(MaxNames, result/8) bytes.
func TestExtractiveNames(t *testing.T) {
	var b strings.Builder
	b.WriteString("package store\n")
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "func (c *Client) helper%02d() bool { return c.conn.Ping() }\n", i)
	}
	b.WriteString("// see internal/store/redis_conn.go and openRedisClient\nfunc openRedisClient() {}\n// end\n")
	calls := []Call{{Tool: "read", Args: []byte(`{"path":"internal/store/redis.go"}`), Result: b.String()}}
	res, err := Extractive{}.Summarize(context.Background(), &Request{Calls: calls})
	if err != nil {
		t.Fatal(err)
	}
	var names string
	for _, l := range strings.Split(res.Text, "\n") {
		if v, ok := strings.CutPrefix(l, "  - names: "); ok {
			names = v
		}
	}
	// c.conn.Ping (40 times) and openRedisClient (twice) lead, then the names seen once in
	// order of appearance; internal/store/redis.go is in the header already.
	if !strings.HasPrefix(names, "c.conn.Ping, openRedisClient, helper00, helper01") {
		t.Fatalf("names = %q\n%s", names, res.Text)
	}
	if len(names) > DefaultMaxNames || strings.Contains(names, "internal/store/redis.go,") {
		t.Fatalf("names over budget or repeating the header: %d bytes %q", len(names), names)
	}
	small, _ := Extractive{MaxNames: 1000}.Summarize(context.Background(), &Request{Calls: []Call{{Tool: "bash", Result: "see handleFlush"}}})
	if strings.Contains(small.Text, "names:") {
		t.Fatalf("a 15-byte result got a names line: %q", small.Text)
	}
	off, _ := Extractive{MaxNames: -1}.Summarize(context.Background(), &Request{Calls: calls})
	if strings.Contains(off.Text, "names:") {
		t.Fatalf("MaxNames -1 still lists names")
	}
}
