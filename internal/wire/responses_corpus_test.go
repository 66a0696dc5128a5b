package wire

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/codexrollout"
)

// exitCodeLine finds Codex's exit status in a shell output header, for checking IsError
// independently of outputFailed.
var exitCodeLine = regexp.MustCompile(`(?m)^(?:Process exited with code|Exit code:) (-?\d+)$`)

// TestCorpusResponsesRoundTrip feeds the corpus Codex sessions, built as the Responses
// requests Codex sends, through the parser: every request parses, validates and
// serializes to its input; items map onto messages; replacing one output changes only its
// bytes; IsError follows the exit code Codex wrote.
func TestCorpusResponsesRoundTrip(t *testing.T) {
	for _, path := range codexrollout.Files(t) {
		ro := codexrollout.Require(t, path)
		t.Run(ro.Name, func(t *testing.T) {
			for k := 0; k < ro.Len(); k++ {
				body := ro.Request(k)
				r, err := Parse(Responses, body)
				if err != nil {
					t.Fatalf("request %d: %v", k, err)
				}
				if err := Validate(r); err != nil {
					t.Fatalf("request %d: %v", k, err)
				}
				if out := r.Bytes(); &out[0] != &body[0] {
					t.Fatalf("request %d: unmodified request must serialize to its input", k)
				}
			}
			body := ro.Final()
			r, err := Parse(Responses, body)
			if err != nil {
				t.Fatal(err)
			}
			checkDecodedText(t, r)
			items, outputs, failed := 0, 0, 0
			var runs []*Message
			for _, m := range r.Messages {
				items += itemCount(m)
				if m.Role == RoleAssistant {
					runs = append(runs, m)
				}
				for _, b := range m.Blocks {
					if b.Kind != KindToolResult {
						continue
					}
					outputs++
					want := false
					if sm := exitCodeLine.FindStringSubmatch(headerOf(b.ResultText())); sm != nil {
						want = sm[1] != "0"
					}
					var st struct {
						Metadata struct {
							ExitCode *int `json:"exit_code"`
						} `json:"metadata"`
					}
					if json.Unmarshal([]byte(b.ResultText()), &st) == nil && st.Metadata.ExitCode != nil {
						want = *st.Metadata.ExitCode != 0
					}
					if b.IsError != want {
						t.Fatalf("output %s: IsError %v, want %v:\n%.300s", b.ID, b.IsError, want, b.ResultText())
					}
					if b.IsError {
						failed++
					}
					if b.Name == "" {
						t.Fatalf("output %s: no call name", b.ID)
					}
				}
			}
			if items != len(ro.Items) || len(runs) != ro.Len() || outputs == 0 || failed == 0 {
				t.Fatalf("%d items as %d messages (%d runs, %d requests), %d outputs, %d failed", len(ro.Items), items, len(runs), ro.Len(), outputs, failed)
			}
			t.Logf("%d items, %d messages, %d assistant runs, %d outputs (%d failed), %d bytes", items, len(r.Messages), len(runs), outputs, failed, len(body))
			// Replace the last output: only that item's bytes change.
			for mi := len(r.Messages) - 1; mi >= 0; mi-- {
				m := r.Messages[mi]
				if m.Role != RoleTool {
					continue
				}
				nb := m.Blocks[0].WithResultText("[pruned]")
				msgs := append([]*Message(nil), r.Messages...)
				msgs[mi] = m.WithBlocks([]*Block{nb})
				got := encoded(t, r.WithMessages(msgs))
				off := offsetIn(body, m.Raw())
				want := append(append(append([]byte(nil), body[:off]...), nb.Raw()...), body[off+len(m.Raw()):]...)
				if !bytes.Equal(got, want) {
					t.Fatalf("replacing message %d changed other bytes", mi)
				}
				break
			}
		})
	}
}

// headerOf returns the lines of a Codex shell output before its "Output:" line.
func headerOf(text string) string {
	if i := strings.Index(text, "\nOutput:"); i >= 0 {
		return text[:i]
	}
	return ""
}

// TestParseReusingResponses replays the corpus Codex sessions request by request: every
// reusing parse equals a fresh one and shares every earlier message; a previous request cut
// inside a run of model items does not share that run (its run continues in the next
// request); the last request points into no earlier body but the first.
func TestParseReusingResponses(t *testing.T) {
	for _, path := range codexrollout.Files(t) {
		ro := codexrollout.Require(t, path)
		t.Run(ro.Name, func(t *testing.T) {
			var prev *Request
			var bodies [][]byte
			for k := 0; k < ro.Len(); k++ {
				b := ro.Request(k)
				bodies = append(bodies, b)
				r := sameAsParse(t, Responses, b, prev)
				if prev != nil && r.ReusedMessages() != len(prev.Messages) {
					t.Fatalf("request %d: reused %d of the previous %d messages", k, r.ReusedMessages(), len(prev.Messages))
				}
				prev = r
			}
			for j, b := range bodies[1:] {
				if k := pinsBody(prev, b); k != "" {
					t.Fatalf("the last request still points into body %d (%s)", j+1, k)
				}
			}
			// Cut inside a run: the previous request ends with one item of the run.
			k := ro.Len() / 2
			cut := sameAsParse(t, Responses, ro.Body(ro.Items[:ro.Ends[k]+1]), nil)
			next := sameAsParse(t, Responses, ro.Request(k+1), cut)
			if next.ReusedMessages() != len(cut.Messages)-1 {
				t.Fatalf("after a cut run: reused %d of %d", next.ReusedMessages(), len(cut.Messages))
			}
		})
	}
}

func TestParseReusingResponsesEdges(t *testing.T) {
	prev := mustParse(t, Responses, responsesSample)
	i := strings.Index(responsesSample, ",\n {\"type\":\"message\",\"role\":\"assistant\",\"content\":\"done\"}")
	head := responsesSample[:i]
	tail := responsesSample[strings.Index(responsesSample, "\n],\"tools\""):]
	for _, mid := range []string{
		",\n {\"type\":\"message\",\"role\":\"assistant\",\"content\":\"done\"}",
		",\n {\"type\":\"message\",\"role\":\"assistant\",\"content\":\"done\"},{\"type\":\"reasoning\",\"summary\":[]}",
		",\n {\"type\":\"message\",\"role\":\"assistant\",\"content\":\"done\"},{\"type\":\"function_call_output\",\"call_id\":1}",
		",\n {\"type\":\"message\",\"role\":\"user\",\"content\":\"changed\"}",
		",{\"type\":7}",
		",{\"role\":\"user\",\"content\":\"bad \\q\"}",
		"",
	} {
		sameAsParse(t, Responses, []byte(head+mid+tail), prev)
		sameAsParse(t, OpenAI, []byte(head+mid+tail), prev) // another format: prev ignored
	}
	// A string input is never shared, and a request after one shares nothing.
	s := mustParse(t, Responses, `{"input":"hi"}`)
	if r := sameAsParse(t, Responses, []byte(`{"input":"hi"}`), s); r.ReusedMessages() != 0 {
		t.Fatal("string input shared")
	}
	if r := sameAsParse(t, Responses, []byte(`{"input":[{"role":"user","content":"hi"}]}`), s); r.ReusedMessages() != 0 {
		t.Fatal("shared after a string input")
	}
	// The same request again: everything is shared.
	if r := sameAsParse(t, Responses, []byte(responsesSample), prev); r.ReusedMessages() != len(prev.Messages)-1 {
		t.Fatalf("identical request reused %d of %d (all but the final run)", r.ReusedMessages(), len(prev.Messages))
	}
}

func TestParseReusingReleasesResponsesBodies(t *testing.T) {
	files := codexrollout.Files(t)
	ro := codexrollout.Require(t, files[0])
	checkBodiesReleased(t, Responses, min(ro.Len(), 40), ro.Request)
}

// codexBody returns the request of the largest corpus Codex session holding every item, and
// its rollout.
func codexBody(tb testing.TB) ([]byte, *codexrollout.Rollout) {
	var best *codexrollout.Rollout
	for _, p := range codexrollout.Files(tb) {
		ro := codexrollout.Require(tb, p)
		if best == nil || len(ro.Items) > len(best.Items) {
			best = ro
		}
	}
	return best.Final(), best
}

// BenchmarkParseResponses parses the largest corpus Codex session as the Responses request
// Codex sends at its end.
func BenchmarkParseResponses(b *testing.B) {
	body, _ := codexBody(b)
	b.ReportMetric(float64(len(body)), "body-bytes")
	benchLoop(b, len(body), func() {
		if _, err := Parse(Responses, body); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkParseReusingResponses is the steady state on it: the previous request is the
// session one model response earlier.
func BenchmarkParseReusingResponses(b *testing.B) {
	_, ro := codexBody(b)
	body := ro.Request(ro.Len() - 1)
	prev, err := Parse(Responses, ro.Request(ro.Len()-2))
	if err != nil {
		b.Fatal(err)
	}
	benchLoop(b, len(body), func() {
		r, err := ParseReusing(Responses, body, prev)
		if err != nil {
			b.Fatal(err)
		}
		if r.ReusedMessages() != len(prev.Messages) {
			b.Fatal("reused " + strconv.Itoa(r.ReusedMessages()))
		}
	})
}
