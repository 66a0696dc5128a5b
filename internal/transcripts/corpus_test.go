package transcripts

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// corpusWant is what importing one corpus file must yield. The MANIFEST columns are quoted
// in each row's comment; differences are explained there.
type corpusWant struct {
	format      Format
	requests    int // MANIFEST "req"
	messages    int // MANIFEST "msgs" under our merge rules (see comments)
	calls       int // MANIFEST "calls"
	failed      int // MANIFEST "fail"
	compactions int // MANIFEST "cmp"
}

// Differences from MANIFEST.md, by cause:
//
//   - pi_session / pi_compact: one line each holds two JSON records written without a newline
//     between them. measure.py (and pi when reloading) skip the whole line; we split it and keep
//     both records, because the agent had them in memory and sent them. pi_session gains one
//     request (220 vs 219); pi_compact gains one request (504 vs 503) and a compaction (2 vs 1).
//   - pi messages: measure.py counts aborted/errored assistant turns as messages; pi drops them
//     from requests, so the user/tool messages around them merge (e.g. 931 vs 969).
//   - pi_before-compaction calls 449 vs 454: the five tool calls of aborted turns are dropped
//     with their turn. One call (of a turn that completed but whose result was never written)
//     gets pi's synthetic "No result provided" result (not counted as a result).
//   - Claude Code messages: measure.py counts roles in file order, where tool results are
//     interleaved with the blocks of one streamed response (A, R, A, R); we move results after
//     their response (A, R), so ccspot main files have fewer messages (e.g. 314 vs 352). The
//     cccodemie files have no interleaving and match.
//   - codex …019e1695: the trimmed rollout holds its user turns only as event_msg/user_message;
//     we insert them (measure.py ignores them), which splits two runs of model items that
//     measure.py counts as one response each: 20 requests vs 18, 40 messages vs 35.
//   - SWE-agent / mini-SWE-agent: measure.py counts the system message as a message; it is
//     the top-level system prompt here (27 vs 28, 24 vs 25, 103 vs 104, …). The pydicom
//     text-action file's demonstration is kept (the agent sent it); it merges into the next
//     user message, so the count is unchanged.
var corpusWants = map[string]corpusWant{
	"pi_before-compaction.jsonl":                                                   {FormatPi, 484, 931, 449, 12, 2},          // MANIFEST 969/484/454/12/2
	"pi_large-session.jsonl":                                                       {FormatPi, 453, 860, 373, 19, 0},          // MANIFEST 904/453/391/19/0: 18 calls in aborted turns
	"pi_session.jsonl":                                                             {FormatPi, 220, 429, 189, 12, 1},          // MANIFEST 439/219/189/12/1
	"pi_compact.jsonl":                                                             {FormatPi, 504, 989, 429, 17, 2},          // MANIFEST 1007/503/432/17/1: 3 calls in aborted turns
	"ccspot_fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl":                            {FormatClaudeCode, 157, 314, 197, 8, 1},   // MANIFEST 352/157/197/8/1
	"ccspot_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl":                            {FormatClaudeCode, 217, 434, 242, 12, 1},  // MANIFEST 472/217/242/12/1
	"ccspot_8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl":                            {FormatClaudeCode, 143, 286, 177, 13, 1},  // MANIFEST 320/143/177/13/1
	"ccspot_258c7280-ae70-4798-800f-63464d01a85d.jsonl":                            {FormatClaudeCode, 152, 304, 186, 7, 1},   // MANIFEST 342/152/186/7/1
	"ccspot_4d5611e5-241a-462a-8d15-5122611a9569.jsonl":                            {FormatClaudeCode, 139, 278, 150, 5, 1},   // MANIFEST 298/139/150/5/1
	"ccspot_agent-a881341.jsonl":                                                   {FormatClaudeCode, 3, 6, 2, 0, 0},         // MANIFEST 6/3/2/0/0
	"ccspot_agent-a2898e3.jsonl":                                                   {FormatClaudeCode, 12, 24, 33, 8, 0},      // MANIFEST 66/12/33/8/0: 12 responses, interleaved
	"ccspot_short.jsonl":                                                           {FormatClaudeCode, 1, 3, 2, 2, 0},         // MANIFEST 3/1/2/2/0
	"cccodemie_session-624a4a58.jsonl":                                             {FormatClaudeCode, 55, 110, 48, 0, 1},     // MANIFEST 110/55/48/0/1
	"cccodemie_session-3fe1b6bc.jsonl":                                             {FormatClaudeCode, 67, 134, 76, 5, 0},     // MANIFEST 134/67/76/5/0
	"cccodemie_session-196820da.jsonl":                                             {FormatClaudeCode, 47, 94, 65, 2, 0},      // MANIFEST 94/47/65/2/0
	"cccodemie_session-9eda1058.jsonl":                                             {FormatClaudeCode, 5, 10, 3, 1, 0},        // MANIFEST 10/5/3/1/0
	"codex_rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl": {FormatCodex, 66, 132, 102, 4, 0},         // MANIFEST 132/66/102/4/0
	"codex_rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl": {FormatCodex, 20, 40, 38, 1, 0},           // MANIFEST 35/18/38/1/0
	"sweagent_marshmallow-code__marshmallow-1867.traj":                             {FormatSWEAgent, 13, 27, 13, 0, 0},        // MANIFEST 28/13/13/0/0
	"sweagent_pydicom__pydicom-1458.traj":                                          {FormatSWEAgent, 12, 24, 12, 0, 0},        // MANIFEST 25/12/12/0/0
	"msa_django__django-16560.traj.json":                                           {FormatMiniSWEAgent, 145, 291, 145, 9, 0}, // MANIFEST 292/145/145/9/0
	"msa_django__django-15629.traj.json":                                           {FormatMiniSWEAgent, 51, 103, 51, 6, 0},   // MANIFEST 104/51/51/6/0
	"msa_psf__requests-1142.traj.json":                                             {FormatMiniSWEAgent, 71, 143, 71, 7, 0},   // MANIFEST 144/71/71/7/0
}

// reusedIDFile is the one corpus file whose agent reused tool-call ids: its native (OpenAI)
// requests keep them as sent, its Anthropic requests rename the reused ones (docs/formats.md).
const reusedIDFile = "sweagent_marshmallow-code__marshmallow-1867.traj"

func TestCorpusCounts(t *testing.T) {
	files := corpus.Files(t)
	seen := 0
	for _, path := range files {
		name := filepath.Base(path)
		want, ok := corpusWants[name]
		if !ok {
			t.Errorf("%s: corpus file without expected counts; add it to corpusWants", name)
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			s, err := ImportFile(path, FormatAuto)
			if err != nil {
				t.Fatal(err)
			}
			got := corpusWant{s.Format, s.Len(), s.Stats.Messages, s.Stats.ToolCalls, s.Stats.FailedResults, s.Stats.Compactions}
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if s.Stats.Requests != s.Len() {
				t.Errorf("Stats.Requests %d != Len %d", s.Stats.Requests, s.Len())
			}
			// Compactions start new contexts.
			if s.Contexts(Anthropic) < s.Stats.Compactions+1 && s.Stats.Compactions > 0 {
				t.Errorf("%d contexts for %d compactions", s.Contexts(Anthropic), s.Stats.Compactions)
			}
			// After a compaction the context restarts with the summary (pi_session's only
			// compaction is its last line: no request follows it).
			if want.compactions > 0 && name != "pi_session.jsonl" {
				last := s.Point(s.Len() - 1)
				first := string(s.Context(Anthropic, last.Context)[0])
				summary := map[Format]string{
					FormatPi:         `"The conversation history before this point was compacted into the following summary:`,
					FormatClaudeCode: `"This session is being continued from a previous conversation`,
				}[want.format]
				first = strings.TrimPrefix(first, `{"role":"user","content":`)
				first = strings.TrimPrefix(first, `[{"type":"text","text":`)
				if !strings.HasPrefix(first, summary) {
					t.Errorf("last context starts with %.120s, want the compaction summary", first)
				}
			}
			// Tool calls in the output agree with the counts: every call of the final
			// context of a compaction-free session appears in its last request or after.
			if want.compactions == 0 && s.Contexts(Anthropic) == 1 {
				calls := 0
				for _, m := range s.Context(Anthropic, 0) {
					calls += bytes.Count(m, []byte(`"type":"tool_use"`))
				}
				if want.format != FormatMiniSWEAgent && !(want.format == FormatSWEAgent && name != reusedIDFile) && calls != want.calls {
					t.Errorf("tool_use blocks in the context: %d, want %d", calls, want.calls)
				}
			}
		})
	}
	if seen != len(corpusWants) {
		t.Errorf("saw %d of the %d expected corpus files", seen, len(corpusWants))
	}
}

// offsetIn returns the offset of sub inside body (sub must be a sub-slice of body).
func offsetIn(body, sub []byte) int {
	if len(sub) == 0 {
		return -1
	}
	off := int(uintptr(unsafe.Pointer(&sub[0])) - uintptr(unsafe.Pointer(&body[0])))
	if off < 0 || off+len(sub) > len(body) {
		return -1
	}
	return off
}

// wireFormat maps a provider to the wire format.
func wireFormat(p Provider) wire.Format {
	switch p {
	case OpenAI:
		return wire.OpenAI
	case Responses:
		return wire.Responses
	}
	return wire.Anthropic
}

// TestCorpusRequestsWire round-trips every imported request of every corpus file through
// wire.Parse + Bytes (byte-identical, no copy), checks it with wire.Validate, and replaces one
// tool result: the output must differ from the input only in that block's bytes.
func TestCorpusRequestsWire(t *testing.T) {
	totalModified := 0
	defer func() {
		// Every format with structured tool results contributes; thousands in all.
		if !t.Failed() && !t.Skipped() && totalModified < 1000 {
			t.Errorf("only %d requests had a tool result to replace", totalModified)
		}
	}()
	for _, path := range corpus.Files(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			s, err := ImportFile(path, FormatAuto)
			if err != nil {
				t.Fatal(err)
			}
			var body []byte
			for _, p := range s.Providers() {
				lastOfContext := map[int]int{}
				for k := 0; k < s.Len(); k++ {
					lastOfContext[s.Point(k).ContextIn(p)] = k
				}
				modified := 0
				for k := 0; k < s.Len(); k++ {
					body, err = s.AppendRequest(body[:0], k, p)
					if err != nil {
						t.Fatal(err)
					}
					r, err := wire.Parse(wireFormat(p), body)
					if err != nil {
						t.Fatalf("%s request %d: wire.Parse: %v", p, k, err)
					}
					out := r.Bytes()
					if !bytes.Equal(out, body) || &out[0] != &body[0] {
						t.Fatalf("%s request %d: unmodified Bytes() is not the input itself", p, k)
					}
					if err := wire.Validate(r); err != nil {
						t.Fatalf("%s request %d (line %d): %v", p, k, s.Point(k).Line, err)
					}
					if lastOfContext[s.Point(k).ContextIn(p)] == k && p != Responses {
						chk := checkAnthropic
						if p == OpenAI {
							chk = checkOpenAI
						}
						if err := chk(body); err != nil {
							t.Fatalf("%s request %d: %v", p, k, err)
						}
					}
					if replaceOneResult(t, p, k, r, body) {
						modified++
					}
				}
				totalModified += modified
			}
		})
	}
}

// replaceOneResult replaces the middle tool result of request k and checks that only that
// block's bytes changed. It reports whether the request had a tool result.
func replaceOneResult(t *testing.T, p Provider, k int, r *wire.Request, body []byte) bool {
	t.Helper()
	type loc struct{ mi, bi int }
	var results []loc
	for mi, m := range r.Messages {
		for bi, b := range m.Blocks {
			if b.Kind == wire.KindToolResult {
				results = append(results, loc{mi, bi})
			}
		}
	}
	if len(results) == 0 {
		return false
	}
	at := results[len(results)/2]
	m := r.Messages[at.mi]
	old := m.Blocks[at.bi]
	nb := old.WithResultText("[condense test: result replaced]")
	blocks := append([]*wire.Block(nil), m.Blocks...)
	blocks[at.bi] = nb
	msgs := append([]*wire.Message(nil), r.Messages...)
	msgs[at.mi] = m.WithBlocks(blocks)
	got := r.WithMessages(msgs).Bytes()
	off := offsetIn(body, old.Raw())
	if off < 0 {
		t.Fatalf("%s request %d: result block bytes are not inside the body", p, k)
	}
	want := make([]byte, 0, len(body))
	want = append(want, body[:off]...)
	want = append(want, nb.Raw()...)
	want = append(want, body[off+len(old.Raw()):]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s request %d: replacing one tool result changed other bytes", p, k)
	}
	return true
}
