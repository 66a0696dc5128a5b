package proxy

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/condense-dev/condense/internal/wire"
)

func jsonStr(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// joinRaw returns prefix, the raw JSON values separated by commas, and suffix.
func joinRaw(prefix string, raws []json.RawMessage, suffix string) []byte {
	var b bytes.Buffer
	b.WriteString(prefix)
	for i, r := range raws {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// parseMessages turns raw message objects into wire messages of format f (Responses: input
// items, or arrays of items, as modelView holds an assistant message).
func parseMessages(f wire.Format, raws []json.RawMessage) ([]*wire.Message, error) {
	prefix := `{"model":"x","messages":[`
	if f == wire.Responses {
		prefix, raws = `{"model":"x","input":[`, spreadItems(raws)
	}
	req, err := wire.Parse(f, joinRaw(prefix, raws, `]}`))
	if err != nil {
		return nil, err
	}
	return req.Messages, nil
}

// spreadItems returns Responses input items and arrays of them as items: an array's elements
// take its place (the separators between them as they are).
func spreadItems(raws []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(raws))
	for _, r := range raws {
		t := bytes.TrimSpace(r)
		if len(t) >= 2 && t[0] == '[' {
			t = bytes.TrimSpace(t[1 : len(t)-1])
			if len(t) == 0 {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}

// parseBlocks turns raw Anthropic content blocks into wire blocks.
func parseBlocks(raws []json.RawMessage) ([]*wire.Block, error) {
	msgs, err := parseMessages(wire.Anthropic, []json.RawMessage{joinRaw(`{"role":"user","content":[`, raws, `]}`)})
	if err != nil {
		return nil, err
	}
	return msgs[0].Blocks, nil
}

// anthropicAssistant returns an Anthropic assistant message of content blocks.
func anthropicAssistant(blocks []json.RawMessage) json.RawMessage {
	return joinRaw(`{"role":"assistant","content":[`, blocks, `]}`)
}

func openAIAssistant(text string, toolCalls []string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"role":"assistant","content":`)
	if text == "" {
		b.WriteString("null")
	} else {
		b.Write(jsonStr(text))
	}
	if len(toolCalls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		b.WriteString(strings.Join(toolCalls, ","))
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.Bytes()
}
