// Package strategies holds the context-management strategies condense replay compares: None,
// ClearToolUses (Anthropic's context editing, simulated), ObservationMask and, in condense.go,
// the condense engine and the reference extension's defaults.
package strategies

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/wire"
)

// None sends every request as the agent built it.
type None struct{}

// Name implements replay.Strategy.
func (None) Name() string { return "none" }

// New implements replay.Strategy.
func (None) New(context.Context, replay.Transcript) (replay.Runner, error) { return noneRunner{}, nil }

type noneRunner struct{}

// Rewrite implements replay.Runner.
func (noneRunner) Rewrite(_ context.Context, r *replay.Request) (replay.Result, error) {
	return replay.Result{Body: r.Body}, nil
}

// Close implements replay.Runner.
func (noneRunner) Close() error { return nil }

// toolUse is one tool call of a request and where its result is.
type toolUse struct {
	id     string
	name   string
	kind   string // Responses: the call item's type
	msg    int    // message holding the call (Responses: the call item)
	block  int    // index of the tool_use block (Anthropic) or tool_calls entry (OpenAI)
	resMsg int    // message holding the result, -1 when unanswered
	resBlk int    // index of the tool_result block (Anthropic); -1 for an OpenAI tool message
	// result is the result's current content value (raw JSON) and its text.
	resultRaw  string
	resultText string
	inputRaw   string
}

// toolUses lists the tool calls of a request body in order, with their results.
func toolUses(f wire.Format, body []byte) []toolUse {
	if f == wire.Responses {
		return itemToolUses(body)
	}
	msgs := gjson.GetBytes(body, "messages").Array()
	var out []toolUse
	byID := map[string]int{}
	for i, m := range msgs {
		role := m.Get("role").Str
		if f == wire.OpenAI {
			if role == "assistant" {
				for j, c := range m.Get("tool_calls").Array() {
					byID[c.Get("id").Str] = len(out)
					out = append(out, toolUse{id: c.Get("id").Str, name: c.Get("function.name").Str, msg: i, block: j,
						resMsg: -1, resBlk: -1, inputRaw: c.Get("function.arguments").Raw})
				}
			} else if role == "tool" {
				if k, ok := byID[m.Get("tool_call_id").Str]; ok && out[k].resMsg < 0 {
					c := m.Get("content")
					out[k].resMsg, out[k].resultRaw, out[k].resultText = i, c.Raw, contentText(c)
				}
			}
			continue
		}
		for j, b := range m.Get("content").Array() {
			switch b.Get("type").Str {
			case "tool_use":
				if role == "assistant" {
					byID[b.Get("id").Str] = len(out)
					out = append(out, toolUse{id: b.Get("id").Str, name: b.Get("name").Str, msg: i, block: j,
						resMsg: -1, resBlk: -1, inputRaw: b.Get("input").Raw})
				}
			case "tool_result":
				if k, ok := byID[b.Get("tool_use_id").Str]; ok && out[k].resMsg < 0 && role == "user" {
					c := b.Get("content")
					out[k].resMsg, out[k].resBlk, out[k].resultRaw, out[k].resultText = i, j, c.Raw, contentText(c)
				}
			}
		}
	}
	return out
}

// itemToolUses is toolUses of a Responses body: the calls among its input items (msg is the
// item, block -1) and the output items that answer them by call_id.
func itemToolUses(body []byte) []toolUse {
	var out []toolUse
	byID := map[string]int{}
	for i, it := range gjson.GetBytes(body, "input").Array() {
		typ := it.Get("type").Str
		switch typ {
		case "function_call", "custom_tool_call", "local_shell_call":
			u := toolUse{id: it.Get("call_id").Str, name: it.Get("name").Str, kind: typ, msg: i, block: -1, resMsg: -1, resBlk: -1}
			switch typ {
			case "function_call":
				u.inputRaw = it.Get("arguments").Raw
			case "custom_tool_call":
				u.inputRaw = it.Get("input").Raw
			default:
				u.name, u.inputRaw = "local_shell", it.Get("action").Raw
				if u.id == "" {
					u.id = it.Get("id").Str
				}
			}
			byID[u.id] = len(out)
			out = append(out, u)
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			if k, ok := byID[it.Get("call_id").Str]; ok && out[k].resMsg < 0 {
				c := it.Get("output")
				out[k].resMsg, out[k].resultRaw, out[k].resultText = i, c.Raw, contentText(c)
			}
		}
	}
	return out
}

// contentText is the text of a string or block-array content value.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var b bytes.Buffer
	c.ForEach(func(_, blk gjson.Result) bool {
		if t := blk.Get("text"); t.Exists() {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Str)
		} else {
			b.WriteString(blk.Raw)
		}
		return true
	})
	return b.String()
}

// edit replaces one member of a message (blk -1) or of one of its content blocks; for OpenAI
// tool calls (call true) blk indexes tool_calls and the member is replaced inside "function".
type edit struct {
	msg, blk int
	call     bool
	member   string
	raw      string
}

// messagesKey is the member of a body of format f holding its messages ("input" items for
// Responses).
func messagesKey(f wire.Format) string {
	if f == wire.Responses {
		return "input"
	}
	return "messages"
}

// applyEdits rebuilds body with the edits applied to the messages in member key. Everything
// not edited is copied byte-for-byte (top-level members, untouched messages, blocks and
// members keep their raw JSON and order).
func applyEdits(body []byte, key string, edits []edit) []byte {
	if len(edits) == 0 {
		return body
	}
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].msg < edits[j].msg })
	byMsg := map[int][]edit{}
	for _, e := range edits {
		byMsg[e.msg] = append(byMsg[e.msg], e)
	}
	out := make([]byte, 0, len(body))
	out = append(out, '{')
	first := true
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, k.Raw...)
		out = append(out, ':')
		if k.Str != key || !v.IsArray() {
			out = append(out, v.Raw...)
			return true
		}
		out = append(out, '[')
		i := 0
		v.ForEach(func(_, m gjson.Result) bool {
			if i > 0 {
				out = append(out, ',')
			}
			if es := byMsg[i]; len(es) > 0 {
				out = appendMessage(out, m, es)
			} else {
				out = append(out, m.Raw...)
			}
			i++
			return true
		})
		out = append(out, ']')
		return true
	})
	return append(out, '}')
}

func appendMessage(out []byte, m gjson.Result, es []edit) []byte {
	own := map[string]string{}
	blocks := map[int][]edit{}
	calls := map[int][]edit{}
	for _, e := range es {
		switch {
		case e.call:
			calls[e.blk] = append(calls[e.blk], e)
		case e.blk < 0:
			own[e.member] = e.raw
		default:
			blocks[e.blk] = append(blocks[e.blk], e)
		}
	}
	return appendObject(out, m, func(out []byte, k, v gjson.Result) ([]byte, bool) {
		if raw, ok := own[k.Str]; ok {
			return append(out, raw...), true
		}
		var sub map[int][]edit
		switch k.Str {
		case "content":
			sub = blocks
		case "tool_calls":
			sub = calls
		}
		if len(sub) == 0 || !v.IsArray() {
			return out, false
		}
		out = append(out, '[')
		j := 0
		v.ForEach(func(_, b gjson.Result) bool {
			if j > 0 {
				out = append(out, ',')
			}
			if be := sub[j]; len(be) > 0 {
				out = appendBlock(out, b, be)
			} else {
				out = append(out, b.Raw...)
			}
			j++
			return true
		})
		return append(out, ']'), true
	})
}

func appendBlock(out []byte, b gjson.Result, es []edit) []byte {
	repl := map[string]string{}
	isCall := false
	for _, e := range es {
		repl[e.member] = e.raw
		isCall = isCall || e.call
	}
	return appendObject(out, b, func(out []byte, k, v gjson.Result) ([]byte, bool) {
		if isCall && k.Str == "function" {
			return appendObject(out, v, func(out []byte, k2, _ gjson.Result) ([]byte, bool) {
				if raw, ok := repl[k2.Str]; ok {
					return append(out, raw...), true
				}
				return out, false
			}), true
		}
		if raw, ok := repl[k.Str]; ok && !isCall {
			return append(out, raw...), true
		}
		return out, false
	})
}

// appendObject copies a JSON object member by member; f may write a replacement value for a
// member (returning true) or leave it (false: the raw value is copied).
func appendObject(out []byte, o gjson.Result, f func(out []byte, k, v gjson.Result) ([]byte, bool)) []byte {
	out = append(out, '{')
	first := true
	o.ForEach(func(k, v gjson.Result) bool {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, k.Raw...)
		out = append(out, ':')
		n := len(out)
		var done bool
		out, done = f(out, k, v)
		if !done {
			out = append(out[:n], v.Raw...)
		}
		return true
	})
	return append(out, '}')
}

// jsonString encodes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
