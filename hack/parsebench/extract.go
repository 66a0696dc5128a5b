package parsebench

import (
	"errors"
	"strings"
	"unsafe"

	"github.com/condense-dev/condense/internal/wire"
)

// Msg is what the proxy needs of one message: its raw byte span in the body, its role and
// its blocks.
type Msg struct {
	Start, End int
	Role       string
	Blocks     []Blk
}

// Blk is one content block, content part, tool call or tool message: its raw span (Start and End
// -1 for a parser that cannot locate raw bytes), type, id it has or answers, tool name, decoded
// text and thinking signature.
type Blk struct {
	Start, End           int
	Type, ID, Name, Text string
	Sig                  string
}

// A Parser turns a body of a format into messages, rejecting what is not valid JSON.
type Parser struct {
	Name  string
	Parse func(f wire.Format, body []byte) ([]Msg, error)
	// Spans is false for a parser that cannot give raw byte spans.
	Spans bool
}

// Parsers returns the parsers compared: wire.Parse (its request converted to messages) and
// the libraries.
func Parsers() []Parser {
	return []Parser{
		{"wire", wireMsgs, true},
		{"sonic-ast", sonicMsgs, true},
		{"simdjson-go", simdMsgs, false},
		{"jsontext", jsontextMsgs, true},
		{"gjson", gjsonMsgs, true},
	}
}

var errInvalid = errors.New("invalid JSON")

// messagesKey is the top-level member holding the transcript.
func messagesKey(f wire.Format) string {
	if f == wire.Responses {
		return "input"
	}
	return "messages"
}

func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// offset returns the offset of s, a substring of body, in body.
func offset(body []byte, s string) int {
	return int(uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(unsafe.SliceData(body))))
}

// fields reads a block object's members into b by the wire model's rules; get(key) is
// consulted for each field the block's type reads.
type fields map[string]string

// finishBlock fills the id, name, text and signature of a block of type b.Type from its
// string members (m) and, for an Anthropic tool result with array content, texts.
func finishBlock(f wire.Format, b *Blk, m fields, texts []string, contentIsString bool) {
	if f == wire.OpenAI {
		if b.Type == "text" {
			b.Text = m["text"]
		}
		return
	}
	switch b.Type {
	case "text":
		b.Text = m["text"]
	case "thinking":
		b.Text, b.Sig = m["thinking"], m["signature"]
	case "tool_use", "server_tool_use":
		b.ID, b.Name = m["id"], m["name"]
	case "tool_result":
		b.ID = m["tool_use_id"]
		if contentIsString {
			b.Text = m["content"]
		} else {
			b.Text = strings.Join(texts, "\n")
		}
	case "web_search_tool_result":
		b.ID = m["tool_use_id"]
	}
}

// assemble sets msg's blocks from its content parts and tool calls as the wire model does:
// an OpenAI tool message is one block spanning the message, with its parts' texts.
func assemble(f wire.Format, msg *Msg, parts, calls []Blk, callID string) {
	if f == wire.OpenAI && msg.Role == "tool" {
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		msg.Blocks = []Blk{{Start: msg.Start, End: msg.End, Type: "tool", ID: callID, Text: strings.Join(texts, "\n")}}
		return
	}
	msg.Blocks = append(parts, calls...)
}

// wireMsgs is wire.Parse, its request read back as messages.
func wireMsgs(f wire.Format, body []byte) ([]Msg, error) {
	r, err := wire.Parse(f, body)
	if err != nil {
		return nil, err
	}
	out := make([]Msg, 0, len(r.Messages))
	for _, m := range r.Messages {
		raw := m.Raw()
		o := offset(body, str(raw))
		msg := Msg{Start: o, End: o + len(raw), Role: string(m.Role)}
		for _, b := range m.Blocks {
			raw := b.Raw()
			o := offset(body, str(raw))
			k := Blk{Start: o, End: o + len(raw), Type: b.Type, ID: b.ID, Text: b.Text(), Sig: b.Signature}
			switch b.Kind {
			case wire.KindToolResult:
				k.Text = b.ResultText()
			case wire.KindToolUse, wire.KindServerToolUse:
				k.Name = b.Name
				if f == wire.OpenAI || f == wire.Responses && (b.Type == "function_call" || b.Type == "custom_tool_call") {
					k.Text = string(b.Input)
				}
			}
			msg.Blocks = append(msg.Blocks, k)
		}
		out = append(out, msg)
	}
	return out, nil
}
