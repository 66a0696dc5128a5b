package pruner

// Private adapters for internal/identity and wire.Validate, which are being written
// concurrently; they follow the contract in docs/dev/contracts.md and are replaced by the
// real packages once those land.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/condense-dev/condense/internal/wire"
)

// occurrenceKey mirrors identity.OccurrenceKey: "<id>#<8 hex>".
func occurrenceKey(id, tool string, input []byte, text string) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	var c bytes.Buffer
	if json.Compact(&c, input) == nil {
		h.Write(c.Bytes())
	} else {
		h.Write(input)
	}
	h.Write([]byte{0})
	h.Write([]byte(text))
	var s [32]byte
	return id + "#" + hex.EncodeToString(h.Sum(s[:0])[:4])
}

// msgFingerprints mirrors identity.Fingerprints: content hash plus the ordinal among earlier
// messages of the list with the same hash.
func msgFingerprints(msgs []*wire.Message) []Fingerprint {
	out := make([]Fingerprint, len(msgs))
	seen := map[string]int{}
	for i, m := range msgs {
		sum := sha256.Sum256(m.Raw())
		h := hex.EncodeToString(sum[:12])
		out[i] = Fingerprint{Hash: h, Ordinal: seen[h]}
		seen[h]++
	}
	return out
}

// validate mirrors wire.Validate.
func validate(r *wire.Request) error {
	var prev *wire.Message
	seen := map[string]bool{}
	markers := 0
	for _, b := range r.System {
		if b.CacheControl != nil {
			markers++
		}
	}
	pending := map[string]bool{}
	for i, m := range r.Messages {
		if len(m.Blocks) == 0 && m.Role != wire.RoleAssistant {
			return fmt.Errorf("message %d: empty content", i)
		}
		if r.Format == wire.Anthropic && prev != nil && prev.Role == m.Role {
			return fmt.Errorf("message %d: role %s repeats", i, m.Role)
		}
		calls := map[string]bool{}
		if prev != nil && prev.Role == wire.RoleAssistant {
			for _, b := range prev.Blocks {
				if b.Kind == wire.KindToolUse {
					calls[b.ID] = true
				}
			}
		}
		if r.Format == wire.OpenAI && m.Role == wire.RoleTool {
			// tool messages follow the assistant or other tool messages of the same turn
			j := i - 1
			for j >= 0 && r.Messages[j].Role == wire.RoleTool {
				j--
			}
			calls = map[string]bool{}
			if j >= 0 && r.Messages[j].Role == wire.RoleAssistant {
				for _, b := range r.Messages[j].Blocks {
					if b.Kind == wire.KindToolUse {
						calls[b.ID] = true
					}
				}
			}
		}
		for _, b := range m.Blocks {
			if b.CacheControl != nil {
				markers++
			}
			for _, c := range b.Content {
				if c.CacheControl != nil {
					markers++
				}
			}
			if b.Kind == wire.KindToolResult {
				if !calls[b.ID] {
					return fmt.Errorf("message %d: tool result %q answers no call of the preceding assistant", i, b.ID)
				}
				if seen[b.ID+"@"+fmt.Sprint(i)] {
					return fmt.Errorf("message %d: duplicate tool result %q", i, b.ID)
				}
				seen[b.ID+"@"+fmt.Sprint(i)] = true
				delete(pending, b.ID)
			}
		}
		if m.Role == wire.RoleAssistant {
			if len(pending) > 0 {
				return errors.New("dangling tool calls before a later turn")
			}
			for _, b := range m.Blocks {
				if b.Kind == wire.KindToolUse {
					pending[b.ID] = true
				}
			}
		} else if m.Role == wire.RoleUser && !hasToolResult(m) && len(pending) > 0 {
			return fmt.Errorf("message %d: dangling tool calls before a user turn", i)
		}
		prev = m
	}
	if markers > 4 {
		return fmt.Errorf("%d cache_control markers", markers)
	}
	return nil
}
