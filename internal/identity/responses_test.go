package identity

import (
	"testing"

	"github.com/condense-dev/condense/internal/testutil/codexrollout"
	"github.com/condense-dev/condense/internal/wire"
)

// TestResponsesCorpusIdentity replays the corpus Codex sessions as Responses requests:
// every occurrence key (function_call with its arguments string, apply_patch with its
// freeform input) of the last request, parsed reusing the one before, matches the definition.
func TestResponsesCorpusIdentity(t *testing.T) {
	for _, path := range codexrollout.Files(t) {
		ro := codexrollout.Require(t, path)
		t.Run(ro.Name, func(t *testing.T) {
			var prev *wire.Request
			keys, custom := 0, 0
			for k := 0; k < ro.Len(); k++ {
				r, err := wire.ParseReusing(wire.Responses, ro.Request(k), prev)
				if err != nil {
					t.Fatal(err)
				}
				prev = r
			}
			for _, o := range occurrences(prev.Messages) {
				call := prev.Messages[o.CallMsg].Blocks[o.CallBlock]
				res := prev.Messages[o.ResultMsg].Blocks[o.ResultBlock]
				if want := referenceKey(o.ID, call.Name, call.Input, res.ResultText()); o.Key != want || o.ID != call.ID {
					t.Fatalf("%s: %s, want %s", o.ID, o.Key, want)
				}
				keys++
				if call.Type == "custom_tool_call" {
					custom++
				}
			}
			if keys == 0 {
				t.Fatal("no occurrences")
			}
			t.Logf("%d keys checked (%d custom tool calls), %d messages", keys, custom, len(prev.Messages))
		})
	}
	// The same arguments with other whitespace are the same occurrence.
	body := func(args string) []*wire.Message {
		r, err := wire.Parse(wire.Responses, []byte(`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":`+args+`},{"type":"function_call_output","call_id":"c","output":"o"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return r.Messages
	}
	k1, k2 := occurrences(body(`"{\"a\": 1}"`)), occurrences(body(`"{\"a\":1}"`))
	if len(k1) != 1 || len(k2) != 1 || k1[0].Key != k2[0].Key {
		t.Fatalf("keys %v %v", k1, k2)
	}
}
