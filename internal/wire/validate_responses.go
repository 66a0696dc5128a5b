package wire

import "strings"

// responsesRoles are the roles a Responses message item may have.
var responsesRoles = map[Role]bool{RoleUser: true, RoleSystem: true, RoleDeveloper: true, RoleAssistant: true}

// validateResponses is Validate for Responses: tool outputs answer earlier calls once, calls
// are answered before the next prompt, reasoning items are followed (docs/design/wire.md).
func validateResponses(r *Request) error {
	calls := make(ledger, len(r.Messages)/2)
	itemIDs := make(map[string]bool, len(r.Messages)/2) // call_ids of model-produced items of any kind
	last := len(r.Messages) - 1
	lastPrompt := -1 // the last message that is neither a tool output nor an assistant message
	for mi, m := range r.Messages {
		switch {
		case m.Role == RoleAssistant:
			if len(m.Blocks) == 0 {
				return verr(RuleEmptyContent, mi, -1, "assistant message has no items")
			}
			for bi, b := range m.Blocks {
				switch b.Kind {
				case KindToolUse:
					if err := calls.call(b, mi, bi); err != nil {
						return err
					}
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
			b, err := calls.result(m, mi, "made earlier")
			if err != nil {
				return err
			}
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
	// A call still open is dangling when a message other than a tool output follows it.
	for _, m := range r.Messages[:max(lastPrompt, 0)] {
		if id, at, ok := calls.dangling(m, lastPrompt); ok && m.Role == RoleAssistant {
			return verr(RuleDanglingCall, at, -1, "call %q has no output before messages[%d]", id, lastPrompt)
		}
	}
	return nil
}
