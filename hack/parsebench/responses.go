package parsebench

import (
	"strings"

	"github.com/bytedance/sonic/ast"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/minio/simdjson-go"
	"github.com/tidwall/gjson"
)

// Each library reads every Responses "input" item into a jobj; responsesMsgs then maps them
// onto messages as internal/wire/parse_responses.go does, the same for all libraries.

// jobj is what a parser reads of one JSON object: its span, its string members (decoded)
// with their spans, and the objects in its array members (non-object elements are left out).
type jobj struct {
	Start, End int
	Str        map[string]string
	StrSpan    map[string][2]int
	Arr        map[string][]jobj
}

func newJobj(start, end int) jobj {
	return jobj{Start: start, End: end, Str: map[string]string{}, StrSpan: map[string][2]int{}, Arr: map[string][]jobj{}}
}

// modelItem and outputItem classify item types as the wire model does.
func modelItem(typ string) bool {
	switch typ {
	case "reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call",
		"file_search_call", "computer_call", "code_interpreter_call", "image_generation_call",
		"mcp_call", "mcp_list_tools", "mcp_approval_request", "shell_call", "apply_patch_call",
		"tool_search_call":
		return true
	}
	return false
}

func outputItem(typ string) bool {
	return typ == "function_call_output" || typ == "custom_tool_call_output" || typ == "local_shell_call_output"
}

// textOf is the "text" of every part of o's array member key joined with "\n" (an assistant
// message's content, a reasoning summary), or its string value.
func textOf(o jobj, key string) string {
	if s, ok := o.Str[key]; ok {
		return s
	}
	var texts []string
	for _, p := range o.Arr[key] {
		if t, ok := p.Str["text"]; ok {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n")
}

// partsOf returns the content blocks of o's member key: a string is one text block spanning
// its literal, an array its parts (input_text and output_text parts carry their text).
func partsOf(o jobj, key string) []Blk {
	if s, ok := o.Str[key]; ok {
		sp := o.StrSpan[key]
		return []Blk{{Start: sp[0], End: sp[1], Type: "text", Text: s}}
	}
	var out []Blk
	for _, p := range o.Arr[key] {
		b := Blk{Start: p.Start, End: p.End, Type: p.Str["type"]}
		if b.Type == "input_text" || b.Type == "output_text" {
			b.Text = p.Str["text"]
		}
		out = append(out, b)
	}
	return out
}

// responsesMsgs maps input items onto messages.
func responsesMsgs(items []jobj) []Msg {
	var out []Msg
	run := -1 // index in out of the open assistant run
	for _, it := range items {
		typ, role := it.Str["type"], it.Str["role"]
		var blk *Blk
		switch {
		case typ == "message" && role == "assistant" || typ == "" && role == "assistant":
			blk = &Blk{Type: typ, Text: textOf(it, "content")}
		case modelItem(typ):
			blk = &Blk{Type: typ}
			switch typ {
			case "reasoning":
				blk.Text, blk.Sig = textOf(it, "summary"), it.Str["encrypted_content"]
			case "function_call":
				blk.ID, blk.Name, blk.Text = it.Str["call_id"], it.Str["name"], it.Str["arguments"]
			case "custom_tool_call":
				blk.ID, blk.Name, blk.Text = it.Str["call_id"], it.Str["name"], it.Str["input"]
			case "web_search_call":
				blk.ID, blk.Name = it.Str["id"], "web_search"
			case "local_shell_call":
				blk.ID, blk.Name = it.Str["call_id"], "local_shell"
				if blk.ID == "" {
					blk.ID = it.Str["id"]
				}
			default:
				blk.ID = it.Str["call_id"]
			}
		}
		if blk != nil {
			blk.Start, blk.End = it.Start, it.End
			if run < 0 {
				out = append(out, Msg{Start: it.Start, Role: "assistant"})
				run = len(out) - 1
			}
			out[run].End = it.End
			out[run].Blocks = append(out[run].Blocks, *blk)
			continue
		}
		run = -1
		msg := Msg{Start: it.Start, End: it.End}
		switch {
		case typ == "message" || typ == "" && role != "":
			msg.Role, msg.Blocks = role, partsOf(it, "content")
		case outputItem(typ):
			var texts []string
			for _, p := range partsOf(it, "output") {
				if p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" {
					texts = append(texts, p.Text)
				}
			}
			id := it.Str["call_id"]
			if id == "" && typ == "local_shell_call_output" {
				id = it.Str["id"]
			}
			msg.Role = "tool"
			msg.Blocks = []Blk{{Start: it.Start, End: it.End, Type: typ, ID: id, Text: strings.Join(texts, "\n")}}
		default:
			msg.Blocks = []Blk{{Start: it.Start, End: it.End, Type: typ, ID: it.Str["call_id"]}}
		}
		out = append(out, msg)
	}
	return out
}

// depth2 is how deep items are read: an item and the objects of its arrays (content parts,
// summary parts).
const depth2 = 2

// gjsonItems reads the input items with gjson (after gjson.ValidBytes).
func gjsonItems(body []byte) []Msg {
	var read func(v gjson.Result, depth int) jobj
	read = func(v gjson.Result, depth int) jobj {
		o := offset(body, v.Raw)
		j := newJobj(o, o+len(v.Raw))
		v.ForEach(func(k, v gjson.Result) bool {
			switch {
			case v.Type == gjson.String:
				o := offset(body, v.Raw)
				j.Str[k.Str], j.StrSpan[k.Str] = v.Str, [2]int{o, o + len(v.Raw)}
			case v.IsArray() && depth < depth2:
				v.ForEach(func(_, e gjson.Result) bool {
					if e.IsObject() {
						j.Arr[k.Str] = append(j.Arr[k.Str], read(e, depth+1))
					}
					return true
				})
			}
			return true
		})
		return j
	}
	var items []jobj
	gjson.Get(str(body), "input").ForEach(func(_, v gjson.Result) bool {
		items = append(items, read(v, 1))
		return true
	})
	return responsesMsgs(items)
}

// sonicItems reads the input items with sonic's lazy ast (after sonic.Valid).
func sonicItems(body []byte, input *ast.Node) ([]Msg, error) {
	var read func(n *ast.Node, depth int) jobj
	read = func(n *ast.Node, depth int) jobj {
		raw, _ := n.Raw()
		o := offset(body, raw)
		j := newJobj(o, o+len(raw))
		it, _ := n.Properties()
		var p ast.Pair
		for it.Next(&p) {
			v := &p.Value
			switch v.TypeSafe() {
			case ast.V_STRING:
				raw, _ := v.Raw()
				o := offset(body, raw)
				s, _ := v.String()
				j.Str[p.Key], j.StrSpan[p.Key] = s, [2]int{o, o + len(raw)}
			case ast.V_ARRAY:
				if depth >= depth2 {
					continue
				}
				ei, _ := v.Values()
				var e ast.Node
				for ei.Next(&e) {
					if e.TypeSafe() == ast.V_OBJECT {
						j.Arr[p.Key] = append(j.Arr[p.Key], read(&e, depth+1))
					}
				}
			}
		}
		return j
	}
	ii, err := input.Values()
	if err != nil {
		return nil, err
	}
	var items []jobj
	var n ast.Node
	for ii.Next(&n) {
		items = append(items, read(&n, 1))
	}
	return responsesMsgs(items), nil
}

// simdItems reads the input items from simdjson-go's tape (no spans: -1).
func simdItems(input *simdjson.Iter) ([]Msg, error) {
	var read func(i *simdjson.Iter, depth int) jobj
	read = func(i *simdjson.Iter, depth int) jobj {
		j := newJobj(-1, -1)
		o, err := i.Object(nil)
		if err != nil {
			return j
		}
		var v simdjson.Iter
		for {
			k, t, err := o.NextElement(&v)
			if err != nil || t == simdjson.TypeNone {
				return j
			}
			switch t {
			case simdjson.TypeString:
				j.Str[k], _ = v.String()
				j.StrSpan[k] = [2]int{-1, -1}
			case simdjson.TypeArray:
				if depth >= depth2 {
					continue
				}
				a, err := v.Array(nil)
				if err != nil {
					continue
				}
				ai := a.Iter()
				for ai.Advance() == simdjson.TypeObject {
					j.Arr[k] = append(j.Arr[k], read(&ai, depth+1))
				}
			}
		}
	}
	arr, err := input.Array(nil)
	if err != nil {
		return nil, err
	}
	var items []jobj
	ai := arr.Iter()
	for ai.Advance() != simdjson.TypeNone {
		items = append(items, read(&ai, 1))
	}
	return responsesMsgs(items), nil
}

// jsontextItems reads the input items in one pass of jsontext tokens: the decoder must stand
// before the input array.
func jsontextItems(d *jsontext.Decoder) ([]Msg, error) {
	var read func(depth int) (jobj, error)
	read = func(depth int) (jobj, error) {
		if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
			return jobj{}, orInvalid(err)
		}
		j := newJobj(int(d.InputOffset())-1, 0)
		for d.PeekKind() != '}' {
			kt, err := d.ReadToken()
			if err != nil {
				return j, err
			}
			k := kt.String()
			switch {
			case d.PeekKind() == '"':
				v, err := d.ReadValue()
				if err != nil {
					return j, err
				}
				end := int(d.InputOffset())
				u, _ := jsontext.AppendUnquote(nil, v)
				j.Str[k], j.StrSpan[k] = str(u), [2]int{end - len(v), end}
			case d.PeekKind() == '[' && depth < depth2:
				if _, err := d.ReadToken(); err != nil {
					return j, err
				}
				for d.PeekKind() != ']' {
					if d.PeekKind() != '{' {
						if err := d.SkipValue(); err != nil {
							return j, err
						}
						continue
					}
					e, err := read(depth + 1)
					if err != nil {
						return j, err
					}
					j.Arr[k] = append(j.Arr[k], e)
				}
				if _, err := d.ReadToken(); err != nil {
					return j, err
				}
			default:
				if err := d.SkipValue(); err != nil {
					return j, err
				}
			}
		}
		if _, err := d.ReadToken(); err != nil {
			return j, err
		}
		j.End = int(d.InputOffset())
		return j, nil
	}
	if t, err := d.ReadToken(); err != nil || t.Kind() != '[' {
		return nil, orInvalid(err)
	}
	var items []jobj
	for d.PeekKind() != ']' {
		it, err := read(1)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	if _, err := d.ReadToken(); err != nil {
		return nil, err
	}
	return responsesMsgs(items), nil
}

// orInvalid is err, or errInvalid for a nil err (an unexpected token).
func orInvalid(err error) error {
	if err != nil {
		return err
	}
	return errInvalid
}
