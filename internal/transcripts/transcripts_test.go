package transcripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/wire"
)

// lines joins JSONL records.
func lines(recs ...string) []byte { return []byte(strings.Join(recs, "\n") + "\n") }

// mustImport imports data or fails the test.
func mustImport(t *testing.T, name string, data []byte, f Format) *Session {
	t.Helper()
	s, err := Import(name, data, f)
	if err != nil {
		t.Fatalf("Import(%s): %v", name, err)
	}
	return s
}

// messagesOf returns the messages array of request k in the given form, validated with wire.
func messagesOf(t *testing.T, s *Session, k int, p Provider) []json.RawMessage {
	t.Helper()
	body, err := s.Request(k, p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.Parse(wireFormat(p), body)
	if err != nil {
		t.Fatalf("request %d: wire.Parse: %v\n%s", k, err, body)
	}
	if err := wire.Validate(r); err != nil {
		t.Fatalf("request %d: %v\n%s", k, err, body)
	}
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Input    []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if p == Responses {
		return req.Input
	}
	return req.Messages
}

// joined returns the messages as one string for substring checks.
func joined(ms []json.RawMessage) string {
	var b strings.Builder
	for _, m := range ms {
		b.Write(m)
		b.WriteByte('\n')
	}
	return b.String()
}

const piHeader = `{"type":"session","id":"s1","timestamp":"2025-12-01T10:00:00.000Z","cwd":"/w","provider":"anthropic","modelId":"claude-opus-4-5"}`

func piUser(text string, ms int64) string {
	return `{"type":"message","timestamp":"2025-12-01T10:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":` + string(jsonString(text)) + `}],"timestamp":` + itoa(int(ms)) + `}}`
}

func piAsst(content, stop string, ms int64) string {
	return `{"type":"message","timestamp":"2025-12-01T10:00:00.000Z","message":{"role":"assistant","content":` + content + `,"api":"anthropic-messages","provider":"anthropic","model":"claude-opus-4-5","usage":{"input":10,"output":5,"cacheRead":100,"cacheWrite":20},"stopReason":"` + stop + `","timestamp":` + itoa(int(ms)) + `}}`
}

func piResult(id, text string, isErr bool) string {
	e := "false"
	if isErr {
		e = "true"
	}
	return `{"type":"message","timestamp":"2025-12-01T10:00:00.000Z","message":{"role":"toolResult","toolCallId":"` + id + `","toolName":"bash","content":[{"type":"text","text":` + string(jsonString(text)) + `}],"isError":` + e + `}}`
}

func TestPiRequestsAbortedAndParallel(t *testing.T) {
	data := lines(piHeader,
		piUser("list files", 1764583200000),
		piAsst(`[{"type":"thinking","thinking":"plan","thinkingSignature":"sig1"},{"type":"toolCall","id":"toolu_1","name":"bash","arguments":{"command":"ls"}},{"type":"toolCall","id":"toolu_2","name":"read","arguments":{"path":"a"}}]`, "toolUse", 1764583201000),
		piResult("toolu_1", "a b", false),
		piResult("toolu_2", "boom\n\nCommand exited with code 1", true),
		piAsst(`[]`, "aborted", 1764583202000),
		piUser("continue", 1764583203000),
		piAsst(`[{"type":"text","text":"done"}]`, "stop", 1764583204000),
	)
	s := mustImport(t, "p.jsonl", data, FormatAuto)
	if s.Format != FormatPi || s.Len() != 3 {
		t.Fatalf("format %s, %d requests; want pi, 3", s.Format, s.Len())
	}
	if !s.Point(1).Dropped || s.Point(0).Dropped {
		t.Errorf("Dropped flags: %v %v", s.Point(0).Dropped, s.Point(1).Dropped)
	}
	if got := s.Point(0).Time; !got.Equal(time.UnixMilli(1764583201000)) {
		t.Errorf("time %v", got)
	}
	if u := s.Point(0).Usage; u == nil || u.CacheReadTokens != 100 || u.CacheWriteTokens != 20 {
		t.Errorf("usage %+v", u)
	}
	m0 := messagesOf(t, s, 0, Anthropic)
	if len(m0) != 1 || string(m0[0]) != `{"role":"user","content":[{"type":"text","text":"list files"}]}` {
		t.Errorf("request 0 messages: %s", joined(m0))
	}
	// Request 2: the aborted turn is gone and the two results + "continue" are one user message.
	m2 := messagesOf(t, s, 2, Anthropic)
	if len(m2) != 3 {
		t.Fatalf("request 2 has %d messages:\n%s", len(m2), joined(m2))
	}
	want := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a b","is_error":false},{"type":"tool_result","tool_use_id":"toolu_2","content":"boom\n\nCommand exited with code 1","is_error":true},{"type":"text","text":"continue"}]}`
	if string(m2[2]) != want {
		t.Errorf("merged user message:\n got %s\nwant %s", m2[2], want)
	}
	if !strings.Contains(string(m2[1]), `{"type":"thinking","thinking":"plan","signature":"sig1"}`) {
		t.Errorf("thinking with signature not kept: %s", m2[1])
	}
	if s.Stats.FailedResults != 1 || s.Stats.ToolCalls != 2 || s.Stats.DroppedResponses != 1 {
		t.Errorf("stats %+v", s.Stats)
	}
	// Request 1 (the aborted one) was sent with the results message as it was then; the
	// merge for request 2 must not change request 1's bytes.
	b1, _ := s.Request(1, Anthropic)
	if !bytes.Contains(b1, []byte(`"is_error":true}]}]}`)) {
		t.Errorf("request 1 does not end with the results message: %s", b1[len(b1)-80:])
	}
}

func TestPiCompactionKeepsEntries(t *testing.T) {
	data := lines(piHeader,
		piUser("one", 1), // index 1
		piAsst(`[{"type":"text","text":"r1"}]`, "stop", 2), // 2
		piUser("two", 3), // 3
		piAsst(`[{"type":"text","text":"r2"}]`, "stop", 4), // 4
		`{"type":"compaction","timestamp":"2025-12-01T10:00:05.000Z","summary":"SUM","firstKeptEntryIndex":3,"tokensBefore":99}`,
		piUser("three", 6),
		piAsst(`[{"type":"text","text":"r3"}]`, "stop", 7),
	)
	s := mustImport(t, "p.jsonl", data, FormatPi)
	if s.Len() != 3 || s.Stats.Compactions != 1 {
		t.Fatalf("%d requests, %d compactions", s.Len(), s.Stats.Compactions)
	}
	m := messagesOf(t, s, 2, Anthropic)
	got := joined(m)
	for _, frag := range []string{"compacted into the following summary:\\n\\n<summary>\\nSUM\\n</summary>", `"two"`, `"r2"`, `"three"`} {
		if !strings.Contains(got, frag) {
			t.Errorf("request after compaction lacks %s:\n%s", frag, got)
		}
	}
	if strings.Contains(got, `"one"`) || strings.Contains(got, `"r1"`) {
		t.Errorf("request after compaction still holds entries before firstKept:\n%s", got)
	}
	if s.Point(2).Context == s.Point(1).Context {
		t.Errorf("compaction did not start a new context")
	}
	// Kept entries are not counted twice: one, r1, two, r2, summary+three (consecutive user
	// entries in file order), r3 = 6, as measure.py counts.
	if s.Stats.Messages != 6 {
		t.Errorf("Stats.Messages = %d, want 6", s.Stats.Messages)
	}
}

func TestPiV3TreeBranch(t *testing.T) {
	h := `{"type":"session","version":3,"id":"s","timestamp":"2025-12-01T10:00:00.000Z","cwd":"/w"}`
	e := func(id, parent, body string) string {
		p := `null`
		if parent != "" {
			p = `"` + parent + `"`
		}
		return `{"type":"message","id":"` + id + `","parentId":` + p + `,"timestamp":"2025-12-01T10:00:00.000Z","message":` + body + `}`
	}
	u := func(t string) string { return `{"role":"user","content":"` + t + `","timestamp":1}` }
	a := func(t string) string {
		return `{"role":"assistant","content":[{"type":"text","text":"` + t + `"}],"model":"m","stopReason":"stop","timestamp":2}`
	}
	data := lines(h,
		e("a1", "", u("first")),
		e("a2", "a1", a("ans1")),
		e("a3", "a2", u("abandoned")),
		e("a4", "a3", a("ans-abandoned")),
		e("b3", "a2", u("edited")), // branch from a2
		e("b4", "b3", a("ans-edited")),
	)
	s := mustImport(t, "v3.jsonl", data, FormatAuto)
	if s.Len() != 3 {
		t.Fatalf("%d requests", s.Len())
	}
	got := joined(messagesOf(t, s, 2, Anthropic))
	if strings.Contains(got, "abandoned") || !strings.Contains(got, `"edited"`) || !strings.Contains(got, `"ans1"`) {
		t.Errorf("branch request:\n%s", got)
	}
	if want := `{"role":"user","content":"first"}`; !strings.HasPrefix(got, want) {
		t.Errorf("string content not kept as string: %s", got)
	}
}

func TestPiDanglingCallGetsSyntheticResult(t *testing.T) {
	data := lines(piHeader,
		piUser("go", 1),
		piAsst(`[{"type":"toolCall","id":"toolu_9","name":"bash","arguments":{"command":"x"}}]`, "toolUse", 2),
		piUser("never mind", 3),
		piAsst(`[{"type":"text","text":"ok"}]`, "stop", 4),
	)
	s := mustImport(t, "p.jsonl", data, FormatPi)
	got := joined(messagesOf(t, s, 1, Anthropic))
	if !strings.Contains(got, `{"type":"tool_result","tool_use_id":"toolu_9","content":"No result provided","is_error":true}`) {
		t.Errorf("no synthetic result:\n%s", got)
	}
	if s.Stats.SyntheticResults != 1 {
		t.Errorf("SyntheticResults = %d", s.Stats.SyntheticResults)
	}
}

// ccRec builds a Claude Code record.
func ccRec(typ, uuid, parent, body string) string {
	p := `null`
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"parentUuid":` + p + `,"isSidechain":false,"type":"` + typ + `","uuid":"` + uuid + `","timestamp":"2026-02-10T21:11:56.000Z","message":` + body + `}`
}

func ccAsst(id, block string) string {
	return `{"model":"claude-opus-4-6","id":"` + id + `","type":"message","role":"assistant","content":[` + block + `],"usage":{"input_tokens":3,"cache_creation_input_tokens":7,"cache_read_input_tokens":11,"output_tokens":5}}`
}

func ccResult(id, text string, isErr bool) string {
	e := ""
	if isErr {
		e = `,"is_error":true`
	}
	return `{"role":"user","content":[{"type":"tool_result","content":` + string(jsonString(text)) + e + `,"tool_use_id":"` + id + `"}]}`
}

func TestClaudeCodeInterleavedResults(t *testing.T) {
	data := lines(
		`{"type":"file-history-snapshot","messageId":"x","snapshot":{}}`,
		ccRec("user", "u1", "", `{"role":"user","content":"fix it"}`),
		ccRec("assistant", "a1", "u1", ccAsst("msg_1", `{"type":"thinking","thinking":"t","signature":"[REDACTED_SIGNATURE]"}`)),
		ccRec("assistant", "a2", "a1", ccAsst("msg_1", `{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"command":"ls"},"caller":{"type":"direct"}}`)),
		ccRec("user", "r1", "a2", ccResult("toolu_a", "files", false)),
		ccRec("assistant", "a3", "a2", ccAsst("msg_1", `{"type":"tool_use","id":"toolu_b","name":"Read","input":{"file_path":"x"}}`)),
		ccRec("user", "r2", "a3", ccResult("toolu_b", "<tool_use_error>File does not exist.</tool_use_error>", true)),
		`{"type":"progress","uuid":"p1","parentUuid":"r2","data":{"type":"hook_progress"}}`,
		ccRec("assistant", "a4", "r2", ccAsst("msg_2", `{"type":"text","text":"done"}`)),
	)
	s := mustImport(t, "cc.jsonl", data, FormatAuto)
	if s.Format != FormatClaudeCode || s.Len() != 2 {
		t.Fatalf("%s %d", s.Format, s.Len())
	}
	m := messagesOf(t, s, 1, Anthropic)
	if len(m) != 3 {
		t.Fatalf("want user, assistant, results:\n%s", joined(m))
	}
	wantA := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"command":"ls"},"caller":{"type":"direct"}},{"type":"tool_use","id":"toolu_b","name":"Read","input":{"file_path":"x"}}]}`
	if string(m[1]) != wantA {
		t.Errorf("assistant:\n got %s\nwant %s", m[1], wantA)
	}
	if !strings.HasPrefix(string(m[2]), `{"role":"user","content":[{"type":"tool_result","content":"files","tool_use_id":"toolu_a"},{"type":"tool_result"`) {
		t.Errorf("results (verbatim, in order): %s", m[2])
	}
	if s.Stats.DroppedThinking != 1 || s.Stats.FailedResults != 1 {
		t.Errorf("stats %+v", s.Stats)
	}
	if u := s.Point(1).Usage; u == nil || u.CacheWriteTokens != 7 || u.CacheReadTokens != 11 {
		t.Errorf("usage %+v", u)
	}
}

func TestClaudeCodeCompactionAndRewind(t *testing.T) {
	data := lines(
		ccRec("user", "u1", "", `{"role":"user","content":"one"}`),
		ccRec("assistant", "a1", "u1", ccAsst("msg_1", `{"type":"text","text":"r1"}`)),
		ccRec("user", "u2", "a1", `{"role":"user","content":"two"}`),
		ccRec("assistant", "a2", "u2", ccAsst("msg_2", `{"type":"text","text":"r2"}`)),
		// Rewind: a new prompt continues from a1, abandoning u2/a2.
		ccRec("user", "u3", "a1", `{"role":"user","content":"two-edited"}`),
		ccRec("assistant", "a3", "u3", ccAsst("msg_3", `{"type":"text","text":"r3"}`)),
		`{"parentUuid":null,"logicalParentUuid":"a3","type":"system","subtype":"compact_boundary","uuid":"cb","compactMetadata":{"trigger":"auto","preTokens":1}}`,
		`{"parentUuid":"cb","isSidechain":false,"type":"user","uuid":"u4","isCompactSummary":true,"timestamp":"2026-02-10T21:12:00.000Z","message":{"role":"user","content":"This session is being continued from a previous conversation."}}`,
		ccRec("assistant", "a4", "u4", ccAsst("msg_4", `{"type":"text","text":"r4"}`)),
	)
	s := mustImport(t, "cc.jsonl", data, FormatClaudeCode)
	if s.Len() != 4 || s.Stats.Compactions != 1 {
		t.Fatalf("%d requests, %+v", s.Len(), s.Stats)
	}
	got := joined(messagesOf(t, s, 2, Anthropic))
	if strings.Contains(got, `"two"`) || strings.Contains(got, `"r2"`) || !strings.Contains(got, `"two-edited"`) {
		t.Errorf("rewind not applied:\n%s", got)
	}
	got = joined(messagesOf(t, s, 3, Anthropic))
	if strings.Contains(got, `"one"`) || !strings.HasPrefix(got, `{"role":"user","content":"This session is being continued`) {
		t.Errorf("compaction not applied:\n%s", got)
	}
	// Requests before the rewind are unchanged.
	got = joined(messagesOf(t, s, 1, Anthropic))
	if !strings.Contains(got, `"two"`) {
		t.Errorf("request 1 lost its prompt:\n%s", got)
	}
}

func codexLineStr(typ, payload string) string {
	return `{"timestamp":"2026-05-11T08:27:17.490Z","type":"` + typ + `","payload":` + payload + `}`
}

func TestCodexBothForms(t *testing.T) {
	data := lines(
		codexLineStr("session_meta", `{"id":"x","base_instructions":{"text":"You are Codex."}}`),
		codexLineStr("response_item", `{"type":"message","role":"developer","content":[{"type":"input_text","text":"perms"}]}`),
		codexLineStr("turn_context", `{"turn_id":"t","model":"gpt-5.5"}`),
		codexLineStr("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"show tools"}]}`),
		codexLineStr("response_item", `{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gAAA"}`),
		codexLineStr("response_item", `{"type":"function_call","name":"exec_command","arguments":"{\"cmd\": \"ls\"}","call_id":"call_1"}`),
		codexLineStr("response_item", `{"type":"custom_tool_call","status":"completed","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}`),
		codexLineStr("event_msg", `{"type":"token_count","info":{"last_token_usage":{"input_tokens":100,"cached_input_tokens":60,"output_tokens":7}}}`),
		codexLineStr("response_item", `{"type":"function_call_output","call_id":"call_1","output":"Chunk ID: a\nWall time: 1 seconds\nProcess exited with code 2\nOutput:\nno"}`),
		codexLineStr("response_item", `{"type":"custom_tool_call_output","call_id":"call_2","output":"{\"output\":\"ok\",\"metadata\":{\"exit_code\":0}}"}`),
		codexLineStr("response_item", `{"type":"web_search_call","status":"completed","action":{"type":"search","query":"q"}}`),
		codexLineStr("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}],"phase":"final_answer"}`),
	)
	s := mustImport(t, "rollout.jsonl", data, FormatAuto)
	if s.Format != FormatCodex || s.Len() != 2 || s.Native != Responses {
		t.Fatalf("%s %d %s", s.Format, s.Len(), s.Native)
	}
	if s.Stats.DroppedReasoning != 1 || s.Stats.FailedResults != 1 || s.Stats.ToolCalls != 2 {
		t.Errorf("stats %+v", s.Stats)
	}
	if u := s.Point(0).Usage; u == nil || u.InputTokens != 40 || u.CacheReadTokens != 60 {
		t.Errorf("usage %+v", u)
	}
	oa := joined(messagesOf(t, s, 1, OpenAI))
	for _, frag := range []string{
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\": \"ls\"}"}},{"id":"call_2","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\"}"}}]}`,
		`{"role":"tool","tool_call_id":"call_1","content":"Chunk ID: a`,
	} {
		if !strings.Contains(oa, frag) {
			t.Errorf("OpenAI form lacks %s:\n%s", frag, oa)
		}
	}
	if strings.Contains(oa, "gAAA") {
		t.Errorf("encrypted reasoning leaked")
	}
	an := joined(messagesOf(t, s, 1, Anthropic))
	if !strings.Contains(an, `{"type":"tool_use","id":"call_1","name":"exec_command","input":{"cmd":"ls"}}`) ||
		!strings.Contains(an, `"is_error":true`) {
		t.Errorf("Anthropic form:\n%s", an)
	}
	body, _ := s.Request(0, OpenAI)
	if !bytes.HasPrefix(body, []byte(`{"model":"gpt-5.5","messages":[{"role":"system","content":"You are Codex."},`)) {
		t.Errorf("OpenAI body head: %.120s", body)
	}
	// The Responses form sends the recorded items themselves, reasoning and the hosted search
	// included, with Codex's request members around them.
	body, _ = s.Request(1, Responses)
	for _, frag := range []string{
		`{"model":"gpt-5.5","instructions":"You are Codex.","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"perms"}]},`,
		`{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gAAA"},{"type":"function_call","name":"exec_command","arguments":"{\"cmd\": \"ls\"}","call_id":"call_1"},`,
		`{"type":"custom_tool_call_output","call_id":"call_2","output":"{\"output\":\"ok\",\"metadata\":{\"exit_code\":0}}"}],"tools":`,
		`"tools":[{"type":"custom","name":"apply_patch",`,
		`{"type":"web_search"}],"tool_choice":"auto","parallel_tool_calls":true,"store":false,"stream":true,"prompt_cache_key":"x"}`,
	} {
		if !bytes.Contains(body, []byte(frag)) {
			t.Errorf("Responses form lacks %s:\n%s", frag, body)
		}
	}
	if r, err := wire.Parse(wire.Responses, body); err != nil || wire.Validate(r) != nil {
		t.Errorf("Responses form: %v %v", err, wire.Validate(r))
	}
}

// TestCodexResponsesFixups: as Codex does before it sends its history, a call left without
// output gets the output "aborted" right after it, an output of no call is left out, and a
// reasoning item nothing of its run follows is not sent; a compaction starts a new context of
// the Responses form holding the replacement history.
func TestCodexResponsesFixups(t *testing.T) {
	data := lines(
		codexLineStr("session_meta", `{"id":"s1","base_instructions":{"text":"I"}}`),
		codexLineStr("turn_context", `{"model":"gpt-5.5","effort":"high","summary":"auto"}`),
		codexLineStr("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}`),
		codexLineStr("response_item", `{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"}`),
		codexLineStr("response_item", `{"type":"custom_tool_call","name":"apply_patch","input":"p","call_id":"c2"}`),
		codexLineStr("response_item", `{"type":"function_call_output","call_id":"c9","output":"orphan"}`),
		codexLineStr("response_item", `{"type":"function_call_output","call_id":"c2","output":"wrong kind"}`),
		codexLineStr("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"stop"}]}`),
		codexLineStr("response_item", `{"type":"reasoning","summary":[],"encrypted_content":"R1"}`),
		codexLineStr("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"again"}]}`),
		codexLineStr("response_item", `{"type":"ghost_snapshot","ghost_commit":{"id":"g"}}`),
		codexLineStr("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}`),
		codexLineStr("compacted", `{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"summary"}]}]}`),
		codexLineStr("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"after"}]}`),
	)
	s := mustImport(t, "rollout.jsonl", data, FormatCodex)
	if s.Len() != 4 || s.Contexts(Responses) != 2 {
		t.Fatalf("%d requests, %d contexts", s.Len(), s.Contexts(Responses))
	}
	items := func(k int) string { return strings.ReplaceAll(joined(messagesOf(t, s, k, Responses)), "\n", "") }
	want := `{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}` +
		`{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"}{"type":"function_call_output","call_id":"c1","output":"aborted"}` +
		`{"type":"custom_tool_call","name":"apply_patch","input":"p","call_id":"c2"}{"type":"custom_tool_call_output","call_id":"c2","output":"aborted"}` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"stop"}]}`
	if got := items(1); got != want {
		t.Errorf("request 1:\n got %s\nwant %s", got, want)
	}
	if got := items(2); strings.Contains(got, "R1") || !strings.HasSuffix(got, `"again"}]}`) {
		t.Errorf("request 2 keeps the dangling reasoning or lost the user turn: %s", got)
	}
	if got := items(3); got != `{"type":"message","role":"user","content":[{"type":"input_text","text":"summary"}]}` {
		t.Errorf("after the compaction: %s", got)
	}
	if s.Point(3).ContextIn(Responses) != 1 || s.Point(3).Context != 1 {
		t.Errorf("contexts %d %d", s.Point(3).ContextIn(Responses), s.Point(3).Context)
	}
	body, _ := s.Request(0, Responses)
	if !bytes.HasSuffix(body, []byte(`"reasoning":{"effort":"high","summary":"auto"},"store":false,"stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":"s1"}`)) {
		t.Errorf("request members: %s", body)
	}
	checkRequests(t, s)
}

// TestSWEAgentReusedIDs: the OpenAI (native) form keeps reused tool-call ids as the agent sent
// them; the Anthropic form, which rejects a reused tool_use id in one request, renames the later
// call and its result consistently, and validates.
func TestSWEAgentReusedIDs(t *testing.T) {
	doc := `{"history":[
 {"role":"system","content":"SYS","agent":"main"},
 {"role":"user","content":"task","agent":"main"},
 {"role":"assistant","content":"look","action":"ls","tool_calls":[{"function":{"arguments":"{\"command\":\"ls\"}","name":"bash"},"id":"call_same","type":"function"}]},
 {"role":"tool","content":"a","tool_call_ids":["call_same"]},
 {"role":"assistant","content":"again","action":"ls","tool_calls":[{"function":{"arguments":"{\"command\":\"ls -a\"}","name":"bash"},"id":"call_same","type":"function"}]},
 {"role":"tool","content":[{"type":"text","text":"b"}],"tool_call_ids":["call_same"]},
 {"role":"assistant","content":"submit","action":"submit"}
]}`
	s := mustImport(t, "x.traj", []byte(doc), FormatAuto)
	if s.Format != FormatSWEAgent || s.Len() != 3 || s.System() != "SYS" {
		t.Fatalf("%s %d %q", s.Format, s.Len(), s.System())
	}
	for _, p := range []Provider{Anthropic, OpenAI} {
		body, _ := s.Request(2, p)
		want := map[Provider]int{Anthropic: 2, OpenAI: 4}[p]
		if n := bytes.Count(body, []byte(`"call_same"`)); n != want {
			t.Errorf("%s: id occurs %d times, want %d:\n%s", p, n, want, body)
		}
		if p == Anthropic && bytes.Count(body, []byte(`"call_same__2"`)) != 2 {
			t.Errorf("%s: the reused id is not renamed in the call and its result:\n%s", p, body)
		}
		r, err := wire.Parse(wireFormat(p), body)
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.Validate(r); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if s.Stats.RenamedCalls != 1 {
		t.Errorf("RenamedCalls = %d", s.Stats.RenamedCalls)
	}
}

func TestMiniSWEAgentTextTurns(t *testing.T) {
	doc := `{"info":{"config":{"model":{"model_name":"google/gemini-3-pro-preview"}}},"trajectory_format":"mini-swe-agent-1","messages":[
 {"role":"system","content":"SYS"},
 {"role":"user","content":"<pr_description>x</pr_description>"},
 {"role":"assistant","content":"THOUGHT: t\n\n` + "```bash\\nls\\n```" + `","extra":{"response":{"created":1763511374,"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}}},
 {"role":"user","content":"<returncode>1</returncode>\n<output>\nerr</output>"},
 {"role":"assistant","content":"done"}
]}`
	s := mustImport(t, "x.traj.json", []byte(doc), FormatAuto)
	if s.Format != FormatMiniSWEAgent || s.Len() != 2 {
		t.Fatalf("%s %d", s.Format, s.Len())
	}
	if s.Point(0).Model != "google/gemini-3-pro-preview" || !s.Point(0).Time.Equal(time.Unix(1763511374, 0)) {
		t.Errorf("point %+v", s.Point(0))
	}
	if s.Stats.ToolCalls != 1 || s.Stats.FailedResults != 1 {
		t.Errorf("stats %+v", s.Stats)
	}
	m := messagesOf(t, s, 1, OpenAI)
	if len(m) != 4 || string(m[0]) != `{"role":"system","content":"SYS"}` {
		t.Errorf("OpenAI messages:\n%s", joined(m))
	}
}

// TestRequestsShareContextPrefix checks the lazy model: within a context, request k's
// messages are a prefix of request k+1's, and AppendRequest appends.
func TestRequestsShareContextPrefix(t *testing.T) {
	data := lines(piHeader,
		piUser("a", 1), piAsst(`[{"type":"text","text":"b"}]`, "stop", 2),
		piUser("c", 3), piAsst(`[{"type":"text","text":"d"}]`, "stop", 4),
	)
	s := mustImport(t, "p.jsonl", data, FormatPi)
	m0 := messagesOf(t, s, 0, Anthropic)
	m1 := messagesOf(t, s, 1, Anthropic)
	if len(m1) != 3 || string(m0[0]) != string(m1[0]) {
		t.Errorf("not a prefix")
	}
	if s.Point(0).Messages(Anthropic) != 1 || s.Point(1).Messages(Anthropic) != 3 {
		t.Errorf("message counts %d %d", s.Point(0).Messages(Anthropic), s.Point(1).Messages(Anthropic))
	}
	dst, err := s.AppendRequest([]byte("X"), 1, Anthropic)
	if err != nil || dst[0] != 'X' || !json.Valid(dst[1:]) {
		t.Errorf("AppendRequest: %v %q", err, dst)
	}
	if _, err := s.Request(0, OpenAI); !errors.Is(err, ErrProvider) {
		t.Errorf("OpenAI form of a pi session: %v, want ErrProvider", err)
	}
	if _, err := s.Request(5, Anthropic); err == nil {
		t.Errorf("out of range request: no error")
	}
	env, err := AppendEnvelope(nil, s, 1, Anthropic)
	if err != nil {
		t.Fatal(err)
	}
	var e Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatalf("envelope: %v\n%s", err, env)
	}
	body, _ := s.Request(1, Anthropic)
	if e.Index != 1 || e.Model != "claude-opus-4-5" || e.Time == nil || !bytes.Equal(e.Body, body) {
		t.Errorf("envelope %+v", e)
	}
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name, data string
		want       Format
	}{
		{"a.jsonl", piHeader + "\n", FormatPi},
		{"a.jsonl", `{"type":"file-history-snapshot","messageId":"x"}` + "\n", FormatClaudeCode},
		{"a.jsonl", `{"timestamp":"t","type":"session_meta","payload":{}}` + "\n", FormatCodex},
		{"a.traj", "{\n \"history\": []\n}", FormatSWEAgent},
		{"a.traj.json", "{\n \"messages\": []\n}", FormatMiniSWEAgent},
		{"a.json", `{"trajectory":[],"history":[]}`, FormatSWEAgent},
		{"headerless.jsonl", `{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}` + "\n", FormatPi},
		{"v1-headerless.jsonl", `{"type":"model_change","provider":"anthropic","modelId":"m"}` + "\n", FormatPi},
		{"export.json", "{\n  \"info\": {\"id\": \"ses_1\"},\n  \"messages\": [{\"info\": {}, \"parts\": []}]\n}", FormatOpencode},
		{"msg_1.json", `{"id":"msg_1","sessionID":"ses_1","role":"user"}`, FormatOpencode},
		{"session-1.json", "{\n  \"sessionId\": \"s\",\n  \"projectHash\": \"h\",\n  \"messages\": []\n}", FormatGeminiCLI},
		{"session-1.jsonl", `{"sessionId":"s","projectHash":"h","startTime":"t"}` + "\n", FormatGeminiCLI},
		{"session-2.jsonl", `{"id":"x","timestamp":"t","type":"gemini","content":"hi"}` + "\n", FormatGeminiCLI},
		{"session-3.jsonl", `{"id":"x","timestamp":"t","type":"user","content":[{"text":"hi"}]}` + "\n", FormatGeminiCLI},
	}
	for _, c := range cases {
		got, err := Detect(c.name, []byte(c.data))
		if err != nil || got != c.want {
			t.Errorf("Detect(%s, %.30q) = %s, %v; want %s", c.name, c.data, got, err, c.want)
		}
	}
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		data   string
		line   int
		path   string
		is     error
		msg    string
	}{
		{"empty.jsonl", FormatAuto, "", 1, "", ErrEmpty, "empty session file"},
		{"blank.jsonl", FormatPi, "\n\n  \n", 1, "", ErrEmpty, "empty session file"},
		{"trunc.jsonl", FormatAuto, piHeader + "\n" + `{"type":"message","message":{"role":"user","content":"hi"`, 2, "", nil, "truncated JSON record"},
		{"types.jsonl", FormatAuto, piHeader + "\n" + `{"type":"message","message":{"role":5}}`, 2, "message.role", nil, "wrong type: got JSON number, want string"},
		{"garbage.jsonl", FormatPi, piHeader + "\n" + piUser("a", 1) + "\n" + `not json` + "\n", 3, "", nil, "invalid JSON"},
		{"dup.jsonl", FormatPi, `{"type":"session","version":3,"id":"s","cwd":"/w"}` + "\n" + `{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}` + "\n" + `{"type":"message","id":"a","parentId":"a","message":{"role":"user","content":"y"}}` + "\n", 3, "id", nil, "duplicate entry id"},
		{"notpi.jsonl", FormatPi, `{"type":"message","message":{"role":"user","content":"x"}}` + "\n", 0, "", ErrNoRequests, "no model responses"},
		{"cc.jsonl", FormatClaudeCode, `{"type":"user","uuid":"u","message":{"role":"user","content":"x"}}` + "\n" + `{"type":"assistant","uuid":"a","message":{"role":"assistant","id":"m","content":{"type":"text"}}}` + "\n", 2, "message.content", nil, "wrong type"},
		{"cc2.jsonl", FormatClaudeCode, `{"type":"assistant","uuid":"a","timestamp":7}` + "\n", 1, "timestamp", nil, "wrong type"},
		{"codex.jsonl", FormatCodex, codexLineStr("response_item", `{"type":"function_call","name":"x","arguments":{"a":1},"call_id":"c"}`) + "\n", 1, "payload.arguments", nil, "not a JSON string"},
		{"codex2.jsonl", FormatCodex, codexLineStr("response_item", `{"type":"message","role":"user","content":7}`) + "\n", 1, "payload.content", nil, "wrong type"},
		{"x.traj", FormatSWEAgent, "{\n\"history\": [\n{\"role\": \"user\", \"content\": \"a\"},\n{\"role\": 3}\n]}", 4, "history[1]", nil, "wrong type"},
		{"y.traj", FormatSWEAgent, "{\n\"history\": [\n{\"role\": \"user\",", 3, "", nil, "truncated JSON document"},
		{"z.traj.json", FormatMiniSWEAgent, "{\"messages\": []}", 0, "messages", ErrEmpty, "empty session file"},
		{"n.traj.json", FormatMiniSWEAgent, "{\"messages\": [{\"role\":\"user\",\"content\":\"x\"}]}", 0, "", ErrNoRequests, "no model responses"},
		{"q.jsonl", FormatAuto, `{"hello":"world"}` + "\n", 0, "", ErrUnknownFormat, "unknown transcript format (supported: pi, claude-code, codex, swe-agent, mini-swe-agent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ImportWith(c.name, []byte(c.data), Options{Format: c.format, Strict: true})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *ParseError", err, err)
			}
			if pe.File != c.name || pe.Line != c.line || pe.Path != c.path {
				t.Errorf("got file %q line %d path %q; want %q %d %q (%v)", pe.File, pe.Line, pe.Path, c.name, c.line, c.path, err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), c.name) {
				t.Errorf("message %q lacks %q or the file name", err.Error(), c.msg)
			}
		})
	}
}

func TestConcatenatedRecordsOnOneLine(t *testing.T) {
	data := []byte(piHeader + "\n" + piUser("a", 1) + "\n" + piAsst(`[{"type":"text","text":"b"}]`, "stop", 2) + piUser("c", 3) + "\n" + piAsst(`[{"type":"text","text":"d"}]`, "stop", 4) + "\n")
	s := mustImport(t, "p.jsonl", data, FormatPi)
	if s.Len() != 2 || s.Point(1).Line != 4 {
		t.Fatalf("%d requests, line %d", s.Len(), s.Point(1).Line)
	}
	if got := joined(messagesOf(t, s, 1, Anthropic)); !strings.Contains(got, `"c"`) {
		t.Errorf("second record of the line lost:\n%s", got)
	}
}

func TestWriteEnvelopes(t *testing.T) {
	data := lines(piHeader,
		piUser("a", 1), piAsst(`[{"type":"text","text":"b"}]`, "stop", 2),
		piUser("c", 3), piAsst(`[{"type":"text","text":"d"}]`, "stop", 4),
	)
	s := mustImport(t, "p.jsonl", data, FormatPi)
	var buf bytes.Buffer
	calls := 0
	if err := WriteEnvelopes(&buf, s, Anthropic, func(done, total int) {
		calls++
		if done != calls || total != 2 {
			t.Errorf("progress(%d, %d)", done, total)
		}
	}); err != nil {
		t.Fatal(err)
	}
	out := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(out) != 2 || calls != 2 {
		t.Fatalf("%d lines, %d progress calls", len(out), calls)
	}
	for k, l := range out {
		var e Envelope
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %d: %v", k, err)
		}
		body, _ := s.Request(k, Anthropic)
		if e.Index != k || e.Provider != Anthropic || !bytes.Equal(e.Body, body) {
			t.Errorf("line %d: %+v", k, e)
		}
	}
	if err := WriteEnvelopes(&buf, s, OpenAI, nil); !errors.Is(err, ErrProvider) {
		t.Errorf("OpenAI envelopes of a pi session: %v", err)
	}
}

func TestClaudeCodeParentCycle(t *testing.T) {
	// A parent chain that loops through UI records must not hang the rewind detection.
	data := lines(
		`{"type":"progress","uuid":"p1","parentUuid":"p2"}`,
		`{"type":"progress","uuid":"p2","parentUuid":"p1"}`,
		ccRec("user", "u1", "p1", `{"role":"user","content":"hi"}`),
		ccRec("assistant", "a1", "u1", ccAsst("msg_1", `{"type":"text","text":"yo"}`)),
		ccRec("user", "u2", "p2", `{"role":"user","content":"again"}`),
		ccRec("assistant", "a2", "u2", ccAsst("msg_2", `{"type":"text","text":"yo"}`)),
	)
	s := mustImport(t, "cc.jsonl", data, FormatClaudeCode)
	if s.Len() != 2 {
		t.Fatalf("%d requests", s.Len())
	}
}

// TestObservationsHarness: sessions of agents acting in text name their harness (their
// observations are user messages); tool-calling sessions name none.
func TestObservationsHarness(t *testing.T) {
	for name, want := range map[string]string{
		"mini-swe-agent/v1-text.traj.json":                                             "mini-swe-agent",
		"mini-swe-agent/v2-textbased.traj.json":                                        "mini-swe-agent",
		"mini-swe-agent/v2-toolcalls.traj.json":                                        "",
		"mini-swe-agent/v2-responses.traj.json":                                        "",
		"swe-agent/units__text-actions.traj":                                           "swe-agent",
		"swe-agent/units__function-calling.traj":                                       "",
		"codex/rollout-2026-05-11T11-00-00-019e1625-0000-7000-8000-000000000001.jsonl": "",
	} {
		s, err := ImportFile(filepath.Join("testdata", "transcripts", name), FormatAuto)
		if err != nil {
			t.Fatal(err)
		}
		if s.Observations != want {
			t.Errorf("%s: %q, want %q", name, s.Observations, want)
		}
	}
}
