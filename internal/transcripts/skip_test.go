package transcripts

import (
	"errors"
	"strings"
	"testing"
)

// TestMalformedRecordsAreSkipped: one bad record never loses a session. A lenient import skips
// it with a warning naming the file and line; a strict import fails there.
func TestMalformedRecordsAreSkipped(t *testing.T) {
	badEscape := `{"type":"message","message":{"role":"user","content":"a\*b"}}` // pi's real-world failure
	cases := []struct {
		name     string
		format   Format
		data     string
		requests int
		line     int
		path     string
		msg      string
	}{
		{"pi.jsonl", FormatPi, string(lines(piHeader, piUser("a", 1), badEscape, piAsst(`[{"type":"text","text":"b"}]`, "stop", 2))),
			1, 3, "", "invalid character '*' in string escape code"},
		{"pi-trunc.jsonl", FormatPi, string(lines(piHeader, piUser("a", 1), piAsst(`[{"type":"text","text":"b"}]`, "stop", 2))) + `{"type":"message","message":{"ro`,
			1, 4, "", "truncated JSON record"},
		{"pi-type.jsonl", FormatPi, string(lines(piHeader, piUser("a", 1), `{"type":"message","message":{"role":"assistant","content":{"a":1}}}`, piAsst(`[{"type":"text","text":"b"}]`, "stop", 2))),
			1, 3, "message.content", "wrong type"},
		{"pi-notype.jsonl", FormatPi, string(lines(piHeader, `{"message":{}}`, piUser("a", 1), piAsst(`[{"type":"text","text":"b"}]`, "stop", 2))),
			1, 2, "type", "record has no type"},
		{"pi-dup.jsonl", FormatPi, string(lines(`{"type":"session","version":3,"id":"s","cwd":"/w"}`,
			`{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}`,
			`{"type":"message","id":"a","parentId":"a","message":{"role":"user","content":"y"}}`,
			`{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":"z"}],"stopReason":"stop"}}`)),
			1, 3, "id", "duplicate entry id"},
		{"pi-orphan.jsonl", FormatPi, string(lines(`{"type":"session","version":3,"id":"s","cwd":"/w"}`,
			`{"type":"message","id":"a","parentId":"gone","message":{"role":"user","content":"x"}}`,
			`{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":"z"}],"stopReason":"stop"}}`)),
			1, 2, "parentId", "not found"},
		{"cc.jsonl", FormatClaudeCode, string(lines(
			ccRec("user", "u1", "", `{"role":"user","content":"hi"}`),
			`{"type":"assistant","uuid":"a0","message":{"role":"assistant","id":"m","content":[7]}}`,
			ccRec("assistant", "a1", "u1", ccAsst("msg_1", `{"type":"text","text":"yo"}`)))),
			1, 2, "message.content[0]", "not an object"},
		{"codex.jsonl", FormatCodex, string(lines(
			codexLineStr("response_item", `{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}`),
			codexLineStr("response_item", `{"type":"function_call","name":"x","arguments":{"a":1},"call_id":"c"}`),
			"{oops",
			codexLineStr("response_item", `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}`))),
			1, 2, "payload.arguments", "not a JSON string"},
		{"x.traj", FormatSWEAgent, "{\n\"history\": [\n{\"role\": \"user\", \"content\": \"a\"},\n{\"role\": 3},\n{\"role\": \"assistant\", \"content\": \"b\"}\n]}",
			1, 4, "history[1]", "wrong type"},
		{"y.traj.json", FormatMiniSWEAgent, "{\"messages\": [\n{\"role\":\"system\",\"content\":\"s\"},\n{\"role\":\"user\",\"content\":{\"x\":1}},\n{\"role\":\"user\",\"content\":\"task\"},\n{\"role\":\"assistant\",\"content\":\"b\"}]}",
			1, 3, "messages[1].content", "wrong type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Import(c.name, []byte(c.data), c.format)
			if err != nil {
				t.Fatalf("lenient import failed: %v", err)
			}
			if s.Len() != c.requests || len(s.Warnings) == 0 {
				t.Fatalf("%d requests, warnings %v", s.Len(), s.Warnings)
			}
			w := s.Warnings[0]
			if w.File != c.name || w.Line != c.line || w.Path != c.path || !strings.Contains(w.Error(), c.msg) {
				t.Errorf("warning %q (file %q line %d path %q); want line %d path %q containing %q", w, w.File, w.Line, w.Path, c.line, c.path, c.msg)
			}
			_, err = ImportWith(c.name, []byte(c.data), Options{Format: c.format, Strict: true})
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("strict import: %v; want the error of line %d", err, c.line)
			}
		})
	}
}

// TestAllRecordsMalformed: a file with no good record says so, and why.
func TestAllRecordsMalformed(t *testing.T) {
	_, err := Import("bad.jsonl", []byte("{oops\n{nope\n"), FormatPi)
	if !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "2 malformed records skipped") || !strings.Contains(err.Error(), "bad.jsonl:1:") {
		t.Fatalf("error %v", err)
	}
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != "bad.jsonl" {
		t.Fatalf("not a *ParseError naming the file: %v", err)
	}
}

// TestPiWithoutHeader: a pi session that lost its header line imports as the version its entries
// show (ids: v2/v3, none: v1, whose compaction index still counts the lost header as line 0).
func TestPiWithoutHeader(t *testing.T) {
	v3 := lines(
		`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"first","timestamp":1}}`,
		`{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ans"}],"model":"m","stopReason":"stop","timestamp":2}}`,
		`{"type":"message","id":"a3","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"edited","timestamp":3}}`,
		`{"type":"message","id":"a4","parentId":"a3","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ans2"}],"model":"m","stopReason":"stop","timestamp":4}}`,
	)
	s, err := Import("v3.jsonl", v3, FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != FormatPi || s.Len() != 2 || len(s.Warnings) != 0 {
		t.Fatalf("format %s, %d requests, warnings %v", s.Format, s.Len(), s.Warnings)
	}
	got := joined(messagesOf(t, s, 1, Anthropic))
	if strings.Contains(got, `"ans"`) || !strings.Contains(got, `"edited"`) {
		t.Errorf("branch not followed:\n%s", got)
	}
	v1 := lines(
		piUser("one", 1), // line index 1 (the lost header was 0)
		piAsst(`[{"type":"text","text":"r1"}]`, "stop", 2),
		piUser("two", 3), // index 3
		piAsst(`[{"type":"text","text":"r2"}]`, "stop", 4),
		`{"type":"compaction","summary":"S","firstKeptEntryIndex":3,"tokensBefore":9}`,
		piUser("three", 5),
		piAsst(`[{"type":"text","text":"r3"}]`, "stop", 6),
	)
	s, err = Import("v1.jsonl", v1, FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != FormatPi || s.Len() != 3 || s.Stats.Compactions != 1 {
		t.Fatalf("format %s, %d requests, %d compactions", s.Format, s.Len(), s.Stats.Compactions)
	}
	got = joined(messagesOf(t, s, 2, Anthropic))
	if strings.Contains(got, `"one"`) || !strings.Contains(got, `"two"`) || !strings.Contains(got, `<summary>\nS\n</summary>`) {
		t.Errorf("compacted request:\n%s", got)
	}
}
