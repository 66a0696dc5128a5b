package parsebench

import (
	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/ast"

	"github.com/condense-dev/condense/internal/wire"
)

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
