package transcripts

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
)

// codexLine is one line of a Codex rollout file.
type codexLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// codexPayload holds the payload members the importer reads (response items, turn context,
// session meta, event messages).
type codexPayload struct {
	Type             string          `json:"type"`
	ID               json.RawMessage `json:"id"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	Arguments        json.RawMessage `json:"arguments"`
	Input            json.RawMessage `json:"input"`
	CallID           string          `json:"call_id"`
	Output           json.RawMessage `json:"output"`
	Action           json.RawMessage `json:"action"`
	Model            string          `json:"model"`
	Effort           json.RawMessage `json:"effort"`
	Summary          json.RawMessage `json:"summary"` // turn_context: a string; reasoning items: their summary parts
	Message          json.RawMessage `json:"message"`
	BaseInstructions *struct {
		Text string `json:"text"`
	} `json:"base_instructions"`
	ReplacementHistory []json.RawMessage `json:"replacement_history"`
	Info               *struct {
		LastTokenUsage *struct {
			InputTokens       int64 `json:"input_tokens"`
			CachedInputTokens int64 `json:"cached_input_tokens"`
			OutputTokens      int64 `json:"output_tokens"`
		} `json:"last_token_usage"`
	} `json:"info"`
}

// codexContent is one content part of a Codex message item.
type codexContent struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
}

// codexExitRe finds the exit status in an exec_command output header.
var codexExitRe = regexp.MustCompile(`Process exited with code (-?\d+)`)

// codexStandInSystem is used when a rollout has no session_meta base instructions.
const codexStandInSystem = "You are Codex, a coding agent. (condense import stand-in: this rollout does not record the base instructions.)"

// importCodex imports an OpenAI Codex rollout JSONL file.
func importCodex(in *input, data []byte) (*Session, error) {
	name := in.name
	type rec struct {
		line    int
		ts      string
		typ     string
		p       *codexPayload
		raw     json.RawMessage   // the payload as recorded
		history []*codexPayload   // compacted: the decoded replacement_history
		hraw    []json.RawMessage // and its items as recorded
	}
	var recs []rec
	hasUserItems := false
	err := jsonlLines(in, data, func(line int, raw []byte) error {
		var l codexLine
		if err := unmarshalLine(name, line, raw, &l); err != nil {
			return err
		}
		if l.Type == "" {
			return &ParseError{File: name, Line: line, Path: "type", Err: errors.New("record has no type")}
		}
		p := &codexPayload{}
		if !isNull(l.Payload) {
			if err := json.Unmarshal(l.Payload, p); err != nil {
				return lineError(name, line, prefixPath("payload", err))
			}
		}
		r := rec{line: line, ts: l.Timestamp, typ: l.Type, p: p, raw: l.Payload}
		switch l.Type {
		case "response_item":
			if err := codexCheck(name, line, "payload", p); err != nil {
				return err
			}
		case "compacted":
			for i, it := range p.ReplacementHistory {
				ip := &codexPayload{}
				path := "payload.replacement_history[" + itoa(i) + "]"
				if err := json.Unmarshal(it, ip); err != nil {
					return lineError(name, line, prefixPath(path, err))
				}
				if err := codexCheck(name, line, path, ip); err != nil {
					return err
				}
				r.history = append(r.history, ip)
				r.hraw = append(r.hraw, it)
			}
		}
		if l.Type == "response_item" && p.Type == "message" && p.Role == "user" {
			hasUserItems = true
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	b := newBuilder(FormatCodex, Responses, Anthropic, OpenAI)
	ci := newCodexInput()
	var set codexSettings
	system := ""
	model := ""
	inResp := false
	lastPt := -1
	for _, r := range recs {
		p := r.p
		switch r.typ {
		case "session_meta":
			if p.BaseInstructions != nil && system == "" {
				system = p.BaseInstructions.Text
			}
			if id, ok := rawString(p.ID); ok && set.sessionID == "" {
				set.sessionID = id
			}
			continue
		case "turn_context":
			if p.Model != "" {
				model = p.Model
			}
			if e, ok := rawString(p.Effort); ok && set.effort == "" && e != "" {
				set.effort = e
				set.digest, _ = rawString(p.Summary)
			}
			continue
		case "compacted":
			inResp = false
			b.newContext()
			ci.compact()
			b.s.Stats.Compactions++
			if len(r.history) > 0 {
				b.replay = true
				for i, ip := range r.history {
					codexItem(b, ip)
					ci.add(r.hraw[i])
				}
				b.replay = false
			} else if s, ok := rawString(p.Message); ok {
				b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: s}}})
				ci.addUserText(s)
			}
			continue
		case "event_msg":
			switch p.Type {
			case "token_count":
				if lastPt >= 0 && b.s.points[lastPt].Usage == nil && p.Info != nil && p.Info.LastTokenUsage != nil {
					u := p.Info.LastTokenUsage
					b.s.points[lastPt].Usage = &Usage{InputTokens: u.InputTokens - u.CachedInputTokens,
						OutputTokens: u.OutputTokens, CacheReadTokens: u.CachedInputTokens, CacheWriteTokens: -1}
				}
			case "user_message":
				// Trimmed rollouts keep the user's text only here.
				if !hasUserItems {
					if s, ok := rawString(p.Message); ok {
						inResp = false
						b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: s}}})
						ci.addUserText(s)
					}
				}
			}
			continue
		case "response_item":
		default:
			continue
		}
		if codexIsResponse(p) {
			if !inResp {
				inResp = true
				lastPt = b.request(RequestPoint{Model: model, Line: r.line, Time: parseTime(r.ts)})
				if lastPt >= 0 {
					ci.request(&b.s.points[lastPt])
				}
			}
		} else {
			inResp = false
		}
		codexItem(b, p)
		ci.add(r.raw)
	}
	if system == "" {
		system = codexStandInSystem
	}
	if model == "" {
		model = "codex-unknown-model"
		for i := range b.s.points {
			if b.s.points[i].Model == "" {
				b.s.points[i].Model = model
			}
		}
	}
	s := b.finish(system, 32000)
	if s.Len() == 0 {
		return nil, &ParseError{File: name, Err: ErrNoRequests}
	}
	ci.finish(s, system, set)
	return s, nil
}

// codexIsResponse reports whether a response item was produced by the model.
func codexIsResponse(p *codexPayload) bool {
	switch p.Type {
	case "reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call":
		return true
	case "message":
		return p.Role == "assistant"
	}
	return false
}

// prefixPath prefixes the field of a JSON type error with a path.
func prefixPath(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		c := *te
		if c.Field != "" {
			c.Field = prefix + "." + c.Field
		} else {
			c.Field = prefix
		}
		return &c
	}
	return err
}

// codexCheck rejects a response item the importer cannot read (path names it in the line).
func codexCheck(name string, line int, path string, p *codexPayload) error {
	switch p.Type {
	case "message":
		if _, ok := rawString(p.Content); ok || isNull(p.Content) {
			return nil
		}
		var cs []codexContent
		if err := json.Unmarshal(p.Content, &cs); err != nil {
			return lineError(name, line, prefixPath(path+".content", err))
		}
	case "function_call":
		if _, ok := rawString(p.Arguments); !ok {
			return &ParseError{File: name, Line: line, Path: path + ".arguments", Err: errors.New("function_call arguments is not a JSON string")}
		}
	case "custom_tool_call":
		if _, ok := rawString(p.Input); !ok {
			return &ParseError{File: name, Line: line, Path: path + ".input", Err: errors.New("custom_tool_call input is not a JSON string")}
		}
	case "local_shell_call":
		if !isNull(p.Action) {
			if _, err := compactJSON(p.Action); err != nil {
				return lineError(name, line, err)
			}
		}
	}
	return nil
}

// codexItem adds one response item (checked by codexCheck) to the transcript.
func codexItem(b *builder, p *codexPayload) {
	switch p.Type {
	case "message":
		var cs []codexContent
		if s, ok := rawString(p.Content); ok {
			cs = []codexContent{{Type: "input_text", Text: s}}
		} else if !isNull(p.Content) {
			_ = json.Unmarshal(p.Content, &cs)
		}
		role := "user"
		if p.Role == "assistant" {
			role = "assistant"
		}
		m := msg{role: role}
		for _, c := range cs {
			switch c.Type {
			case "input_text", "output_text", "text":
				m.parts = append(m.parts, part{kind: pText, text: c.Text})
			case "input_image":
				if c.ImageURL != "" {
					m.parts = append(m.parts, part{kind: pImage, text: c.ImageURL, raw: codexImageBlock(c.ImageURL)})
				}
			}
		}
		b.add(m)
	case "reasoning":
		b.s.Stats.DroppedReasoning++
	case "function_call":
		args, _ := rawString(p.Arguments)
		b.add(msg{role: "assistant", parts: []part{{kind: pCall, id: p.CallID, name: p.Name,
			input: argsObject(args), args: args, hasArgs: true}}})
	case "custom_tool_call":
		in, _ := rawString(p.Input)
		obj := appendJSONString([]byte(`{"input":`), in)
		obj = append(obj, '}')
		b.add(msg{role: "assistant", parts: []part{{kind: pCall, id: p.CallID, name: p.Name, input: obj}}})
	case "local_shell_call":
		act := json.RawMessage(`{}`)
		if !isNull(p.Action) {
			act, _ = compactJSON(p.Action)
		}
		b.add(msg{role: "assistant", parts: []part{{kind: pCall, id: p.CallID, name: "local_shell", input: act}}})
	case "web_search_call":
		// Server-side search: no call/result pair the client sends back.
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		out, isErr := codexOutput(p.Output)
		b.add(msg{role: "user", parts: []part{{kind: pResult, id: p.CallID, text: out, isError: isErr}}})
	}
}

// codexImageBlock renders an image URL (usually a data: URL) as an Anthropic image block.
func codexImageBlock(url string) json.RawMessage {
	const pre = "data:"
	if len(url) > len(pre) && url[:len(pre)] == pre {
		rest := url[len(pre):]
		for i := 0; i+8 <= len(rest); i++ {
			if rest[i:i+8] == ";base64," {
				b := appendJSONString([]byte(`{"type":"image","source":{"type":"base64","media_type":`), rest[:i])
				b = append(b, `,"data":`...)
				b = appendJSONString(b, rest[i+8:])
				return append(b, `}}`...)
			}
		}
	}
	b := appendJSONString([]byte(`{"type":"image","source":{"type":"url","url":`), url)
	return append(b, `}}`...)
}

// argsObject returns the arguments as a JSON object for Anthropic tool_use input: the
// compacted arguments when they are a JSON object, else {"arguments": <string>}.
func argsObject(args string) json.RawMessage {
	raw := []byte(args)
	if validJSON(raw) {
		if c, err := compactJSON(raw); err == nil && len(c) > 0 && c[0] == '{' {
			return c
		}
	}
	o := appendJSONString([]byte(`{"arguments":`), args)
	return append(o, '}')
}

// codexOutput returns the text the model saw for a tool output and whether it is an error
// (exec_command header "Process exited with code N", or metadata.exit_code of a custom tool).
func codexOutput(raw json.RawMessage) (string, bool) {
	s, ok := rawString(raw)
	if !ok {
		// Structured output ({content, success}); keep its JSON text.
		c, err := compactJSON(raw)
		if err != nil || isNull(raw) {
			return "", false
		}
		var o struct {
			Success *bool `json:"success"`
		}
		_ = json.Unmarshal(c, &o)
		return string(c), o.Success != nil && !*o.Success
	}
	if len(s) > 0 && s[0] == '{' {
		var o struct {
			Metadata *struct {
				ExitCode *int `json:"exit_code"`
			} `json:"metadata"`
		}
		if json.Unmarshal([]byte(s), &o) == nil && o.Metadata != nil && o.Metadata.ExitCode != nil {
			return s, *o.Metadata.ExitCode != 0
		}
	}
	head := s
	if len(head) > 400 {
		head = head[:400]
	}
	if m := codexExitRe.FindStringSubmatch(head); m != nil {
		n, _ := strconv.Atoi(m[1])
		return s, n != 0
	}
	return s, false
}
