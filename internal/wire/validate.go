package wire

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxCacheControl is the most cache_control markers a request may carry (tools, system and
// messages together).
const MaxCacheControl = 4

// Validation rule names (ValidationError.Rule).
const (
	RuleRole            = "role"              // unknown role, or (Anthropic) roles do not alternate
	RuleBlockPlacement  = "block-placement"   // a block kind the role may not carry
	RuleOrphanResult    = "orphan-result"     // a result that answers no call of the immediately preceding assistant message
	RuleDuplicateResult = "duplicate-result"  // two results for one call
	RuleDanglingCall    = "dangling-call"     // a call without result although the conversation continues
	RuleDuplicateCallID = "duplicate-call-id" // two tool calls with one id in the request
	RuleCallID          = "call-id"           // an Anthropic tool_use id that is empty or has characters outside [a-zA-Z0-9_-]
	RuleInput           = "input"             // Anthropic tool_use input that is not a JSON object
	RuleEmptyContent    = "empty-content"     // empty message content or empty/whitespace-only text
	RuleCacheControl    = "cache-control"     // more than MaxCacheControl cache_control markers
	RuleNoMessages      = "no-messages"       // the request has no messages
	RuleReasoning       = "reasoning"         // a Responses reasoning item that no item of its assistant message follows
)

// ValidationError is the first provider-validity problem Validate found.
type ValidationError struct {
	Rule    string // one of the Rule… constants
	Message int    // index in Messages, -1 when not tied to a message
	Block   int    // index in the message's Blocks, -1 when not tied to a block
	Msg     string
}

// Error implements error.
func (e *ValidationError) Error() string {
	loc := "request"
	if e.Message >= 0 {
		loc = fmt.Sprintf("messages[%d]", e.Message)
		if e.Block >= 0 {
			loc += fmt.Sprintf(" block %d", e.Block)
		}
	}
	return fmt.Sprintf("wire: invalid request: %s: %s (%s)", loc, e.Msg, e.Rule)
}

func verr(rule string, mi, bi int, format string, args ...any) error {
	return &ValidationError{Rule: rule, Message: mi, Block: bi, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the rules the provider enforces on a request (docs/design/wire.md,
// "Validation"), so that a request it would reject is never sent. It returns nil or a
// *ValidationError.
func Validate(r *Request) error {
	if len(r.Messages) == 0 {
		return verr(RuleNoMessages, -1, -1, "messages must not be empty")
	}
	n := 0 // cache_control markers so far
	for _, t := range r.Tools {
		if t.CacheControl != nil {
			n++
		}
	}
	for _, b := range r.System {
		n += countCC(b)
	}
	for mi, m := range r.Messages {
		for bi, b := range m.Blocks {
			n += countCC(b)
			if n > MaxCacheControl {
				return verr(RuleCacheControl, mi, bi, "more than %d cache_control markers", MaxCacheControl)
			}
		}
	}
	if n > MaxCacheControl {
		return verr(RuleCacheControl, -1, -1, "more than %d cache_control markers", MaxCacheControl)
	}
	if r.Format == OpenAI || r.Format == Responses {
		return validateChat(r)
	}
	return validateAnthropic(r)
}

func countCC(b *Block) int {
	n := 0
	if b.CacheControl != nil {
		n++
	}
	for _, c := range b.Content {
		n += countCC(c)
	}
	return n
}

func validCallID(id string) bool {
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return id != ""
}

// blank reports whether b.Text() is empty or white space, decoding a lazy text (into scratch
// memory) only when its first character that is not white space is non-ASCII or a \u escape.
func (b *Block) blank() bool {
	s := b.text
	if !b.textEsc {
		return strings.TrimSpace(s) == ""
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ':
		case c == '\\' && strings.IndexByte("nrtf", s[i+1]) >= 0: // white space escapes
			i++
		case c == '\\' && s[i+1] == 'u' || c >= utf8.RuneSelf:
			sp := getScratch()
			defer putScratch(sp)
			return strings.TrimSpace(b.peekText(sp)) == ""
		default:
			return false
		}
	}
	return true
}

// assistantOnly are the block kinds (a bit per Kind) only an assistant message may hold.
const assistantOnly = 1<<KindToolUse | 1<<KindServerToolUse | 1<<KindWebSearchToolResult | 1<<KindThinking | 1<<KindRedactedThinking

func validateAnthropic(r *Request) error {
	callIDs := make(map[string]int, len(r.Messages)/2)
	last := len(r.Messages) - 1
	// The tool_use calls of the last assistant message (the next message answers them) and
	// the server_tool_use ids of the current message.
	calls, servers := ledger{}, map[string]bool{}
	var prevRole Role // of the last message other than a mid-conversation system message
	for mi, m := range r.Messages {
		var kinds uint32 // the block kinds (a bit per Kind) the message may hold
		switch m.Role {
		case RoleUser:
			kinds = ^uint32(assistantOnly)
		case RoleAssistant:
			kinds = ^uint32(1 << KindToolResult)
		case RoleSystem: // a mid-conversation system message: text only
			kinds = 1 << KindText
		}
		switch {
		case kinds == 0:
			return verr(RuleRole, mi, -1, "role %q is not allowed in Anthropic messages", m.Role)
		case m.Role == RoleSystem && prevRole != RoleUser:
			return verr(RuleRole, mi, -1, "a system message must directly follow a user message")
		case mi > 0 && prevRole == m.Role:
			return verr(RuleRole, mi, -1, "two consecutive %s messages", m.Role)
		}
		if m.Role != RoleSystem {
			prevRole = m.Role
		}
		finalAssistant := mi == last && m.Role == RoleAssistant
		if len(m.Blocks) == 0 && !finalAssistant {
			return verr(RuleEmptyContent, mi, -1, "message content is empty")
		}
		if m.Role == RoleAssistant {
			clear(calls)
		}
		clear(servers)
		seenOther := false
		for bi, b := range m.Blocks {
			if b.Kind != KindToolResult {
				seenOther = true
			} else if seenOther {
				return verr(RuleBlockPlacement, mi, bi, "tool_result blocks must come before any other content")
			}
			if kinds&(1<<b.Kind) == 0 {
				return verr(RuleBlockPlacement, mi, bi, "%s block in a %s message", b.Type, m.Role)
			}
			switch b.Kind {
			case KindText:
				if b.blank() && !finalAssistant {
					return verr(RuleEmptyContent, mi, bi, "text content must contain non-whitespace text")
				}
				if finalAssistant && bi == len(m.Blocks)-1 && b.text != "" && strings.TrimRight(b.Text(), " \t\r\n") != b.Text() {
					return verr(RuleEmptyContent, mi, bi, "final assistant content must not end with whitespace")
				}
			case KindToolUse, KindServerToolUse:
				if !validCallID(b.ID) {
					return verr(RuleCallID, mi, bi, "tool_use id %q must match [a-zA-Z0-9_-]+", b.ID)
				}
				if prev, dup := callIDs[b.ID]; dup {
					return verr(RuleDuplicateCallID, mi, bi, "tool_use id %q already used in messages[%d]", b.ID, prev)
				}
				callIDs[b.ID] = mi
				if in := skipWS(b.Input, 0); in >= len(b.Input) || b.Input[in] != '{' {
					return verr(RuleInput, mi, bi, "tool_use input must be a JSON object")
				}
				if b.Kind == KindToolUse {
					calls[b.ID] = mi
				} else {
					servers[b.ID] = true
				}
			case KindWebSearchToolResult:
				if !servers[b.ID] {
					return verr(RuleOrphanResult, mi, bi, "%s %q has no server_tool_use before it", b.Type, b.ID)
				}
			case KindToolResult:
				if err := calls.answer(b, mi, bi); err != nil {
					return err
				}
				for ci, c := range b.Content {
					if c.Kind == KindText && c.text == "" && len(b.Content) > 1 {
						return verr(RuleEmptyContent, mi, bi, "tool_result content block %d is empty text", ci)
					}
				}
			}
		}
		// Calls of the previous assistant message must all be answered here (a system message
		// never follows an assistant message, so that is the message before).
		if m.Role == RoleUser && len(calls) > 0 {
			if id, at, ok := calls.dangling(r.Messages[mi-1], mi); ok {
				return verr(RuleDanglingCall, at, -1, "tool_use %q has no tool_result in the next message", id)
			}
		}
	}
	return nil
}

// openAIRoles and responsesRoles are the roles an OpenAI chat message and a Responses message
// item (or tool output) may have.
var (
	openAIRoles    = map[Role]bool{RoleSystem: true, RoleDeveloper: true, RoleUser: true, RoleAssistant: true, RoleTool: true, "function": true}
	responsesRoles = map[Role]bool{RoleSystem: true, RoleDeveloper: true, RoleUser: true, RoleAssistant: true, RoleTool: true}
)

// validateChat is Validate for OpenAI and Responses: a tool message answers an open call once
// (OpenAI: of the assistant message its run of tool messages follows), calls are answered
// before the next prompt, reasoning items are followed (docs/design/wire.md).
func validateChat(r *Request) error {
	resp := r.Format == Responses
	roles, n := openAIRoles, 0 // n: how many calls to expect (OpenAI keeps one message's)
	if resp {
		roles, n = responsesRoles, len(r.Messages)/2
	}
	calls := make(ledger, n)
	itemIDs := make(map[string]bool, n)   // ids of the model-produced items other than calls
	last, callAt := len(r.Messages)-1, -1 // callAt: the last assistant message
	lastPrompt := -1                      // the last message that is neither a tool output nor an assistant message
	for mi, m := range r.Messages {
		if !roles[m.Role] && !m.isItem() {
			return verr(RuleRole, mi, -1, "role %q is not allowed in %s messages", m.Role, r.Format)
		}
		if !resp && m.Role != RoleTool && len(calls) > 0 {
			if id, at, ok := calls.dangling(r.Messages[callAt], mi); ok {
				return verr(RuleDanglingCall, at, -1, "tool call %q has no tool message before messages[%d]", id, mi)
			}
			clear(calls)
		}
		switch {
		case m.Role == RoleTool:
			if len(m.Blocks) != 1 || m.Blocks[0].Kind != KindToolResult {
				return verr(RuleEmptyContent, mi, -1, "tool message must carry exactly one tool result")
			}
			b := m.Blocks[0]
			if err := calls.answer(b, mi, 0); err != nil {
				return err
			}
			if !m.hasContent || !resp && len(b.Content) == 0 && !b.ContentString {
				return verr(RuleEmptyContent, mi, 0, "%s message has no content", b.Type)
			}
		case m.Role == RoleAssistant:
			if len(m.Blocks) == 0 && (resp || !m.obj.has("function_call")) {
				return verr(RuleEmptyContent, mi, -1, "assistant message has no content, tool calls or items")
			}
			callAt = mi
			for bi, b := range m.Blocks {
				switch b.Kind {
				case KindToolUse:
					if b.ID == "" {
						return verr(RuleCallID, mi, bi, "tool call without an id")
					}
					if at, ok := calls[b.ID]; ok && at == mi {
						return verr(RuleDuplicateCallID, mi, bi, "tool call id %q used twice in one message", b.ID)
					}
					calls[b.ID] = mi
				case KindReasoning:
					if bi == len(m.Blocks)-1 && mi < last && !r.Messages[mi+1].isItem() {
						return verr(RuleReasoning, mi, bi, "reasoning item without a following item")
					}
				default:
					if b.ID != "" {
						itemIDs[b.ID] = true
					}
				}
			}
		case m.isItem():
			lastPrompt = mi
			b := m.Blocks[0]
			if _, call := calls[b.ID]; b.ID != "" && strings.HasSuffix(b.Type, "_output") && !call && !itemIDs[b.ID] {
				return verr(RuleOrphanResult, mi, 0, "%s %q follows no item with its call_id", b.Type, b.ID)
			}
		default:
			lastPrompt = mi
			if len(m.Blocks) == 0 {
				return verr(RuleEmptyContent, mi, -1, "%s message has no content", m.Role)
			}
		}
	}
	// A Responses call still open is dangling when a message other than a tool output follows
	// it (OpenAI's are checked at that message, and none is left before lastPrompt).
	for _, m := range r.Messages[:max(lastPrompt, 0)] {
		if id, at, ok := calls.dangling(m, lastPrompt); ok {
			return verr(RuleDanglingCall, at, -1, "call %q has no output before messages[%d]", id, lastPrompt)
		}
	}
	return nil
}

// ledger maps the id of each tool call a result may answer to the index of the message
// making it, or to -1 once answered.
type ledger map[string]int

// answer records the result b of messages[mi] (block bi), which must answer an open call (one
// the ledger holds, not answered yet).
func (l ledger) answer(b *Block, mi, bi int) error {
	at, ok := l[b.ID]
	if !ok {
		return verr(RuleOrphanResult, mi, bi, "%s %q answers no open tool call", b.Type, b.ID)
	}
	if at < 0 {
		return verr(RuleDuplicateResult, mi, bi, "second %s for %q", b.Type, b.ID)
	}
	l[b.ID] = -1
	return nil
}

// dangling returns the first open tool call of m, when an assistant message, that was last
// made before messages[before], with the index of that message.
func (l ledger) dangling(m *Message, before int) (string, int, bool) {
	for _, b := range m.Blocks {
		if b.Kind != KindToolUse || m.Role != RoleAssistant {
			continue
		}
		if at, ok := l[b.ID]; ok && at >= 0 && at < before {
			return b.ID, at, true
		}
	}
	return "", 0, false
}
