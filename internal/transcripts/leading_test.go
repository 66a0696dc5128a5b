package transcripts

import (
	"strings"
	"testing"
)

// TestLeadingAssistantMessageIsValid: a session that starts with an assistant message (a
// greeting before the first prompt, a Claude Code branch rooted at an assistant record) yields
// requests whose first message is from the assistant. The Anthropic Messages API accepts that
// (see wire.Validate), so the importers keep the message instead of dropping or moving it;
// messagesOf checks every request with wire.Validate.
func TestLeadingAssistantMessageIsValid(t *testing.T) {
	t.Run("pi", func(t *testing.T) {
		data := lines(piHeader,
			piAsst(`[{"type":"text","text":"How can I help?"}]`, "stop", 1),
			piUser("list files", 2),
			piAsst(`[{"type":"toolCall","id":"toolu_1","name":"bash","arguments":{"command":"ls"}}]`, "toolUse", 3),
			piResult("toolu_1", "a.go", false),
			piAsst(`[{"type":"text","text":"one file"}]`, "stop", 4),
		)
		s := mustImport(t, "p.jsonl", data, FormatPi)
		// The greeting has no request before it; the two later responses have.
		if s.Len() != 2 || s.Stats.EmptyRequests != 1 {
			t.Fatalf("Len = %d, EmptyRequests = %d", s.Len(), s.Stats.EmptyRequests)
		}
		for k := 0; k < s.Len(); k++ {
			ms := messagesOf(t, s, k, Anthropic)
			if !strings.HasPrefix(string(ms[0]), `{"role":"assistant","content":`) || !strings.Contains(string(ms[0]), "How can I help?") {
				t.Fatalf("request %d starts with %s", k, ms[0])
			}
		}
	})
	t.Run("claude-code", func(t *testing.T) {
		data := lines(
			ccRec("assistant", "a1", "", ccAsst("msg_1", `{"type":"text","text":"Resuming the task."}`)),
			ccRec("user", "u1", "a1", `{"role":"user","content":"continue"}`),
			ccRec("assistant", "a2", "u1", ccAsst("msg_2", `{"type":"text","text":"Done."}`)),
		)
		s := mustImport(t, "c.jsonl", data, FormatClaudeCode)
		if s.Len() != 1 {
			t.Fatalf("Len = %d", s.Len())
		}
		ms := messagesOf(t, s, 0, Anthropic)
		if len(ms) != 2 || !strings.Contains(string(ms[0]), `"role":"assistant"`) || !strings.Contains(string(ms[0]), "Resuming the task.") {
			t.Fatalf("request 0 = %s", joined(ms))
		}
	})
}
