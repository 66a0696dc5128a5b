package transcripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// piEntry is one record of a pi session file (any version).
type piEntry struct {
	Type                string          `json:"type"`
	ID                  json.RawMessage `json:"id"`
	ParentID            json.RawMessage `json:"parentId"`
	Timestamp           string          `json:"timestamp"`
	Version             int             `json:"version"`
	Message             *piMessage      `json:"message"`
	Summary             string          `json:"summary"`
	FirstKeptEntryID    string          `json:"firstKeptEntryId"`
	FirstKeptEntryIndex *int            `json:"firstKeptEntryIndex"`
	ModelID             string          `json:"modelId"`
	Content             json.RawMessage `json:"content"`

	line   int
	id     string
	parent string
}

// piMessage is a pi AgentMessage.
type piMessage struct {
	Role               string          `json:"role"`
	Content            json.RawMessage `json:"content"`
	Model              string          `json:"model"`
	StopReason         string          `json:"stopReason"`
	Usage              *piUsage        `json:"usage"`
	Timestamp          json.RawMessage `json:"timestamp"`
	ToolCallID         string          `json:"toolCallId"`
	IsError            bool            `json:"isError"`
	Command            string          `json:"command"`
	Output             string          `json:"output"`
	ExitCode           *int            `json:"exitCode"`
	Cancelled          bool            `json:"cancelled"`
	Truncated          bool            `json:"truncated"`
	FullOutputPath     string          `json:"fullOutputPath"`
	ExcludeFromContext bool            `json:"excludeFromContext"`
}

// piUsage is pi's per-response usage record.
type piUsage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
}

// piBlock is one content block of a pi message.
type piBlock struct {
	Type              string          `json:"type"`
	Text              string          `json:"text"`
	Thinking          string          `json:"thinking"`
	ThinkingSignature string          `json:"thinkingSignature"`
	Redacted          bool            `json:"redacted"`
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Arguments         json.RawMessage `json:"arguments"`
	Data              string          `json:"data"`
	MimeType          string          `json:"mimeType"`
}

// pi context-message templates (coding-agent messages.js).
const (
	piCompactionPrefix = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
	piCompactionSuffix = "\n</summary>"
	piBranchPrefix     = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
	piBranchSuffix     = "</summary>"
)

// piStandInSystem is the documented stand-in system prompt for pi sessions.
const piStandInSystem = "You are pi, a coding agent working in the user's repository with the tools read, bash, edit, write, grep, find and ls. (condense import stand-in: pi session files do not record the system prompt.)"

// importPi imports a pi session JSONL file (v1, v2 or v3). v1/v2 are migrated as pi does:
// entries get ids and parent links in file order, firstKeptEntryIndex becomes an entry id.
func importPi(name string, data []byte) (*Session, error) {
	var entries []*piEntry
	err := jsonlLines(name, data, func(line int, rec []byte) error {
		e := &piEntry{line: line}
		if err := unmarshalLine(name, line, rec, e); err != nil {
			return err
		}
		if e.Type == "" {
			return &ParseError{File: name, Line: line, Path: "type", Err: errors.New("record has no type")}
		}
		if e.Type == "message" && e.Message == nil {
			return &ParseError{File: name, Line: line, Path: "message", Err: errors.New("message record without a message")}
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if entries[0].Type != "session" {
		return nil, &ParseError{File: name, Line: entries[0].line, Err: fmt.Errorf("not a pi session: first record has type %q, want \"session\"", entries[0].Type)}
	}
	version := entries[0].Version
	if version == 0 {
		version = 1
	}
	// Migration to v3 ids: v1 entries are linear and have no ids.
	byID := map[string]int{}
	prev := ""
	for i, e := range entries {
		if i == 0 {
			continue
		}
		if version < 2 || len(e.ID) == 0 {
			e.id = "#" + strconv.Itoa(i)
			e.parent = prev
		} else {
			id, ok := rawString(e.ID)
			if !ok {
				return nil, &ParseError{File: name, Line: e.line, Path: "id", Err: errors.New("id is not a string")}
			}
			e.id = id
			if p, ok := rawString(e.ParentID); ok {
				e.parent = p
			} else if !isNull(e.ParentID) {
				return nil, &ParseError{File: name, Line: e.line, Path: "parentId", Err: errors.New("parentId is neither a string nor null")}
			}
		}
		if e.Type == "compaction" && e.FirstKeptEntryID == "" && e.FirstKeptEntryIndex != nil {
			e.FirstKeptEntryID = "#" + strconv.Itoa(*e.FirstKeptEntryIndex)
		}
		if _, dup := byID[e.id]; dup {
			return nil, &ParseError{File: name, Line: e.line, Path: "id", Err: fmt.Errorf("duplicate entry id %q", e.id)}
		}
		byID[e.id] = i
		prev = e.id
	}
	// Branch points: entries whose parent is not the entry just before them.
	needSnap := map[string]bool{}
	prev = ""
	for _, e := range entries[1:] {
		if e.parent != prev && e.parent != "" {
			needSnap[e.parent] = true
		}
		prev = e.id
	}

	b := newBuilder(FormatPi, Anthropic, false)
	p := &piImporter{name: name, b: b, byID: byID, entries: entries}
	snaps := map[string]*snapshot{}
	var path []*piEntry // root → current leaf
	prev = ""
	for _, e := range entries[1:] {
		if e.parent != prev {
			// Branch switch: go back to the position after the parent.
			if e.parent == "" {
				b.restore(&snapshot{cur: make([][][]byte, len(b.forms)), pendN: make([]int, len(b.forms))})
				path = path[:0]
			} else {
				sn, ok := snaps[e.parent]
				if !ok {
					return nil, &ParseError{File: name, Line: e.line, Path: "parentId", Err: fmt.Errorf("parent entry %q not found before this entry", e.parent)}
				}
				b.restore(sn)
				path = p.pathTo(e.parent)
			}
		}
		path = append(path, e)
		if err := p.entry(e, path); err != nil {
			return nil, err
		}
		if needSnap[e.id] {
			snaps[e.id] = b.save()
		}
		prev = e.id
	}
	s := b.finish(piStandInSystem, 32000)
	if s.Len() == 0 {
		return nil, &ParseError{File: name, Err: ErrNoRequests}
	}
	return s, nil
}

// piImporter carries the state of one pi import.
type piImporter struct {
	name    string
	b       *builder
	byID    map[string]int
	entries []*piEntry
}

// pathTo returns the entries from the root to id (inclusive).
func (p *piImporter) pathTo(id string) []*piEntry {
	var rev []*piEntry
	for id != "" && len(rev) <= len(p.entries) {
		i, ok := p.byID[id]
		if !ok {
			break
		}
		e := p.entries[i]
		rev = append(rev, e)
		id = e.parent
	}
	out := make([]*piEntry, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// entry processes one entry on the current path.
func (p *piImporter) entry(e *piEntry, path []*piEntry) error {
	b := p.b
	switch e.Type {
	case "compaction":
		b.s.Stats.Compactions++
		b.newContext()
		b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: piCompactionPrefix + e.Summary + piCompactionSuffix}}})
		// Re-add the kept entries (firstKept .. before the compaction) without counting them.
		start := -1
		for i, pe := range path[:len(path)-1] {
			if pe.id == e.FirstKeptEntryID {
				start = i
				break
			}
		}
		if start >= 0 {
			b.replay = true
			for _, pe := range path[start : len(path)-1] {
				if pe.Type == "compaction" {
					continue
				}
				if _, err := p.message(pe); err != nil {
					b.replay = false
					return err
				}
			}
			b.replay = false
		}
		return nil
	case "message":
		if e.Message.Role == "assistant" {
			m := e.Message
			pt := RequestPoint{Model: m.Model, Line: e.line, Time: piTime(m.Timestamp, e.Timestamp)}
			if m.Usage != nil {
				pt.Usage = &Usage{InputTokens: m.Usage.Input, OutputTokens: m.Usage.Output,
					CacheReadTokens: m.Usage.CacheRead, CacheWriteTokens: m.Usage.CacheWrite}
			}
			if m.StopReason == "error" || m.StopReason == "aborted" {
				pt.Dropped = true
				b.s.Stats.DroppedResponses++
			}
			b.request(pt)
		}
		_, err := p.message(e)
		return err
	default:
		_, err := p.message(e)
		return err
	}
}

// piTime returns the request time of an assistant message: message.timestamp (unix ms, the
// request start) or the entry's ISO timestamp.
func piTime(ms json.RawMessage, iso string) time.Time {
	if n, err := strconv.ParseFloat(string(ms), 64); err == nil && n > 0 {
		return time.UnixMilli(int64(n)).UTC()
	}
	if s, ok := rawString(ms); ok {
		if t := parseTime(s); !t.IsZero() {
			return t
		}
	}
	return parseTime(iso)
}

// message converts one entry to LLM messages (pi's convertToLlm + pi-ai's Anthropic provider).
func (p *piImporter) message(e *piEntry) (bool, error) {
	b := p.b
	perr := func(path string, err error) error {
		return &ParseError{File: p.name, Line: e.line, Path: path, Err: err}
	}
	switch e.Type {
	case "branch_summary":
		b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: piBranchPrefix + e.Summary + piBranchSuffix}}})
		return true, nil
	case "custom_message":
		m, err := piUserContent(e.Content)
		if err != nil {
			return false, perr("content", err)
		}
		b.add(m)
		return true, nil
	case "message":
	default:
		return false, nil
	}
	m := e.Message
	switch m.Role {
	case "user", "custom", "hookMessage":
		um, err := piUserContent(m.Content)
		if err != nil {
			return false, perr("message.content", err)
		}
		b.add(um)
	case "assistant":
		if m.StopReason == "error" || m.StopReason == "aborted" {
			return false, nil
		}
		var blocks []piBlock
		if !isNull(m.Content) {
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				return false, lineError(p.name, e.line, prefixPath("message.content", err))
			}
		}
		out := msg{role: "assistant"}
		for _, bl := range blocks {
			switch bl.Type {
			case "text":
				out.parts = append(out.parts, part{kind: pText, text: bl.Text})
			case "thinking":
				switch {
				case bl.Redacted:
					raw := appendJSONString([]byte(`{"type":"redacted_thinking","data":`), bl.ThinkingSignature)
					out.parts = append(out.parts, part{kind: pRaw, raw: append(raw, '}')})
				case bl.ThinkingSignature != "":
					raw := appendJSONString([]byte(`{"type":"thinking","thinking":`), bl.Thinking)
					raw = append(raw, `,"signature":`...)
					raw = appendJSONString(raw, bl.ThinkingSignature)
					out.parts = append(out.parts, part{kind: pRaw, raw: append(raw, '}')})
				default:
					// pi-ai sends thinking without a signature as plain text.
					out.parts = append(out.parts, part{kind: pText, text: bl.Thinking})
				}
			case "toolCall":
				in := bl.Arguments
				if isNull(in) {
					in = json.RawMessage(`{}`)
				}
				out.parts = append(out.parts, part{kind: pCall, id: bl.ID, name: bl.Name, input: in})
			}
		}
		b.add(out)
	case "toolResult":
		var blocks []piBlock
		if s, ok := rawString(m.Content); ok {
			blocks = []piBlock{{Type: "text", Text: s}}
		} else if !isNull(m.Content) {
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				return false, lineError(p.name, e.line, prefixPath("message.content", err))
			}
		}
		r := part{kind: pResult, id: m.ToolCallID, isError: m.IsError, errField: true}
		var texts []string
		images := false
		for _, bl := range blocks {
			switch bl.Type {
			case "text":
				texts = append(texts, bl.Text)
			case "image":
				images = true
			}
		}
		r.text = strings.Join(texts, "\n")
		if images {
			arr := []byte{'['}
			n := 0
			for _, bl := range blocks {
				var blk []byte
				switch bl.Type {
				case "text":
					blk = appendJSONString([]byte(`{"type":"text","text":`), bl.Text)
					blk = append(blk, '}')
				case "image":
					blk = piImageBlock(bl)
				default:
					continue
				}
				if n > 0 {
					arr = append(arr, ',')
				}
				arr = append(arr, blk...)
				n++
			}
			if len(texts) == 0 {
				arr = append(arr, `,{"type":"text","text":"(see attached image)"}`...)
			}
			r.content = append(arr, ']')
		}
		b.add(msg{role: "user", parts: []part{r}})
	case "bashExecution":
		if m.ExcludeFromContext {
			return false, nil
		}
		t := "Ran `" + m.Command + "`\n"
		if m.Output != "" {
			t += "```\n" + m.Output + "\n```"
		} else {
			t += "(no output)"
		}
		if m.Cancelled {
			t += "\n\n(command cancelled)"
		} else if m.ExitCode != nil && *m.ExitCode != 0 {
			t += "\n\nCommand exited with code " + strconv.Itoa(*m.ExitCode)
		}
		if m.Truncated && m.FullOutputPath != "" {
			t += "\n\n[Output truncated. Full output: " + m.FullOutputPath + "]"
		}
		b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: t}}})
	default:
		return false, nil
	}
	return true, nil
}

// piImageBlock renders a pi image block as an Anthropic base64 image block.
func piImageBlock(bl piBlock) []byte {
	blk := []byte(`{"type":"image","source":{"type":"base64","media_type":`)
	blk = appendJSONString(blk, bl.MimeType)
	blk = append(blk, `,"data":`...)
	blk = appendJSONString(blk, bl.Data)
	return append(blk, `}}`...)
}

// piUserContent converts pi user content (string or text/image blocks).
func piUserContent(raw json.RawMessage) (msg, error) {
	if s, ok := rawString(raw); ok {
		return msg{role: "user", str: true, parts: []part{{kind: pText, text: s}}}, nil
	}
	if isNull(raw) {
		return msg{role: "user"}, nil
	}
	var blocks []piBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return msg{}, err
	}
	m := msg{role: "user"}
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			m.parts = append(m.parts, part{kind: pText, text: bl.Text})
		case "image":
			m.parts = append(m.parts, part{kind: pImage, raw: piImageBlock(bl), text: "data:" + bl.MimeType + ";base64," + bl.Data})
		}
	}
	return m, nil
}
