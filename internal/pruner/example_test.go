package pruner_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// Example shows one flush and the render of the next request.
func Example() {
	body := []byte(`{"model":"m","max_tokens":100,"messages":[
{"role":"user","content":"Fix the test"},
{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a_test.go"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + strings.Repeat("source line\\n", 200) + `"}]},
{"role":"assistant","content":[{"type":"text","text":"Fixed."}]},
{"role":"user","content":"Thanks, now the docs"}]}`)
	req, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		panic(err)
	}
	pol := pruner.DefaultPolicy()
	plan, _ := pruner.PlanFlush(req, pruner.NewState(), pol, time.Unix(0, 0))
	outputs := map[string]string{}
	for _, b := range plan.Batches {
		outputs[b.ID] = "- [[1:read]] Read a_test.go: 200 lines of source."
	}
	st, _ := plan.Apply(outputs)

	res := pruner.Render(req, st, pol)
	fmt.Println(res.Unchanged, res.BytesAfter < res.BytesBefore)
	for _, b := range res.Request.Messages[2].Blocks { // the stub, then its batch's summary
		if b.Kind == wire.KindToolResult {
			fmt.Println(b.ResultText())
		} else {
			fmt.Println(b.Text())
		}
	}
	// Output:
	// false true
	// [Summarized in pruner summary, ref `t1`. Use context_tree_query to retrieve full output.]
	// - `t1` Read a_test.go: 200 lines of source.
	//
	// ---
	// **Summarized tool refs**: `t1`
	// Use `context_tree_query` with these refs to retrieve the original full outputs.
}
