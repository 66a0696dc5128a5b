package parsebench

import (
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

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
