package transcripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// gmMessage is one Gemini CLI message record (ConversationRecord.messages[i]).
type gmMessage struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`    // user, gemini; info, error, warning are not sent
	Content   json.RawMessage `json:"content"` // @google/genai PartListUnion
	ToolCalls []gmToolCall    `json:"toolCalls"`
	Model     string          `json:"model"`
	Tokens    *struct {
		Input    float64 `json:"input"`
		Output   float64 `json:"output"`
		Cached   float64 `json:"cached"`
		Thoughts float64 `json:"thoughts"`
	} `json:"tokens"`

	line int
}

// gmToolCall is a ToolCallRecord: a call the model made and the result parts sent back.
type gmToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args"`
	Result    json.RawMessage `json:"result"`
	Status    string          `json:"status"`
	Timestamp string          `json:"timestamp"`
}

// gmStandInSystem is the documented stand-in system prompt for Gemini CLI sessions.
const gmStandInSystem = "You are Gemini CLI, an interactive CLI agent for software engineering tasks. (condense import stand-in: Gemini CLI chat files do not record the system prompt.)"

// gmEpoch is the message list between two rewrites of a chat log: the first carried messages
// were already sent before the rewrite (a rewind or a history checkpoint).
type gmEpoch struct {
	msgs      []*gmMessage
	carried   int
	rewritten bool // started by a $set of the whole history (e.g. a compression), not a rewind
}

// importGeminiCLI imports a Gemini CLI chat file: the JSON ConversationRecord of
// chats/session-*.json (up to 0.36) or the JSONL log of chats/session-*.jsonl (a metadata
// line, message records that replace earlier ones with the same id, $rewindTo and $set).
func importGeminiCLI(in *input, data []byte) (*Session, error) {
	var epochs []gmEpoch
	var err error
	if trim := bytes.TrimSpace(data); validJSON(trim) && gjson.GetBytes(trim, "messages").IsArray() {
		epochs, err = gmDocument(in, trim)
	} else {
		epochs, err = gmLog(in, data)
	}
	if err != nil {
		return nil, err
	}
	b := newBuilder(FormatGeminiCLI, OpenAI, Anthropic, OpenAI)
	first := true
	for _, e := range epochs {
		if len(e.msgs) == e.carried {
			continue
		}
		if !first {
			b.newContext()
			if e.rewritten {
				b.s.Stats.Compactions++
			}
		}
		first = false
		b.replay = true
		for _, m := range e.msgs[:e.carried] {
			gmAdd(b, m, time.Time{})
		}
		b.replay = false
		var last time.Time
		for _, m := range e.msgs[e.carried:] {
			last = gmAdd(b, m, last)
		}
	}
	s := b.finish(gmStandInSystem, 32000)
	if s.Len() == 0 {
		return nil, &ParseError{File: in.name, Err: ErrNoRequests}
	}
	return s, nil
}

// gmDocument reads a legacy ConversationRecord: one epoch.
func gmDocument(in *input, data []byte) ([]gmEpoch, error) {
	var doc struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, docError(in.name, data, err)
	}
	if len(doc.Messages) == 0 {
		return nil, &ParseError{File: in.name, Path: "messages", Err: ErrEmpty}
	}
	var e gmEpoch
	for i, raw := range doc.Messages {
		m := &gmMessage{line: i + 1}
		if err := m.decode(in.name, lineOfEntry(data, raw), raw, fmt.Sprintf("messages[%d]", i)); err != nil {
			if err := in.skip(err); err != nil {
				return nil, err
			}
			continue
		}
		e.msgs = append(e.msgs, m)
	}
	return []gmEpoch{e}, nil
}

// gmLog replays a JSONL chat log into epochs.
func gmLog(in *input, data []byte) ([]gmEpoch, error) {
	var epochs []gmEpoch
	var cur gmEpoch
	pos := map[string]int{}
	reindex := func() {
		clear(pos)
		for i, m := range cur.msgs {
			pos[m.ID] = i
		}
	}
	restart := func(msgs []*gmMessage, rewritten bool) {
		epochs = append(epochs, cur)
		cur = gmEpoch{msgs: msgs, carried: len(msgs), rewritten: rewritten}
		reindex()
	}
	err := jsonlLines(in, data, func(line int, rec []byte) error {
		switch {
		case gjson.GetBytes(rec, "$rewindTo").Type == gjson.String:
			to := gjson.GetBytes(rec, "$rewindTo").Str
			kept := []*gmMessage{}
			if i, ok := pos[to]; ok {
				kept = append(kept, cur.msgs[:i]...)
			}
			restart(kept, false)
		case gjson.GetBytes(rec, "$set").IsObject():
			set := gjson.GetBytes(rec, "$set.messages")
			if !set.IsArray() {
				return nil // metadata only
			}
			var msgs []*gmMessage
			for i, v := range set.Array() {
				m := &gmMessage{line: line}
				if err := m.decode(in.name, line, []byte(v.Raw), fmt.Sprintf("$set.messages[%d]", i)); err != nil {
					return err
				}
				msgs = append(msgs, m)
			}
			restart(msgs, true)
		case gjson.GetBytes(rec, "id").Type == gjson.String:
			m := &gmMessage{line: line}
			if err := m.decode(in.name, line, rec, ""); err != nil {
				return err
			}
			if i, ok := pos[m.ID]; ok {
				m.line = cur.msgs[i].line // an update keeps the message's place
				cur.msgs[i] = m
				return nil
			}
			pos[m.ID] = len(cur.msgs)
			cur.msgs = append(cur.msgs, m)
		case gjson.GetBytes(rec, "sessionId").Type == gjson.String:
			// The metadata line (or a legacy record written on one line).
			if ms := gjson.GetBytes(rec, "messages"); ms.IsArray() {
				for i, v := range ms.Array() {
					m := &gmMessage{line: line}
					if err := m.decode(in.name, line, []byte(v.Raw), fmt.Sprintf("messages[%d]", i)); err != nil {
						return err
					}
					pos[m.ID] = len(cur.msgs)
					cur.msgs = append(cur.msgs, m)
				}
			}
		default:
			return &ParseError{File: in.name, Line: line, Err: errors.New("neither a message, a $rewindTo, a $set nor the metadata record")}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(epochs, cur), nil
}

// decode reads one message record and checks the parts it will need.
func (m *gmMessage) decode(name string, line int, raw []byte, path string) error {
	if err := json.Unmarshal(raw, m); err != nil {
		return &ParseError{File: name, Line: line, Path: path, Err: unwrapType(err)}
	}
	if m.ID == "" && m.Type != "info" && m.Type != "error" && m.Type != "warning" {
		return &ParseError{File: name, Line: line, Path: joinPath(path, "id"), Err: errors.New("message record without an id")}
	}
	if err := gmCheckParts(m.Content); err != nil {
		return &ParseError{File: name, Line: line, Path: joinPath(path, "content"), Err: err}
	}
	for i, tc := range m.ToolCalls {
		if err := gmCheckParts(tc.Result); err != nil {
			return &ParseError{File: name, Line: line, Path: joinPath(path, fmt.Sprintf("toolCalls[%d].result", i)), Err: err}
		}
	}
	return nil
}

// joinPath joins JSON path segments.
func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// gmCheckParts rejects content that is no PartListUnion (string, part object, or array of them).
func gmCheckParts(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	g := gjson.ParseBytes(raw)
	ok := g.Type == gjson.String || g.IsObject()
	if g.IsArray() {
		ok = true
		g.ForEach(func(_, v gjson.Result) bool {
			ok = v.Type == gjson.String || v.IsObject()
			return ok
		})
	}
	if !ok {
		return errors.New("content is not a string, a part or a list of parts")
	}
	return nil
}

// gmParts returns the parts of a PartListUnion (strings become text parts).
func gmParts(raw json.RawMessage) []gjson.Result {
	g := gjson.ParseBytes(raw)
	var items []gjson.Result
	if g.IsArray() {
		items = g.Array()
	} else if g.Exists() && g.Type != gjson.Null {
		items = []gjson.Result{g}
	}
	return items
}

// gmAdd adds one message (and, for a model turn, the request before it and its tool results)
// and returns when the conversation's last turn ended; last is that time before m.
func gmAdd(b *builder, m *gmMessage, last time.Time) time.Time {
	ts := parseTime(m.Timestamp)
	switch m.Type {
	default: // info, error, warning: shown, not sent
		return last
	case "user":
		um := msg{role: "user"}
		for _, p := range gmParts(m.Content) {
			um.parts = append(um.parts, gmPart(p)...)
		}
		b.add(um)
	case "gemini":
		if !b.replay {
			sent := last
			if sent.IsZero() {
				sent = ts
			}
			model := m.Model
			if model == "" {
				model = "gemini-cli-unknown-model"
			}
			pt := RequestPoint{Model: model, Line: m.line, Time: sent}
			if t := m.Tokens; t != nil {
				pt.Usage = &Usage{InputTokens: int64(t.Input - t.Cached), OutputTokens: int64(t.Output + t.Thoughts),
					CacheReadTokens: int64(t.Cached), CacheWriteTokens: -1}
			}
			b.request(pt)
		}
		am, results := msg{role: "assistant"}, msg{role: "user"}
		for _, p := range gmParts(m.Content) {
			if p.Get("thought").Bool() {
				continue // thoughts are not sent back
			}
			if p.Type == gjson.String {
				am.parts = append(am.parts, part{kind: pText, text: p.Str})
			} else if t := p.Get("text"); t.Type == gjson.String {
				am.parts = append(am.parts, part{kind: pText, text: t.Str})
			}
		}
		for _, tc := range m.ToolCalls {
			in := json.RawMessage(`{}`)
			if c, err := compactJSON(tc.Args); err == nil && len(c) > 0 && c[0] == '{' {
				in = c
			}
			am.parts = append(am.parts, part{kind: pCall, id: tc.ID, name: tc.Name, input: in})
			if !isNull(tc.Result) {
				text, failed := gmResult(tc.Result)
				results.parts = append(results.parts, part{kind: pResult, id: tc.ID, text: text,
					isError: failed || tc.Status == "error" || tc.Status == "cancelled"})
			}
			if t := parseTime(tc.Timestamp); t.After(ts) {
				ts = t
			}
		}
		b.add(am)
		b.add(results)
	}
	return ts
}

// gmPart converts one user part: text, an inline image, or a placeholder for other data.
func gmPart(p gjson.Result) []part {
	switch {
	case p.Type == gjson.String:
		return []part{{kind: pText, text: p.Str}}
	case p.Get("text").Type == gjson.String:
		return []part{{kind: pText, text: p.Get("text").Str}}
	case p.Get("inlineData").IsObject():
		mime, data := p.Get("inlineData.mimeType").String(), p.Get("inlineData.data").String()
		if strings.HasPrefix(mime, "image/") {
			url := "data:" + mime + ";base64," + data
			return []part{{kind: pImage, text: url, raw: codexImageBlock(url)}}
		}
		return []part{{kind: pText, text: "[inline " + mime + " data]"}}
	case p.Get("fileData").IsObject():
		return []part{{kind: pText, text: "[file " + p.Get("fileData.fileUri").String() + "]"}}
	}
	return nil
}

// gmResult returns the text of a tool call's result parts and whether it reports an error:
// functionResponse.response.output, else .error, else the response as JSON; text parts too.
func gmResult(raw json.RawMessage) (string, bool) {
	var texts []string
	failed := false
	for _, p := range gmParts(raw) {
		switch {
		case p.Type == gjson.String:
			texts = append(texts, p.Str)
		case p.Get("functionResponse").IsObject():
			r := p.Get("functionResponse.response")
			switch {
			case r.Get("output").Type == gjson.String:
				texts = append(texts, r.Get("output").Str)
			case r.Get("error").Exists():
				failed = true
				texts = append(texts, r.Get("error").String())
			case r.Exists():
				if c, err := compactJSON([]byte(r.Raw)); err == nil {
					texts = append(texts, string(c))
				}
			}
		case p.Get("text").Type == gjson.String:
			texts = append(texts, p.Get("text").Str)
		}
	}
	return strings.Join(texts, "\n"), failed
}
