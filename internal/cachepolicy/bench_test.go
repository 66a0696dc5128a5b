package cachepolicy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// BenchmarkMidRunCut measures the mid-run trigger's per-request check on a 600-message agent
// run (300 tool-using turns): it runs on the proxy's request path.
func BenchmarkMidRunCut(b *testing.B) {
	var msgs []string
	msgs = append(msgs, `{"role":"user","content":"task"}`)
	for i := 0; i < 300; i++ {
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":"step %d"},{"type":"tool_use","id":"t%d","name":"bash","input":{"cmd":"make %d"}}]}`, i, i, i),
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"%s"}]}`, i, strings.Repeat("output line\\n", 50)))
	}
	req, err := wire.Parse(wire.Anthropic, []byte(`{"model":"m","messages":[`+strings.Join(msgs, ",")+`]}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if cut, _ := MidRunCut(req.Messages, DefaultGraceTurns); cut == 0 {
			b.Fatal("no cut")
		}
	}
}

// BenchmarkDecide measures the decision itself.
func BenchmarkDecide(b *testing.B) {
	in := Input{CurrentTokens: 100_000, NextTokens: 60_000, CurrentCached: 100_000, NextCached: 40_000, CacheAlive: true, Price: sonnet, Remaining: 8}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Decide(in)
	}
}
