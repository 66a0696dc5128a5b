package transcripts

import (
	"encoding/json"
	"fmt"
	"strings"
)

// checkAnthropic checks the provider-validity rules the importers promise for an Anthropic
// Messages body: first message from the user, roles alternate, no empty content or blank
// text blocks, every tool_result answers a tool_use of the immediately preceding assistant
// message (once), every tool_use of an assistant message followed by a user message is
// answered there, tool results come before other blocks, and the body ends with a user
// message.
func checkAnthropic(body []byte) error {
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("body is not valid JSON: %v", err)
	}
	if req.Model == "" || req.MaxTokens <= 0 {
		return fmt.Errorf("missing model or max_tokens")
	}
	if len(req.Messages) == 0 {
		return fmt.Errorf("no messages")
	}
	tools := map[string]bool{}
	for _, t := range req.Tools {
		tools[t.Name] = true
	}
	var prevCalls []string
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			return fmt.Errorf("message %d: role %q, want %q (alternation)", i, m.Role, want)
		}
		var blocks []map[string]json.RawMessage
		if s, ok := rawString(m.Content); ok {
			if strings.TrimSpace(s) == "" {
				return fmt.Errorf("message %d: blank string content", i)
			}
			blocks = nil
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return fmt.Errorf("message %d: content: %v", i, err)
		} else if len(blocks) == 0 {
			return fmt.Errorf("message %d: empty content", i)
		}
		answered := map[string]bool{}
		var calls []string
		seenOther := false
		for j, bl := range blocks {
			typ, _ := rawString(bl["type"])
			switch typ {
			case "text":
				t, _ := rawString(bl["text"])
				if strings.TrimSpace(t) == "" {
					return fmt.Errorf("message %d block %d: blank text", i, j)
				}
				seenOther = true
			case "tool_use":
				id, _ := rawString(bl["id"])
				name, _ := rawString(bl["name"])
				if !validToolID(id) {
					return fmt.Errorf("message %d block %d: invalid tool_use id %q", i, j, id)
				}
				if !tools[name] {
					return fmt.Errorf("message %d block %d: tool %q not in tools", i, j, name)
				}
				calls = append(calls, id)
			case "tool_result":
				if m.Role != "user" {
					return fmt.Errorf("message %d block %d: tool_result in %s message", i, j, m.Role)
				}
				if seenOther {
					return fmt.Errorf("message %d block %d: tool_result after other content", i, j)
				}
				id, _ := rawString(bl["tool_use_id"])
				found := false
				for _, c := range prevCalls {
					if c == id {
						found = true
					}
				}
				if !found {
					return fmt.Errorf("message %d block %d: tool_result %q answers no tool_use of the preceding message", i, j, id)
				}
				if answered[id] {
					return fmt.Errorf("message %d block %d: tool_result %q answered twice", i, j, id)
				}
				answered[id] = true
			default:
				seenOther = true
			}
		}
		if m.Role == "user" {
			for _, c := range prevCalls {
				if !answered[c] {
					return fmt.Errorf("message %d: tool_use %q of the preceding message has no result", i, c)
				}
			}
			prevCalls = nil
		} else {
			prevCalls = calls
		}
	}
	// A request may end with an assistant message without tool calls: an Anthropic prefill,
	// which the response continues (pi_large-session has one: two assistant entries in a row).
	if req.Messages[len(req.Messages)-1].Role != "user" && len(prevCalls) > 0 {
		return fmt.Errorf("last message is an assistant message with unanswered tool calls")
	}
	return nil
}

// checkOpenAI checks an OpenAI Chat Completions body: tool messages directly follow the
// assistant message whose tool_calls they answer (each call answered once, before any other
// message), no empty user content, and the body ends with a user or tool message.
func checkOpenAI(body []byte) error {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("body is not valid JSON: %v", err)
	}
	if req.Model == "" || len(req.Messages) == 0 {
		return fmt.Errorf("missing model or messages")
	}
	pending := map[string]bool{}
	for i, m := range req.Messages {
		switch m.Role {
		case "tool":
			if !pending[m.ToolCallID] {
				return fmt.Errorf("message %d: tool message %q answers no open call", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
			continue
		}
		if len(pending) > 0 {
			return fmt.Errorf("message %d (%s): %d tool calls unanswered", i, m.Role, len(pending))
		}
		switch m.Role {
		case "assistant":
			if isNull(m.Content) && len(m.ToolCalls) == 0 {
				return fmt.Errorf("message %d: empty assistant message", i)
			}
			for _, c := range m.ToolCalls {
				if c.Type != "function" || c.Function.Name == "" {
					return fmt.Errorf("message %d: bad tool call %+v", i, c)
				}
				pending[c.ID] = true
			}
		case "user", "system", "developer":
			if s, ok := rawString(m.Content); ok && strings.TrimSpace(s) == "" {
				return fmt.Errorf("message %d: blank content", i)
			}
		default:
			return fmt.Errorf("message %d: unexpected role %q", i, m.Role)
		}
	}
	last := req.Messages[len(req.Messages)-1].Role
	if last != "user" && last != "tool" {
		return fmt.Errorf("last message is from %s", last)
	}
	return nil
}
