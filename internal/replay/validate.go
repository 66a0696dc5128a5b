package replay

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/cost"
)

// ErrInvalidRequest is wrapped by every error Validate returns.
var ErrInvalidRequest = errors.New("invalid provider request")

// InvalidError says why a provider would reject a request and where.
type InvalidError struct {
	// Message is the 0-based message index (-1 for request-level problems).
	Message int
	// Msg explains the problem.
	Msg string
}

func (e *InvalidError) Error() string {
	if e.Message < 0 {
		return "invalid provider request: " + e.Msg
	}
	return fmt.Sprintf("invalid provider request: messages[%d]: %s", e.Message, e.Msg)
}

// Unwrap returns ErrInvalidRequest.
func (e *InvalidError) Unwrap() error { return ErrInvalidRequest }

// Validate checks the provider rules a rewritten request must keep: valid JSON with a
// messages array; every tool result answers a tool call of the immediately preceding assistant
// message, once; every tool call is answered before the conversation moves on; Anthropic roles
// alternate user/assistant and start with user, every message has content and there are at
// most 4 cache_control markers.
func Validate(f cost.WireFormat, body []byte) error {
	if !gjson.ValidBytes(body) {
		return &InvalidError{Message: -1, Msg: "body is not valid JSON"}
	}
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return &InvalidError{Message: -1, Msg: "no messages array"}
	}
	if f == cost.OpenAI {
		return validateOpenAI(msgs.Array())
	}
	return validateAnthropic(body, msgs.Array())
}

func validateAnthropic(body []byte, msgs []gjson.Result) error {
	markers := 0
	count := func(v gjson.Result) {
		if cc := v.Get("cache_control"); cc.Exists() && cc.Type != gjson.Null {
			markers++
		}
	}
	gjson.GetBytes(body, "tools").ForEach(func(_, t gjson.Result) bool { count(t); return true })
	gjson.GetBytes(body, "system").ForEach(func(_, b gjson.Result) bool { count(b); return true })
	if len(msgs) == 0 {
		return &InvalidError{Message: -1, Msg: "messages is empty"}
	}
	var pending map[string]bool // tool_use ids of the previous assistant message awaiting results
	for i, m := range msgs {
		role := m.Get("role").Str
		if role != "user" && role != "assistant" {
			return &InvalidError{Message: i, Msg: fmt.Sprintf("role %q", role)}
		}
		if i == 0 && role != "user" {
			return &InvalidError{Message: i, Msg: "first message is not a user message"}
		}
		if i > 0 && msgs[i-1].Get("role").Str == role {
			return &InvalidError{Message: i, Msg: "two consecutive " + role + " messages"}
		}
		content := m.Get("content")
		var blocks []gjson.Result
		switch {
		case content.Type == gjson.String:
			if content.Str == "" {
				return &InvalidError{Message: i, Msg: "empty content"}
			}
		case content.IsArray():
			blocks = content.Array()
			if len(blocks) == 0 {
				return &InvalidError{Message: i, Msg: "empty content"}
			}
		default:
			return &InvalidError{Message: i, Msg: "content is neither a string nor an array"}
		}
		uses := map[string]bool{}
		answered := map[string]bool{}
		for j, b := range blocks {
			count(b)
			switch b.Get("type").Str {
			case "tool_use":
				if role != "assistant" {
					return &InvalidError{Message: i, Msg: fmt.Sprintf("content[%d]: tool_use in a user message", j)}
				}
				id := b.Get("id").Str
				if id == "" || uses[id] {
					return &InvalidError{Message: i, Msg: fmt.Sprintf("content[%d]: missing or duplicate tool_use id %q", j, id)}
				}
				uses[id] = true
			case "tool_result":
				if role != "user" {
					return &InvalidError{Message: i, Msg: fmt.Sprintf("content[%d]: tool_result in an assistant message", j)}
				}
				id := b.Get("tool_use_id").Str
				if !pending[id] {
					return &InvalidError{Message: i, Msg: fmt.Sprintf("content[%d]: tool_result %q answers no tool_use of the preceding assistant message", j, id)}
				}
				if answered[id] {
					return &InvalidError{Message: i, Msg: fmt.Sprintf("content[%d]: duplicate tool_result %q", j, id)}
				}
				answered[id] = true
			case "text":
				if b.Get("text").Str == "" {
					return &InvalidError{Message: i, Msg: fmt.Sprintf("content[%d]: empty text block", j)}
				}
			}
		}
		if role == "user" && len(pending) > 0 {
			for id := range pending {
				if !answered[id] {
					return &InvalidError{Message: i, Msg: fmt.Sprintf("tool_use %q of the preceding assistant message has no tool_result", id)}
				}
			}
		}
		if role == "assistant" {
			pending = uses
		} else {
			pending = nil
		}
	}
	if markers > 4 {
		return &InvalidError{Message: -1, Msg: fmt.Sprintf("%d cache_control markers (at most 4)", markers)}
	}
	return nil
}

func validateOpenAI(msgs []gjson.Result) error {
	var pending map[string]bool
	for i, m := range msgs {
		role := m.Get("role").Str
		if role == "" {
			return &InvalidError{Message: i, Msg: "missing role"}
		}
		if role == "tool" {
			id := m.Get("tool_call_id").Str
			if !pending[id] {
				return &InvalidError{Message: i, Msg: fmt.Sprintf("tool message %q answers no pending tool call", id)}
			}
			delete(pending, id)
			continue
		}
		if len(pending) > 0 {
			for id := range pending {
				return &InvalidError{Message: i, Msg: fmt.Sprintf("tool call %q has no tool message", id)}
			}
		}
		pending = nil
		if role == "assistant" {
			calls := m.Get("tool_calls").Array()
			if len(calls) > 0 {
				pending = map[string]bool{}
				for _, c := range calls {
					id := c.Get("id").Str
					if id == "" || pending[id] {
						return &InvalidError{Message: i, Msg: fmt.Sprintf("missing or duplicate tool call id %q", id)}
					}
					pending[id] = true
				}
			}
		}
	}
	return nil
}
