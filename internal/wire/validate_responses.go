package wire

import "strings"

// responsesRoles are the roles a Responses message item may have.
var responsesRoles = map[Role]bool{RoleUser: true, RoleSystem: true, RoleDeveloper: true, RoleAssistant: true}

// validateResponses is Validate for Responses: tool outputs answer earlier calls once, calls
// are answered before the next prompt, reasoning items are followed (docs/design/wire.md).
func validateResponses(r *Request) error {
	const (
		open     = 1
		answered = 2
	)
	state := make(map[string]int8, len(r.Messages)/2)
	callAt := make(map[string]int, len(r.Messages)/2)
	calls := make([]string, 0, len(r.Messages)/2)       // call ids in order
	itemIDs := make(map[string]bool, len(r.Messages)/2) // call_ids of model-produced items of any kind
	last := len(r.Messages) - 1
	lastPrompt := -1 // the last message that is neither a tool output nor an assistant message
	var inMsg map[string]bool
	for mi, m := range r.Messages {
		switch {
		case m.Role == RoleAssistant:
			if len(m.Blocks) == 0 {
				return verr(RuleEmptyContent, mi, -1, "assistant message has no items")
			}
			clear(inMsg)
			for bi, b := range m.Blocks {
				switch b.Kind {
				case KindToolUse:
					if b.ID == "" {
						return verr(RuleCallID, mi, bi, "%s without call_id", b.Type)
					}
					if inMsg[b.ID] {
						return verr(RuleDuplicateCallID, mi, bi, "call_id %q used twice in one assistant message", b.ID)
					}
					if inMsg == nil {
						inMsg = map[string]bool{}
					}
					inMsg[b.ID] = true
					state[b.ID], callAt[b.ID] = open, mi
					calls = append(calls, b.ID)
					itemIDs[b.ID] = true
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
		case m.Role == RoleTool:
			if len(m.Blocks) != 1 || m.Blocks[0].Kind != KindToolResult {
				return verr(RuleEmptyContent, mi, -1, "tool message must carry exactly one tool output")
			}
			b := m.Blocks[0]
			switch state[b.ID] {
			case 0:
				return verr(RuleOrphanResult, mi, 0, "%s %q answers no earlier call", b.Type, b.ID)
			case answered:
				return verr(RuleDuplicateResult, mi, 0, "second %s for %q", b.Type, b.ID)
			}
			state[b.ID] = answered
			if !m.hasContent {
				return verr(RuleEmptyContent, mi, 0, "%s has no output", b.Type)
			}
		case m.isItem():
			lastPrompt = mi
			if b := m.Blocks[0]; b.ID != "" && strings.HasSuffix(b.Type, "_output") && !itemIDs[b.ID] {
				return verr(RuleOrphanResult, mi, 0, "%s %q follows no item with its call_id", b.Type, b.ID)
			}
		default:
			lastPrompt = mi
			if !responsesRoles[m.Role] {
				return verr(RuleRole, mi, -1, "role %q is not a Responses message role", m.Role)
			}
			if len(m.Blocks) == 0 {
				return verr(RuleEmptyContent, mi, -1, "%s message has no content", m.Role)
			}
		}
	}
	// A call still open: dangling when a message other than a tool output follows it (the
	// message after an assistant message is never an assistant message).
	for _, id := range calls {
		if state[id] == open && lastPrompt > callAt[id] {
			return verr(RuleDanglingCall, callAt[id], -1, "call %q has no output before messages[%d]", id, lastPrompt)
		}
	}
	return nil
}
