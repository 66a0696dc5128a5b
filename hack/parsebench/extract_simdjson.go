package parsebench

import (
	"github.com/minio/simdjson-go"

	"github.com/condense-dev/condense/internal/wire"
)

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
