package parsebench

import (
	"bytes"
	"errors"
	"strings"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/ast"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/minio/simdjson-go"
	"github.com/tidwall/gjson"

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

// gjsonMsgs: gjson.Valid, then one ForEach over the messages and over each object's
// members (gjson does not validate while it reads).
func gjsonMsgs(f wire.Format, body []byte) ([]Msg, error) {
	if !gjson.ValidBytes(body) {
		return nil, errInvalid
	}
	if f == wire.Responses {
		return gjsonItems(body), nil
	}
	var out []Msg
	gjson.Get(str(body), "messages").ForEach(func(_, mv gjson.Result) bool {
		o := offset(body, mv.Raw)
		msg := Msg{Start: o, End: o + len(mv.Raw)}
		var content, calls gjson.Result
		var callID string
		mv.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "role":
				msg.Role = v.Str
			case "content":
				content = v
			case "tool_calls":
				calls = v
			case "tool_call_id":
				callID = v.Str
			}
			return true
		})
		block := func(v gjson.Result) Blk {
			o := offset(body, v.Raw)
			b := Blk{Start: o, End: o + len(v.Raw)}
			m := fields{}
			var texts []string
			contentIsString := false
			v.ForEach(func(k, v gjson.Result) bool {
				if v.Type == gjson.String {
					m[k.Str] = v.Str
				}
				switch k.Str {
				case "type":
					b.Type = v.Str
				case "content":
					contentIsString = v.Type == gjson.String
					if v.IsArray() {
						texts = texts[:0]
						v.ForEach(func(_, c gjson.Result) bool {
							if c.Get("type").Str == "text" {
								texts = append(texts, c.Get("text").Str)
							}
							return true
						})
					}
				}
				return true
			})
			finishBlock(f, &b, m, texts, contentIsString)
			return b
		}
		var parts []Blk
		if content.Type == gjson.String {
			o := offset(body, content.Raw)
			parts = append(parts, Blk{Start: o, End: o + len(content.Raw), Type: "text", Text: content.Str})
		} else if content.IsArray() {
			content.ForEach(func(_, v gjson.Result) bool { parts = append(parts, block(v)); return true })
		}
		var tcs []Blk
		calls.ForEach(func(_, v gjson.Result) bool {
			o := offset(body, v.Raw)
			tcs = append(tcs, Blk{Start: o, End: o + len(v.Raw), Type: v.Get("type").Str, ID: v.Get("id").Str,
				Name: v.Get("function.name").Str, Text: v.Get("function.arguments").Str})
			return true
		})
		assemble(f, &msg, parts, tcs, callID)
		out = append(out, msg)
		return true
	})
	return out, nil
}

// sonicMsgs: sonic.Valid, then sonic's lazy ast (nodes keep their raw bytes until read).
func sonicMsgs(f wire.Format, body []byte) ([]Msg, error) {
	if !sonic.Valid(body) {
		return nil, errInvalid
	}
	s := str(body)
	root, err := sonic.GetFromString(s, messagesKey(f))
	if err != nil {
		return nil, err
	}
	if f == wire.Responses {
		return sonicItems(body, &root)
	}
	span := func(n *ast.Node) (int, int) {
		raw, _ := n.Raw()
		o := offset(body, raw)
		return o, o + len(raw)
	}
	text := func(n *ast.Node) string { v, _ := n.String(); return v }
	block := func(n *ast.Node) Blk {
		var b Blk
		b.Start, b.End = span(n)
		m := fields{}
		var texts []string
		contentIsString := false
		it, _ := n.Properties()
		var p ast.Pair
		for it.Next(&p) {
			v := &p.Value
			if v.TypeSafe() == ast.V_STRING {
				m[p.Key] = text(v)
			}
			switch p.Key {
			case "type":
				b.Type = text(v)
			case "content":
				contentIsString = v.TypeSafe() == ast.V_STRING
				if v.TypeSafe() == ast.V_ARRAY {
					ci, _ := v.Values()
					var c ast.Node
					for ci.Next(&c) {
						if text(c.Get("type")) == "text" {
							texts = append(texts, text(c.Get("text")))
						}
					}
				}
			}
		}
		finishBlock(f, &b, m, texts, contentIsString)
		return b
	}
	var out []Msg
	mi, err := root.Values()
	if err != nil {
		return nil, err
	}
	var mn ast.Node
	for mi.Next(&mn) {
		var msg Msg
		msg.Start, msg.End = span(&mn)
		var parts []Blk
		var callID string
		var calls *ast.Node
		it, _ := mn.Properties()
		var p ast.Pair
		for it.Next(&p) {
			v := p.Value
			switch p.Key {
			case "role":
				msg.Role = text(&v)
			case "tool_call_id":
				callID = text(&v)
			case "tool_calls":
				calls = &v
			case "content":
				switch v.TypeSafe() {
				case ast.V_STRING:
					s, e := span(&v)
					parts = append(parts, Blk{Start: s, End: e, Type: "text", Text: text(&v)})
				case ast.V_ARRAY:
					ci, _ := v.Values()
					var c ast.Node
					for ci.Next(&c) {
						parts = append(parts, block(&c))
					}
				}
			}
		}
		var tcs []Blk
		if calls != nil && calls.TypeSafe() == ast.V_ARRAY {
			ci, _ := calls.Values()
			var c ast.Node
			for ci.Next(&c) {
				var b Blk
				b.Start, b.End = span(&c)
				b.Type, b.ID = text(c.Get("type")), text(c.Get("id"))
				fn := c.Get("function")
				b.Name, b.Text = text(fn.Get("name")), text(fn.Get("arguments"))
				tcs = append(tcs, b)
			}
		}
		assemble(f, &msg, parts, tcs, callID)
		out = append(out, msg)
	}
	return out, nil
}

// simdParsed is the tape simdjson-go reuses from one parse to the next (its intended use).
var simdParsed *simdjson.ParsedJson

// simdMsgs: simdjson-go's tape (it validates the whole body; objects keep no input offsets,
// so no raw spans: passing unknown members through needs re-serializing them).
func simdMsgs(f wire.Format, body []byte) ([]Msg, error) {
	pj, err := simdjson.Parse(body, simdParsed, simdjson.WithCopyStrings(false))
	if err != nil {
		return nil, err
	}
	simdParsed = pj
	var it, root simdjson.Iter
	it = pj.Iter()
	it.Advance()
	if _, _, err := it.Root(&root); err != nil {
		return nil, err
	}
	obj, err := root.Object(nil)
	if err != nil {
		return nil, err
	}
	el := obj.FindKey(messagesKey(f), nil)
	if el == nil {
		return nil, nil
	}
	if f == wire.Responses {
		return simdItems(&el.Iter)
	}
	arr, err := el.Iter.Array(nil)
	if err != nil {
		return nil, err
	}
	s := func(i *simdjson.Iter) string { v, _ := i.String(); return v }
	members := func(i *simdjson.Iter, fn func(k string, v *simdjson.Iter)) {
		o, err := i.Object(nil)
		if err != nil {
			return
		}
		var v simdjson.Iter
		for {
			k, t, err := o.NextElement(&v)
			if err != nil || t == simdjson.TypeNone {
				return
			}
			fn(k, &v)
		}
	}
	each := func(i *simdjson.Iter, fn func(v *simdjson.Iter)) {
		a, err := i.Array(nil)
		if err != nil {
			return
		}
		ai := a.Iter()
		for ai.Advance() != simdjson.TypeNone {
			fn(&ai)
		}
	}
	block := func(v *simdjson.Iter) Blk {
		b := Blk{Start: -1, End: -1}
		m := fields{}
		var texts []string
		contentIsString := false
		members(v, func(k string, v *simdjson.Iter) {
			if v.Type() == simdjson.TypeString {
				m[k] = s(v)
			}
			switch k {
			case "type":
				b.Type = s(v)
			case "content":
				contentIsString = v.Type() == simdjson.TypeString
				if v.Type() == simdjson.TypeArray {
					each(v, func(c *simdjson.Iter) {
						var typ, txt string
						members(c, func(k string, v *simdjson.Iter) {
							switch k {
							case "type":
								typ = s(v)
							case "text":
								txt = s(v)
							}
						})
						if typ == "text" {
							texts = append(texts, txt)
						}
					})
				}
			}
		})
		finishBlock(f, &b, m, texts, contentIsString)
		return b
	}
	var out []Msg
	ai := arr.Iter()
	for ai.Advance() != simdjson.TypeNone {
		msg := Msg{Start: -1, End: -1}
		var parts, calls []Blk
		var callID string
		members(&ai, func(k string, v *simdjson.Iter) {
			switch k {
			case "role":
				msg.Role = s(v)
			case "tool_call_id":
				callID = s(v)
			case "content":
				switch v.Type() {
				case simdjson.TypeString:
					parts = append(parts, Blk{Start: -1, End: -1, Type: "text", Text: s(v)})
				case simdjson.TypeArray:
					each(v, func(c *simdjson.Iter) { parts = append(parts, block(c)) })
				}
			case "tool_calls":
				each(v, func(c *simdjson.Iter) {
					b := Blk{Start: -1, End: -1}
					members(c, func(k string, v *simdjson.Iter) {
						switch k {
						case "type":
							b.Type = s(v)
						case "id":
							b.ID = s(v)
						case "function":
							members(v, func(k string, v *simdjson.Iter) {
								switch k {
								case "name":
									b.Name = s(v)
								case "arguments":
									b.Text = s(v)
								}
							})
						}
					})
					calls = append(calls, b)
				})
			}
		})
		assemble(f, &msg, parts, calls, callID)
		out = append(out, msg)
	}
	return out, nil
}

// jsontextMsgs: one pass of jsontext.Decoder tokens (it validates as it reads); raw spans
// from InputOffset.
func jsontextMsgs(f wire.Format, body []byte) ([]Msg, error) {
	d := jsontext.NewDecoder(bytes.NewReader(body))
	var err error
	tok := func() jsontext.Token {
		if err != nil {
			return jsontext.Token{}
		}
		var t jsontext.Token
		t, err = d.ReadToken()
		return t
	}
	skip := func() {
		if err == nil {
			err = d.SkipValue()
		}
	}
	// object calls fn for each key of the object whose '{' comes next; fn must consume the
	// value. It returns the object's span.
	object := func(fn func(k string)) (int, int) {
		if tok().Kind() != '{' {
			if err == nil {
				err = errInvalid
			}
			return 0, 0
		}
		start := int(d.InputOffset()) - 1
		for err == nil && d.PeekKind() != '}' {
			fn(tok().String())
		}
		tok()
		return start, int(d.InputOffset())
	}
	array := func(fn func()) {
		if tok().Kind() != '[' {
			if err == nil {
				err = errInvalid
			}
			return
		}
		for err == nil && d.PeekKind() != ']' {
			fn()
		}
		tok()
	}
	stringValue := func() (string, int, int) {
		if d.PeekKind() != '"' {
			skip()
			return "", 0, 0
		}
		v, e := d.ReadValue()
		if e != nil {
			err = e
			return "", 0, 0
		}
		end := int(d.InputOffset())
		u, _ := jsontext.AppendUnquote(nil, v)
		return str(u), end - len(v), end
	}
	block := func() Blk {
		var b Blk
		m := fields{}
		var texts []string
		contentIsString := false
		b.Start, b.End = object(func(k string) {
			switch {
			case k == "content" && d.PeekKind() == '[':
				array(func() {
					var typ, txt string
					object(func(k string) {
						switch k {
						case "type":
							typ, _, _ = stringValue()
						case "text":
							txt, _, _ = stringValue()
						default:
							skip()
						}
					})
					if typ == "text" {
						texts = append(texts, txt)
					}
				})
			case d.PeekKind() == '"':
				contentIsString = contentIsString || k == "content"
				m[k], _, _ = stringValue()
			default:
				skip()
			}
		})
		b.Type = m["type"]
		finishBlock(f, &b, m, texts, contentIsString)
		return b
	}
	var out []Msg
	object(func(k string) {
		if k != messagesKey(f) {
			skip()
			return
		}
		if f == wire.Responses {
			if err == nil {
				out, err = jsontextItems(d)
			}
			return
		}
		array(func() {
			var msg Msg
			var parts, calls []Blk
			var callID string
			msg.Start, msg.End = object(func(k string) {
				switch k {
				case "role":
					msg.Role, _, _ = stringValue()
				case "tool_call_id":
					callID, _, _ = stringValue()
				case "content":
					switch d.PeekKind() {
					case '"':
						txt, s, e := stringValue()
						parts = append(parts, Blk{Type: "text", Text: txt, Start: s, End: e})
					case '[':
						array(func() { parts = append(parts, block()) })
					default:
						skip()
					}
				case "tool_calls":
					if d.PeekKind() != '[' {
						skip()
						return
					}
					array(func() {
						var b Blk
						b.Start, b.End = object(func(k string) {
							switch k {
							case "type":
								b.Type, _, _ = stringValue()
							case "id":
								b.ID, _, _ = stringValue()
							case "function":
								object(func(k string) {
									switch k {
									case "name":
										b.Name, _, _ = stringValue()
									case "arguments":
										b.Text, _, _ = stringValue()
									default:
										skip()
									}
								})
							default:
								skip()
							}
						})
						calls = append(calls, b)
					})
				default:
					skip()
				}
			})
			assemble(f, &msg, parts, calls, callID)
			out = append(out, msg)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
