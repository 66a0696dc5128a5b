package parsebench

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/condense-dev/condense/internal/wire"
)

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
