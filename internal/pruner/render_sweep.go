package pruner

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	"github.com/condense-dev/condense/internal/wire"
)

// sweep is phase 4: a per-turn open set of tool-call ids; every message that is neither an
// assistant turn nor a tool result (and the non-result part of a mixed message) is a barrier
// (Responses: only an assistant turn). Results no open call answers are removed.
func (r *renderer) sweep(msgs []*wire.Message) ([]*wire.Message, bool) {
	open := map[string]bool{}
	var swept []string
	var out []*wire.Message
	for i, m := range msgs {
		if m.Role == wire.RoleAssistant {
			clear(open)
			for _, b := range m.Blocks {
				if b.Kind == wire.KindToolUse && b.ID != "" {
					open[b.ID] = true
				}
			}
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if !hasToolResult(m) {
			if r.v.f != wire.Responses {
				clear(open) // Responses outputs may follow other items (only the call must precede them)
			}
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		// keep is made at the first dropped block (almost every message keeps all of its
		// blocks, and this runs over every message on every request).
		var keep []*wire.Block
		var cc []byte
		barrier := false
		dropped := false
		for j, b := range m.Blocks {
			if b.Kind != wire.KindToolResult {
				barrier = true
			} else if open[b.ID] {
				delete(open, b.ID)
			} else {
				if !dropped {
					keep = append(make([]*wire.Block, 0, len(m.Blocks)-1), m.Blocks[:j]...)
					dropped = true
				}
				swept = append(swept, b.ID)
				if x := blockCC(b); x != nil {
					cc = x
				}
				continue
			}
			if dropped {
				keep = append(keep, b)
			}
		}
		if barrier {
			clear(open)
		}
		if !dropped {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil {
			out = append(make([]*wire.Message, 0, len(msgs)), msgs[:i]...)
		}
		if cc != nil {
			if len(keep) > 0 && keep[len(keep)-1].CacheControl == nil {
				keep[len(keep)-1] = keep[len(keep)-1].WithCacheControl(cc)
				r.res.Stats.CacheMarkersMoved++
			} else if len(out) > 0 {
				prev := out[len(out)-1]
				pb := append([]*wire.Block(nil), prev.Blocks...)
				if len(pb) > 0 && pb[len(pb)-1].CacheControl == nil {
					pb[len(pb)-1] = pb[len(pb)-1].WithCacheControl(cc)
					out[len(out)-1] = prev.WithBlocks(pb)
					r.res.Stats.CacheMarkersMoved++
				}
			}
		}
		if len(keep) > 0 {
			out = append(out, m.WithBlocks(keep))
		}
	}
	if len(swept) == 0 {
		return msgs, false
	}
	r.res.Stats.Swept += len(swept)
	sort.Strings(swept)
	sum := sha256.Sum256([]byte(strings.Join(swept, ",")))
	detail := "swept " + strconv.Itoa(len(swept)) + " orphan toolResult(s): "
	if len(swept) > 5 {
		detail += strings.Join(swept[:5], ", ") + " ... +" + strconv.Itoa(len(swept)-5) + " more"
	} else {
		detail += strings.Join(swept, ", ")
	}
	r.diags = append(r.diags, Diagnostic{Kind: DiagOrphanSweep, Key: hex.EncodeToString(sum[:])[:16], Detail: detail})
	return out, true
}
