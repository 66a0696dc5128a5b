package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"unicode/utf8"
)

// The encoding/json oracle: a second reading of a request body with encoding/json doing all
// the JSON work (validity, string decoding, members in order), and the wire model's schema
// rules written out once more, plainly. Parse must accept exactly what it accepts and decode
// the same strings.

// refBlock is what the oracle reads of a block.
type refBlock struct {
	Kind                      Kind
	Type, Text, Sig, ID, Name string
	Input                     string // OpenAI: the decoded arguments
	IsError, ContentString    bool
	Content                   []refBlock
	hasInput                  bool
	resultOf                  bool // a result block, whose Name comes from its call
}

type refMessage struct {
	Role   string
	Blocks []refBlock
}

type refRequest struct {
	Model    string
	Stream   bool
	System   []refBlock
	Tools    []string
	Messages []refMessage
}

var errRef = errors.New("oracle: rejected")

type refMember struct {
	key string
	val json.RawMessage
}

// refMembers returns the members of the JSON object raw in order, duplicates included.
func refMembers(raw json.RawMessage) ([]refMember, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errRef
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var ms []refMember
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, refMember{k.(string), v})
	}
	return ms, nil
}

func refElems(raw json.RawMessage) ([]json.RawMessage, error) {
	var es []json.RawMessage
	if raw[0] != '[' {
		return nil, errRef
	}
	return es, json.Unmarshal(raw, &es)
}

// refStr decodes the string raw; ok is false when raw is not a string.
func refStr(raw json.RawMessage) (string, bool) {
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// mustStr decodes the string raw, which must be one.
func mustStr(raw json.RawMessage) (string, error) {
	if s, ok := refStr(raw); ok {
		return s, nil
	}
	return "", errRef
}

// last returns the value of the last member named key (nil when there is none).
func last(ms []refMember, key string) json.RawMessage {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key == key {
			return ms[i].val
		}
	}
	return nil
}

// optStr reads the last member named key, which must be a string when present.
func optStr(ms []refMember, key string) (string, error) {
	v := last(ms, key)
	if v == nil {
		return "", nil
	}
	return mustStr(v)
}

// refBlockOf reads a content block object by the rules of Parse.
func refBlockOf(f Format, raw json.RawMessage) (refBlock, error) {
	ms, err := refMembers(raw)
	if err != nil {
		return refBlock{}, err
	}
	var b refBlock
	if last(ms, "type") == nil {
		return b, errRef
	}
	if b.Type, err = optStr(ms, "type"); err != nil {
		return b, err
	}
	b.Kind = kindOf(f, b.Type)
	str := func(dst *string, key string) {
		if err == nil {
			*dst, err = optStr(ms, key)
		}
	}
	switch b.Kind {
	case KindText:
		str(&b.Text, "text")
	case KindThinking:
		str(&b.Text, "thinking")
		str(&b.Sig, "signature")
	case KindToolUse, KindServerToolUse:
		str(&b.ID, "id")
		str(&b.Name, "name")
	case KindToolResult, KindWebSearchToolResult:
		b.resultOf = true
		str(&b.ID, "tool_use_id")
		if err != nil || b.Kind == KindWebSearchToolResult {
			break
		}
		if v := last(ms, "is_error"); v != nil {
			switch string(v) {
			case "true":
				b.IsError = true
			case "false":
			default:
				return b, errRef
			}
		}
		if v := last(ms, "content"); v != nil {
			switch v[0] {
			case '"':
				s, _ := refStr(v)
				b.Content, b.ContentString = []refBlock{{Kind: KindText, Type: "text", Text: s}}, true
			case '[':
				// Not strict: an element that is not a block object still fails the result.
				es, _ := refElems(v)
				for _, e := range es {
					c, err := refBlockOf(f, e)
					if err != nil {
						return b, err
					}
					b.Content = append(b.Content, c)
				}
			case 'n':
			default:
				return b, errRef
			}
		}
	}
	return b, err
}

// refBlocks reads a strict list of content blocks.
func refBlocks(f Format, raw json.RawMessage) ([]refBlock, error) {
	es, err := refElems(raw)
	if err != nil {
		return nil, err
	}
	var out []refBlock
	for _, e := range es {
		b, err := refBlockOf(f, e)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// refMessageMembers reads a message object's members and its role: every "role" member
// must be a string, and there must be one.
func refMessageMembers(raw json.RawMessage) (refMessage, []refMember, error) {
	var m refMessage
	ms, err := refMembers(raw)
	if err != nil || last(ms, "role") == nil {
		return m, nil, errRef
	}
	for _, x := range ms {
		if x.key == "role" {
			if m.Role, err = mustStr(x.val); err != nil {
				return m, nil, err
			}
		}
	}
	return m, ms, nil
}

func refAnthropicMessage(raw json.RawMessage) (refMessage, error) {
	m, ms, err := refMessageMembers(raw)
	if err != nil {
		return m, err
	}
	for _, x := range ms {
		switch x.key {
		case "content":
			switch x.val[0] {
			case '"':
				s, _ := refStr(x.val)
				m.Blocks = []refBlock{{Kind: KindText, Type: "text", Text: s}}
			case '[':
				if m.Blocks, err = refBlocks(Anthropic, x.val); err != nil {
					return m, err
				}
			default:
				return m, errRef
			}
		}
	}
	return m, nil
}

func refToolCall(raw json.RawMessage) (refBlock, error) {
	b := refBlock{Kind: KindToolUse}
	ms, err := refMembers(raw)
	if err != nil {
		return b, err
	}
	if b.ID, err = optStr(ms, "id"); err != nil {
		return b, err
	}
	if b.Type, err = optStr(ms, "type"); err != nil {
		return b, err
	}
	if fv := last(ms, "function"); fv != nil {
		fn, err := refMembers(fv)
		if err != nil {
			return b, errRef
		}
		if b.Name, err = optStr(fn, "name"); err != nil {
			return b, err
		}
		if a := last(fn, "arguments"); a != nil {
			b.hasInput = true
			if s, ok := refStr(a); ok {
				b.Input = s
			} else {
				b.Input = string(a)
			}
		}
	}
	return b, nil
}

func refOpenAIMessage(raw json.RawMessage) (refMessage, error) {
	m, ms, err := refMessageMembers(raw)
	if err != nil {
		return m, err
	}
	var parts, calls []refBlock
	var toolCallID string
	contentString := false
	for _, x := range ms {
		switch x.key {
		case "content":
			parts, contentString = nil, false
			switch x.val[0] {
			case '"':
				s, _ := refStr(x.val)
				parts, contentString = []refBlock{{Kind: KindText, Type: "text", Text: s}}, true
			case '[':
				if parts, err = refBlocks(OpenAI, x.val); err != nil {
					return m, err
				}
			case 'n':
			default:
				return m, errRef
			}
		case "tool_calls":
			calls = nil
			switch x.val[0] {
			case '[':
				es, _ := refElems(x.val)
				for _, e := range es {
					c, err := refToolCall(e)
					if err != nil {
						return m, err
					}
					calls = append(calls, c)
				}
			case 'n':
			default:
				return m, errRef
			}
		case "tool_call_id":
			if toolCallID, err = mustStr(x.val); err != nil {
				return m, err
			}
		}
	}
	if m.Role == string(RoleTool) {
		m.Blocks = []refBlock{{Kind: KindToolResult, Type: "tool", ID: toolCallID, Content: parts, ContentString: contentString, resultOf: true}}
		return m, nil
	}
	m.Blocks = append(parts, calls...)
	return m, nil
}

func refToolName(f Format, raw json.RawMessage) (string, error) {
	ms, err := refMembers(raw)
	if err != nil {
		return "", err
	}
	if last(ms, "name") != nil {
		return optStr(ms, "name")
	}
	if fv := last(ms, "function"); f == OpenAI && fv != nil && fv[0] == '{' {
		fn, _ := refMembers(fv)
		return optStr(fn, "name")
	}
	return "", nil
}

// depth returns the deepest nesting of arrays and objects in the valid JSON raw.
func depth(raw []byte) int {
	d, most, inStr := 0, 0, false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}

// refParse reads body with encoding/json by Parse's rules; an error means Parse must reject it.
func refParse(f Format, body []byte) (*refRequest, error) {
	if !json.Valid(body) || !utf8.Valid(body) || depth(body) > MaxDepth {
		return nil, errRef
	}
	ms, err := refMembers(bytes.TrimLeft(body, " \t\r\n"))
	if err != nil {
		return nil, errRef
	}
	r := &refRequest{}
	for _, x := range ms {
		switch {
		case x.key == "model":
			if r.Model, err = mustStr(x.val); err != nil {
				return nil, err
			}
		case x.key == "stream":
			switch string(x.val) {
			case "true", "false":
				r.Stream = string(x.val) == "true"
			case "null":
				if f != OpenAI {
					return nil, errRef
				}
				r.Stream = false
			default:
				return nil, errRef
			}
		case x.key == "messages":
			es, err := refElems(x.val)
			if err != nil {
				return nil, errRef
			}
			r.Messages = nil
			for _, e := range es {
				var m refMessage
				if f == Anthropic {
					m, err = refAnthropicMessage(e)
				} else {
					m, err = refOpenAIMessage(e)
				}
				if err != nil {
					return nil, err
				}
				r.Messages = append(r.Messages, m)
			}
		case x.key == "tools":
			es, err := refElems(x.val)
			if err != nil {
				return nil, errRef
			}
			r.Tools = nil
			for _, e := range es {
				name, err := refToolName(f, e)
				if err != nil {
					return nil, err
				}
				r.Tools = append(r.Tools, name)
			}
		case x.key == "system" && f == Anthropic:
			switch x.val[0] {
			case '"':
				s, _ := refStr(x.val)
				r.System = []refBlock{{Kind: KindText, Type: "text", Text: s}}
			case '[':
				if r.System, err = refBlocks(f, x.val); err != nil {
					return nil, err
				}
			default:
				return nil, errRef
			}
		}
	}
	// A tool result is named after the nearest tool call before it with its id.
	names := map[string]string{}
	for mi := range r.Messages {
		for bi := range r.Messages[mi].Blocks {
			b := &r.Messages[mi].Blocks[bi]
			switch {
			case (b.Kind == KindToolUse || b.Kind == KindServerToolUse) && b.ID != "":
				names[b.ID] = b.Name
			case b.resultOf && b.ID != "":
				b.Name = names[b.ID]
			}
		}
	}
	return r, nil
}

// sameAsOracle fails t unless Parse and the oracle agree on body: both reject it, or both
// accept it with the same decoded strings.
func sameAsOracle(t *testing.T, f Format, body []byte) {
	t.Helper()
	want, werr := refParse(f, body)
	got, err := Parse(f, body)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%s: Parse error %v, encoding/json oracle error %v\nbody %q", f, err, werr, body)
	}
	if err != nil {
		return
	}
	if got.Model != want.Model || got.Stream != want.Stream {
		t.Fatalf("model/stream %q %v, oracle %q %v", got.Model, got.Stream, want.Model, want.Stream)
	}
	var tools []string
	for _, tl := range got.Tools {
		tools = append(tools, tl.Name)
	}
	if fmt.Sprintf("%q", tools) != fmt.Sprintf("%q", want.Tools) {
		t.Fatalf("tool names %q, oracle %q", tools, want.Tools)
	}
	sameBlocks(t, "system", got.System, want.System)
	if len(got.Messages) != len(want.Messages) {
		t.Fatalf("%d messages, oracle %d", len(got.Messages), len(want.Messages))
	}
	for i, m := range got.Messages {
		if string(m.Role) != want.Messages[i].Role {
			t.Fatalf("message %d: role %q, oracle %q", i, m.Role, want.Messages[i].Role)
		}
		sameBlocks(t, fmt.Sprintf("message %d", i), m.Blocks, want.Messages[i].Blocks)
	}
}

func sameBlocks(t *testing.T, where string, got []*Block, want []refBlock) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d blocks, oracle %d", where, len(got), len(want))
	}
	for i, b := range got {
		w := want[i]
		g := refBlock{Kind: b.Kind, Type: b.Type, Text: b.Text(), Sig: b.Signature, ID: b.ID, Name: b.Name,
			IsError: b.IsError, ContentString: b.ContentString}
		if b.f == OpenAI && b.Kind == KindToolUse {
			g.Input = string(b.Input)
		}
		if g.Kind != w.Kind || g.Type != w.Type || g.Text != w.Text || g.Sig != w.Sig || g.ID != w.ID ||
			g.Name != w.Name || g.IsError != w.IsError || g.ContentString != w.ContentString || g.Input != w.Input {
			t.Fatalf("%s block %d: %+v, oracle %+v", where, i, g, w)
		}
		if b.Kind == KindToolResult {
			sameBlocks(t, fmt.Sprintf("%s block %d content", where, i), b.Content, w.Content)
		}
	}
}

var oracleSeeds = []string{
	`{"model":"m","stream":null,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":1}`, `{"messages":[1]}`, `{"messages":[{"content":"x"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a\u00e9\ud83d\ude00\n"}]}],"messages":[]}`,
	`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"},2]}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":null}]}]}`,
	`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`,
	`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":\"\\n\"}"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"x"}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f"},"function":3}]}]}`,
	`{"tools":[{"name":"a"},{"function":{"name":"b"}},{"type":"x"}],"system":[{"type":"text","text":"s"}]}`,
	`{"system":"s\t","messages":[{"role":"user","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"x","text":5}]}]}`,
	"{\"\\u006dodel\":\"m\",\"messages\":[{\"r\\u006fle\":\"user\",\"content\":\"\"}]}",
}

// FuzzParseMatchesEncodingJSON checks that Parse accepts exactly the bodies the encoding/json
// oracle accepts (the same decision on every input) and decodes the same roles, types, ids,
// names, texts and signatures, in both formats.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range append(append([]string{}, fuzzSeeds...), oracleSeeds...) {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, openAI bool) {
		format := Anthropic
		if openAI {
			format = OpenAI
		}
		sameAsOracle(t, format, body)
	})
}

// TestOracleCorpus runs the oracle comparison on the package's large benchmark bodies.
func TestOracleCorpus(t *testing.T) {
	sameAsOracle(t, Anthropic, twoMBRequest(t))
	for _, s := range oracleSeeds {
		sameAsOracle(t, Anthropic, []byte(s))
		sameAsOracle(t, OpenAI, []byte(s))
	}
}
