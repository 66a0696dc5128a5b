package cost_test

import (
	"testing"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/wire"
)

// FuzzFromRequestResponses: for any body wire parses as a Responses request, FromRequest
// equals FromBody on the same bytes, and neither panics.
func FuzzFromRequestResponses(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-5","input":"hi"}`,
		`{"model":"gpt-5","instructions":"i","tools":[{"type":"web_search"}],"input":[{"role":"user","content":"a"},` +
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"encrypted_content":"e"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"t"}]},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"o"}]},` +
			`{"type":"compaction","encrypted_content":"x"},{"type":"message","role":"developer","content":[{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := wire.Parse(wire.Responses, body)
		if err != nil {
			return
		}
		checkSame(t, "fuzz", body, r, nil, cost.BreakpointsAuto)
	})
}
