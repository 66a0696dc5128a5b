package cost

import (
	"fmt"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// benchBody is an Anthropic request of about 400 KB: 100 tool turns with 4 KB results.
func benchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-sonnet-4-5","system":"You are a coding agent.","tools":[{"name":"read","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"go"}`)
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"step %d"},{"type":"tool_use","id":"t%d","name":"read","input":{"path":"f%d.go"}}]}`, i, i, i)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%s"}]}`, i, strings.Repeat("x := 1; ", 500))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkFromBody(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromBody(body, PromptOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCacheSend(b *testing.B) {
	p, err := FromBody(benchBody(), PromptOptions{})
	if err != nil {
		b.Fatal(err)
	}
	c := NewCache(nil)
	b.ReportAllocs()
	for b.Loop() {
		c.Send(&p)
	}
}

func BenchmarkCharEstimatorText(b *testing.B) {
	s := strings.Repeat("func main() { fmt.Println(\"héllo\") }\n", 1000)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		DefaultEstimator.Text(s)
	}
}

// BenchmarkFromRequest flattens the same request as BenchmarkFromBody from its parsed form
// with a fresh memo (what one render costs the cache-aware weighing).
func BenchmarkFromRequest(b *testing.B) {
	body := benchBody()
	r, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		FromRequest(r, PromptOptions{}, &PromptMemo{})
	}
}
