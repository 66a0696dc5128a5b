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
	if err := validateCacheControl(r); err != nil {
		return err
	}
	switch r.Format {
	case OpenAI:
		return validateOpenAI(r)
	case Responses:
		return validateResponses(r)
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

func validateCacheControl(r *Request) error {
	n := 0
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
	return nil
}

func validCallID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// blank is isBlank(b.Text()), decoding a lazy text (into scratch memory) only when its first
// character that is not white space is non-ASCII or a \u escape.
func (b *Block) blank() bool {
	s := b.text
	if !b.textEsc {
		return isBlank(s)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ':
		case c == '\\' && strings.IndexByte("nrtf", s[i+1]) >= 0: // white space escapes
			i++
		case c == '\\' && s[i+1] == 'u' || c >= utf8.RuneSelf:
			sp := getScratch()
			defer putScratch(sp)
			return isBlank(b.peekText(sp))
		default:
			return false
		}
	}
	return true
}

// validateMidSystem checks a mid-conversation system message (messages[mi], role system): it
// directly follows a user message, or another system message that does, and holds text only.
func validateMidSystem(r *Request, mi int) error {
	prev := mi - 1
	for prev >= 0 && r.Messages[prev].Role == RoleSystem {
		prev--
	}
	if prev < 0 || r.Messages[prev].Role != RoleUser {
		return verr(RuleRole, mi, -1, "a system message must directly follow a user message")
	}
	m := r.Messages[mi]
	if len(m.Blocks) == 0 {
		return verr(RuleEmptyContent, mi, -1, "message content is empty")
	}
	for bi, b := range m.Blocks {
		if b.Kind != KindText {
			return verr(RuleBlockPlacement, mi, bi, "%s block in a system message (text only)", b.Type)
		}
		if b.blank() {
			return verr(RuleEmptyContent, mi, bi, "text content must contain non-whitespace text")
		}
	}
	return nil
}

func validateAnthropic(r *Request) error {
	callIDs := make(map[string]int, len(r.Messages)/2)
	last := len(r.Messages) - 1
	var prevCalls map[string]bool // tool_use ids of the previous message (when assistant)
	// The per-message sets are cleared and reused (two for calls, as the previous message's
	// stay in use): a request has hundreds of messages, and this runs on every render.
	callSets := [2]map[string]bool{{}, {}}
	answered, servers := map[string]bool{}, map[string]bool{}
	var prevRole Role // of the last message other than a mid-conversation system message
	for mi, m := range r.Messages {
		if m.Role == RoleSystem {
			if err := validateMidSystem(r, mi); err != nil {
				return err
			}
			continue
		}
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return verr(RuleRole, mi, -1, "role %q is not allowed in Anthropic messages", m.Role)
		}
		if mi > 0 && prevRole == m.Role {
			return verr(RuleRole, mi, -1, "two consecutive %s messages", m.Role)
		}
		prevRole = m.Role
		finalAssistant := mi == last && m.Role == RoleAssistant
		if len(m.Blocks) == 0 && !finalAssistant {
			return verr(RuleEmptyContent, mi, -1, "message content is empty")
		}
		calls := callSets[mi%2]
		clear(calls)
		clear(answered)
		clear(servers)
		seenOther := false
		for bi, b := range m.Blocks {
			if b.Kind == KindToolResult && seenOther && m.Role == RoleUser {
				return verr(RuleBlockPlacement, mi, bi, "tool_result blocks must come before any other content")
			}
			if b.Kind != KindToolResult {
				seenOther = true
			}
			switch b.Kind {
			case KindToolUse, KindServerToolUse, KindWebSearchToolResult, KindThinking, KindRedactedThinking:
				if m.Role != RoleAssistant {
					return verr(RuleBlockPlacement, mi, bi, "%s block in a %s message", b.Type, m.Role)
				}
			}
			switch b.Kind {
			case KindText:
				if b.blank() && !finalAssistant {
					return verr(RuleEmptyContent, mi, bi, "text content must contain non-whitespace text")
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
					calls[b.ID] = true
				} else {
					servers[b.ID] = true
				}
			case KindWebSearchToolResult:
				if !servers[b.ID] {
					return verr(RuleOrphanResult, mi, bi, "%s %q has no server_tool_use before it", b.Type, b.ID)
				}
			case KindToolResult:
				if m.Role != RoleUser {
					return verr(RuleBlockPlacement, mi, bi, "tool_result block in a %s message", m.Role)
				}
				if !prevCalls[b.ID] {
					return verr(RuleOrphanResult, mi, bi, "tool_result %q answers no tool_use of the previous message", b.ID)
				}
				if answered[b.ID] {
					return verr(RuleDuplicateResult, mi, bi, "second tool_result for %q", b.ID)
				}
				answered[b.ID] = true
				for ci, c := range b.Content {
					if c.Kind == KindText && c.text == "" && len(b.Content) > 1 {
						return verr(RuleEmptyContent, mi, bi, "tool_result content block %d is empty text", ci)
					}
				}
			}
		}
		if finalAssistant && len(m.Blocks) > 0 {
			if lb := m.Blocks[len(m.Blocks)-1]; lb.Kind == KindText && lb.text != "" && strings.TrimRight(lb.Text(), " \t\r\n") != lb.Text() {
				return verr(RuleEmptyContent, mi, len(m.Blocks)-1, "final assistant content must not end with whitespace")
			}
		}
		// Calls of the previous assistant message must all be answered here (a system message
		// never follows an assistant message, so that is the message before).
		if m.Role == RoleUser && len(prevCalls) > 0 {
			for _, b := range r.Messages[mi-1].Blocks {
				if b.Kind == KindToolUse && !answered[b.ID] {
					return verr(RuleDanglingCall, mi-1, -1, "tool_use %q has no tool_result in the next message", b.ID)
				}
			}
		}
		if m.Role == RoleAssistant {
			prevCalls = calls
		} else {
			prevCalls = nil
		}
	}
	return nil
}

var openAIRoles = map[Role]bool{RoleSystem: true, RoleDeveloper: true, RoleUser: true, RoleAssistant: true, RoleTool: true, "function": true}

func validateOpenAI(r *Request) error {
	// The calls of the current assistant turn (hasCalls: it has some) and those still
	// unanswered; both maps are reused from turn to turn.
	var open, turnCalls map[string]bool
	hasCalls := false
	openAt := -1
	for mi, m := range r.Messages {
		if !openAIRoles[m.Role] {
			return verr(RuleRole, mi, -1, "role %q is not an OpenAI chat role", m.Role)
		}
		if m.Role != RoleTool && len(open) > 0 {
			for _, b := range r.Messages[openAt].Blocks {
				if b.Kind == KindToolUse && open[b.ID] {
					return verr(RuleDanglingCall, openAt, -1, "tool_calls id %q has no tool message before messages[%d]", b.ID, mi)
				}
			}
		}
		switch m.Role {
		case RoleTool:
			if len(m.Blocks) != 1 || m.Blocks[0].Kind != KindToolResult {
				return verr(RuleEmptyContent, mi, -1, "tool message must carry exactly one tool result")
			}
			b := m.Blocks[0]
			if !hasCalls {
				return verr(RuleOrphanResult, mi, 0, "tool message %q does not follow an assistant message with tool_calls", b.ID)
			}
			if !turnCalls[b.ID] {
				return verr(RuleOrphanResult, mi, 0, "tool message %q answers no tool_calls id of the preceding assistant message", b.ID)
			}
			if !open[b.ID] {
				return verr(RuleDuplicateResult, mi, 0, "second tool message for %q", b.ID)
			}
			delete(open, b.ID)
			if !m.hasContent || (len(b.Content) == 0 && !b.ContentString) {
				return verr(RuleEmptyContent, mi, 0, "tool message has no content")
			}
		case RoleAssistant:
			hasCalls, openAt = false, mi
			clear(turnCalls)
			clear(open)
			hasText := false
			for bi, b := range m.Blocks {
				if b.Kind != KindToolUse {
					hasText = true
					continue
				}
				if b.ID == "" {
					return verr(RuleCallID, mi, bi, "tool call without id")
				}
				if turnCalls[b.ID] {
					return verr(RuleDuplicateCallID, mi, bi, "tool call id %q used twice in one message", b.ID)
				}
				if turnCalls == nil {
					turnCalls, open = map[string]bool{}, map[string]bool{}
				}
				turnCalls[b.ID], open[b.ID], hasCalls = true, true, true
			}
			if !hasText && !hasCalls {
				if _, ok := m.obj.get("function_call"); !ok {
					return verr(RuleEmptyContent, mi, -1, "assistant message has neither content nor tool_calls")
				}
			}
		default:
			hasCalls = false
			clear(open)
			if len(m.Blocks) == 0 {
				return verr(RuleEmptyContent, mi, -1, "%s message has no content", m.Role)
			}
		}
	}
	return nil
}
