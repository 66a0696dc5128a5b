package transcripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// docError maps a decoding error of a whole JSON document to a *ParseError with the line of
// the offending byte.
func docError(name string, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if se.Error() == "unexpected end of JSON input" {
			return &ParseError{File: name, Line: lineOfOffset(data, int64(len(bytes.TrimRight(data, " \t\r\n")))), Err: errors.New("truncated JSON document (unexpected end of input)")}
		}
		return &ParseError{File: name, Line: lineOfOffset(data, se.Offset), Err: fmt.Errorf("invalid JSON: %v", se)}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &ParseError{File: name, Line: lineOfOffset(data, te.Offset), Path: te.Field,
			Err: fmt.Errorf("wrong type: got JSON %s, want %s", te.Value, te.Type)}
	}
	if err.Error() == "unexpected end of JSON input" {
		return &ParseError{File: name, Line: lineOfOffset(data, int64(len(data))), Err: errors.New("truncated JSON document (unexpected end of input)")}
	}
	return &ParseError{File: name, Err: err}
}

// trajText returns the text of a history/messages content value: a string, or the text parts
// of a [{type:"text",text}] list joined with "\n".
func trajText(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	if s, ok := rawString(raw); ok {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// sweEntry is one SWE-agent history entry.
type sweEntry struct {
	Role        string          `json:"role"`
	Content     json.RawMessage `json:"content"`
	Action      string          `json:"action"`
	IsDemo      json.RawMessage `json:"is_demo"`
	ToolCalls   []chatToolCall  `json:"tool_calls"`
	ToolCallIDs []string        `json:"tool_call_ids"`
}

// chatToolCall is one Chat Completions tool call as an agent recorded it.
type chatToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// chatCalls converts recorded Chat Completions tool calls into call parts, keeping the
// arguments string as sent (arguments recorded as an object are compacted).
func chatCalls(tcs []chatToolCall) []part {
	var out []part
	for _, tc := range tcs {
		args, ok := rawString(tc.Function.Arguments)
		if !ok {
			c, err := compactJSON(tc.Function.Arguments)
			if err != nil || isNull(tc.Function.Arguments) {
				c = json.RawMessage(`{}`)
			}
			args = string(c)
		}
		out = append(out, part{kind: pCall, id: tc.ID, name: tc.Function.Name, input: argsObject(args), args: args, hasArgs: true})
	}
	return out
}

// sweStandInModel is the model name used when a trajectory does not record one.
const sweStandInModel = "swe-agent-unknown-model"

// importSWEAgent imports a SWE-agent .traj file from its full history. Tool-call ids are kept
// exactly as the agent sent them, including reused ones (see docs/formats.md).
func importSWEAgent(in *input, data []byte) (*Session, error) {
	name := in.name
	var doc struct {
		History      []json.RawMessage `json:"history"`
		ReplayConfig json.RawMessage   `json:"replay_config"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, docError(name, data, err)
	}
	if len(doc.History) == 0 {
		return nil, &ParseError{File: name, Path: "history", Err: ErrEmpty}
	}
	model := sweStandInModel
	if !isNull(doc.ReplayConfig) {
		var rc struct {
			Agent struct {
				Model struct {
					Name string `json:"name"`
				} `json:"model"`
			} `json:"agent"`
		}
		if s, ok := rawString(doc.ReplayConfig); ok {
			_ = json.Unmarshal([]byte(s), &rc)
		} else {
			_ = json.Unmarshal(doc.ReplayConfig, &rc)
		}
		if rc.Agent.Model.Name != "" {
			model = rc.Agent.Model.Name
		}
	}
	b := newBuilder(FormatSWEAgent, OpenAI, Anthropic, OpenAI)
	system := ""
	textCalls := 0 // text-action calls awaiting an observation
	for i, raw := range doc.History {
		var e sweEntry
		path := fmt.Sprintf("history[%d]", i)
		text, err := e.decode(name, data, raw, path)
		if err != nil {
			if err := in.skip(err); err != nil {
				return nil, err
			}
			continue
		}
		switch e.Role {
		case "system":
			if system == "" && b.s.Len() == 0 {
				system = text
			} else {
				b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: text}}})
			}
		case "assistant":
			b.request(RequestPoint{Model: model, Line: i + 1})
			m := msg{role: "assistant", parts: []part{{kind: pText, text: text}}}
			m.parts = append(m.parts, chatCalls(e.ToolCalls)...)
			b.add(m)
			if len(e.ToolCalls) == 0 && strings.TrimSpace(e.Action) != "" {
				b.s.Stats.ToolCalls++
				textCalls++
				b.s.Observations = harnessSWEAgent
			}
		case "tool":
			m := msg{role: "user"}
			for _, id := range e.ToolCallIDs {
				m.parts = append(m.parts, part{kind: pResult, id: id, text: text})
			}
			if len(m.parts) == 0 {
				m = msg{role: "user", str: true, parts: []part{{kind: pText, text: text}}}
			}
			b.add(m)
		default:
			if textCalls > 0 && !demo(e.IsDemo) {
				b.s.Stats.ToolResults++
				textCalls--
			}
			b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: text}}})
		}
	}
	s := b.finish(system, 32000)
	if s.Len() == 0 {
		return nil, &ParseError{File: name, Err: ErrNoRequests}
	}
	return s, nil
}

// decode reads one history entry and returns its text.
func (e *sweEntry) decode(name string, data, raw []byte, path string) (string, error) {
	if err := json.Unmarshal(raw, e); err != nil {
		return "", &ParseError{File: name, Line: lineOfEntry(data, raw), Path: path, Err: unwrapType(err)}
	}
	text, err := trajText(e.Content)
	if err != nil {
		return "", &ParseError{File: name, Line: lineOfEntry(data, raw), Path: path + ".content", Err: unwrapType(err)}
	}
	return text, nil
}

// demo reports whether an is_demo value is set ("True", true).
func demo(raw json.RawMessage) bool {
	if isNull(raw) {
		return false
	}
	if s, ok := rawString(raw); ok {
		return strings.EqualFold(s, "true")
	}
	return string(raw) == "true"
}

// unwrapType renders a decoding error of one entry.
func unwrapType(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := te.Field
		if f != "" {
			f += ": "
		}
		return fmt.Errorf("%swrong type: got JSON %s, want %s", f, te.Value, te.Type)
	}
	return err
}

// lineOfEntry returns the line where the sub-slice raw of data starts (0 when it is not a
// sub-slice, e.g. after unescaping).
func lineOfEntry(data, raw []byte) int {
	if len(raw) == 0 || len(data) == 0 {
		return 0
	}
	// json.RawMessage values decoded by encoding/json are copies; find them by content.
	if i := strings.Index(string(data), string(raw[:min(len(raw), 256)])); i >= 0 {
		return lineOfOffset(data, int64(i))
	}
	return 0
}
