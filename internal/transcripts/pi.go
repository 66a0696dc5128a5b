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
	user   msg       // decoded user-like content (user, custom, hookMessage, custom_message)
	blocks []piBlock // decoded content blocks (assistant, toolResult)
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

// importPi imports a pi session JSONL file (v1, v2 or v3, with or without its header line).
// v1/v2 are migrated as pi does: entries get ids and parent links in file order,
// firstKeptEntryIndex becomes an entry id.
func importPi(in *input, data []byte) (*Session, error) {
	name := in.name
	entries := []*piEntry{nil} // entries[0] is the header (a stand-in when the file has none)
	err := jsonlLines(in, data, func(line int, rec []byte) error {
		e := &piEntry{line: line}
		if err := unmarshalLine(name, line, rec, e); err != nil {
			return err
		}
		if err := e.decode(name); err != nil {
			return err
		}
		if e.Type == "session" && entries[0] == nil && len(entries) == 1 {
			entries[0] = e
			return nil
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	version := 0
	if entries[0] != nil {
		version = entries[0].Version
	} else {
		// No header line: v2/v3 entries carry ids, v1 entries do not.
		entries[0] = &piEntry{Type: "session"}
		if len(entries) > 1 && len(entries[1].ID) > 0 {
			version = 3
		}
	}
	if version == 0 {
		version = 1
	}
	entries, err = piLink(in, entries, version)
	if err != nil {
		return nil, err
	}
	byID := map[string]int{}
	for i, e := range entries[1:] {
		byID[e.id] = i + 1
	}
	// Branch points: entries whose parent is not the entry just before them.
	needSnap := map[string]bool{}
	prev := ""
	for _, e := range entries[1:] {
		if e.parent != prev && e.parent != "" {
			needSnap[e.parent] = true
		}
		prev = e.id
	}

	b := newBuilder(FormatPi, Anthropic, Anthropic)
	p := &piImporter{name: name, b: b, byID: byID, entries: entries}
	snaps := map[string]*snapshot{}
	var path []*piEntry // root → current leaf
	prev = ""
	for _, e := range entries[1:] {
		if e.parent != prev {
			// Branch switch: go back to the position after the parent.
			sn, ok := snaps[e.parent]
			if e.parent != "" && !ok {
				// pi ends a path at a parent it cannot find: the entry starts a new root.
				if err := in.skip(&ParseError{File: name, Line: e.line, Path: "parentId", Err: fmt.Errorf("parent entry %q not found before this entry (read as a new root)", e.parent)}); err != nil {
					return nil, err
				}
			}
			if ok {
				b.restore(sn)
				path = p.pathTo(e.parent)
			} else {
				b.restore(&snapshot{cur: make([][][]byte, len(b.forms)), pendN: make([]int, len(b.forms))})
				path = path[:0]
			}
		}
		path = append(path, e)
		p.entry(e, path)
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

// decode checks a record and decodes its message content, so that a malformed record is
// rejected (and skipped) as a whole.
func (e *piEntry) decode(name string) error {
	perr := func(path string, err error) error { return &ParseError{File: name, Line: e.line, Path: path, Err: err} }
	if e.Type == "" {
		return perr("type", errors.New("record has no type"))
	}
	var err error
	switch e.Type {
	case "custom_message":
		if e.user, err = piUserContent(e.Content); err != nil {
			return lineError(name, e.line, prefixPath("content", err))
		}
	case "message":
		m := e.Message
		if m == nil {
			return perr("message", errors.New("message record without a message"))
		}
		switch m.Role {
		case "user", "custom", "hookMessage":
			if e.user, err = piUserContent(m.Content); err != nil {
				return lineError(name, e.line, prefixPath("message.content", err))
			}
		case "assistant":
			if !isNull(m.Content) {
				if err := json.Unmarshal(m.Content, &e.blocks); err != nil {
					return lineError(name, e.line, prefixPath("message.content", err))
				}
			}
		case "toolResult":
			if s, ok := rawString(m.Content); ok {
				e.blocks = []piBlock{{Type: "text", Text: s}}
			} else if !isNull(m.Content) {
				if err := json.Unmarshal(m.Content, &e.blocks); err != nil {
					return lineError(name, e.line, prefixPath("message.content", err))
				}
			}
		}
	}
	return nil
}

// piLink gives every entry its id and parent (pi's v1 → v2 migration for linear files) and
// drops, as malformed, entries whose ids cannot be read.
func piLink(in *input, entries []*piEntry, version int) ([]*piEntry, error) {
	name := in.name
	seen := map[string]bool{}
	out := entries[:1]
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
			var bad error
			switch {
			case !ok:
				bad = &ParseError{File: name, Line: e.line, Path: "id", Err: errors.New("id is not a string")}
			case seen[id]:
				bad = &ParseError{File: name, Line: e.line, Path: "id", Err: fmt.Errorf("duplicate entry id %q", id)}
			}
			if p, ok := rawString(e.ParentID); ok {
				e.parent = p
			} else if bad == nil && !isNull(e.ParentID) {
				bad = &ParseError{File: name, Line: e.line, Path: "parentId", Err: errors.New("parentId is neither a string nor null")}
			}
			if bad != nil {
				if err := in.skip(bad); err != nil {
					return nil, err
				}
				continue
			}
			e.id = id
		}
		if e.Type == "compaction" && e.FirstKeptEntryID == "" && e.FirstKeptEntryIndex != nil {
			e.FirstKeptEntryID = "#" + strconv.Itoa(*e.FirstKeptEntryIndex)
		}
		seen[e.id] = true
		prev = e.id
		out = append(out, e)
	}
	return out, nil
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
func (p *piImporter) entry(e *piEntry, path []*piEntry) {
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
				if pe.Type != "compaction" {
					p.message(pe)
				}
			}
			b.replay = false
		}
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
		p.message(e)
	default:
		p.message(e)
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
func (p *piImporter) message(e *piEntry) {
	b := p.b
	switch e.Type {
	case "branch_summary":
		b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: piBranchPrefix + e.Summary + piBranchSuffix}}})
		return
	case "custom_message":
		b.add(e.user)
		return
	case "message":
	default:
		return
	}
	m := e.Message
	switch m.Role {
	case "user", "custom", "hookMessage":
		b.add(e.user)
	case "assistant":
		if m.StopReason == "error" || m.StopReason == "aborted" {
			return
		}
		out := msg{role: "assistant"}
		for _, bl := range e.blocks {
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
		r := part{kind: pResult, id: m.ToolCallID, isError: m.IsError, errField: true}
		var texts []string
		images := false
		for _, bl := range e.blocks {
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
			for _, bl := range e.blocks {
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
			return
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
	}
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
