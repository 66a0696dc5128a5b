package transcripts

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tidwall/gjson"
)

// ccRecord is one line of a Claude Code transcript.
type ccRecord struct {
	Type              string          `json:"type"`
	Subtype           string          `json:"subtype"`
	UUID              string          `json:"uuid"`
	ParentUUID        json.RawMessage `json:"parentUuid"`
	IsSidechain       bool            `json:"isSidechain"`
	AgentID           string          `json:"agentId"`
	IsAPIErrorMessage bool            `json:"isApiErrorMessage"`
	Timestamp         string          `json:"timestamp"`
	Message           *ccMessage      `json:"message"`

	line   int
	parent string
}

// ccMessage is the Anthropic API message a user/assistant record carries.
type ccMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *ccUsage        `json:"usage"`
}

// ccUsage is the Anthropic usage object of an assistant record.
type ccUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// ccRedactedSignature is the placeholder the ccspot corpus files carry instead of thinking
// signatures.
const ccRedactedSignature = "[REDACTED_SIGNATURE]"

// ccStandInSystem is the documented stand-in system prompt for Claude Code sessions.
const ccStandInSystem = "You are Claude Code, Anthropic's official CLI for Claude. (condense import stand-in: Claude Code transcripts do not record the system prompt.)"

// isConv reports whether the record is part of the conversation sent to the model.
func (r *ccRecord) isConv() bool { return r.Type == "user" || r.Type == "assistant" }

// importClaudeCode imports a Claude Code transcript (main session file or subagent file).
func importClaudeCode(in *input, data []byte) (*Session, error) {
	name := in.name
	var recs []*ccRecord
	err := jsonlLines(in, data, func(line int, raw []byte) error {
		r := &ccRecord{line: line}
		if t := gjson.GetBytes(raw, "type"); t.Type == gjson.String && t.Str != "user" && t.Str != "assistant" && t.Str != "system" {
			// UI-only records (progress, snapshots, summaries, queue operations): only their
			// place in the parent chain matters; skip decoding their (large) payloads.
			r.Type = t.Str
			r.UUID = gjson.GetBytes(raw, "uuid").String()
			if p := gjson.GetBytes(raw, "parentUuid"); p.Type == gjson.String {
				r.parent = p.Str
			}
			r.IsSidechain = gjson.GetBytes(raw, "isSidechain").Bool()
			r.AgentID = gjson.GetBytes(raw, "agentId").String()
			recs = append(recs, r)
			return nil
		}
		if err := unmarshalLine(name, line, raw, r); err != nil {
			return err
		}
		if r.isConv() && r.Message == nil {
			return &ParseError{File: name, Line: line, Path: "message", Err: fmt.Errorf("%s record without a message", r.Type)}
		}
		if r.isConv() {
			if err := ccCheckContent(name, line, r.Message.Content); err != nil {
				return err
			}
		}
		if p, ok := rawString(r.ParentUUID); ok {
			r.parent = p
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A subagent file holds only sidechain records: one conversation. A main file written by
	// Claude Code 1.x also holds its subagents' conversations inline (sidechain records):
	// each becomes contexts of its own, its requests in file order among the main ones.
	inline := false
	for _, r := range recs {
		if r.isConv() && !r.IsSidechain {
			inline = true
			break
		}
	}
	chains := ccChains(recs, inline)
	c := &ccImporter{name: name, b: newBuilder(FormatClaudeCode, Anthropic, Anthropic)}
	rewinds, targets := ccRewinds(recs, chains)
	snaps := map[string]*ccSnap{}
	states := map[string]*ccSnap{} // the position of every conversation not being read
	cur := ""
	for i, r := range recs {
		if k := chains[i]; k != cur && (r.isConv() || r.Type == "system") {
			states[cur] = c.save()
			sn, ok := states[k]
			if !ok {
				sn = &ccSnap{b: &snapshot{cur: make([][][]byte, len(c.b.forms)), pendN: make([]int, len(c.b.forms))}}
				c.b.s.Stats.Sidechains++
			}
			c.restore(sn)
			cur = k
		}
		if to, ok := rewinds[i]; ok {
			if sn := snaps[to]; sn != nil {
				c.restore(sn)
			}
		}
		c.record(r)
		if targets[r.UUID] {
			snaps[r.UUID] = c.save()
		}
	}
	c.closeResp()
	s := c.b.finish(ccStandInSystem, 32000)
	if s.Len() == 0 {
		return nil, &ParseError{File: name, Err: ErrNoRequests}
	}
	return s, nil
}

// ccChains names the conversation of every record: "" for the main one (and for every record
// when inline is false), else one name per inline sidechain conversation — its agentId, or the
// uuid of its first record (a sidechain record whose parent is no sidechain record).
func ccChains(recs []*ccRecord, inline bool) []string {
	keys := make([]string, len(recs))
	if !inline {
		return keys
	}
	idx := map[string]int{}
	for i, r := range recs {
		if r.UUID != "" {
			idx[r.UUID] = i
		}
	}
	for i, r := range recs {
		switch {
		case !r.IsSidechain:
		case r.AgentID != "":
			keys[i] = "agent " + r.AgentID
		default:
			if p, ok := idx[r.parent]; ok && p < i && keys[p] != "" {
				keys[i] = keys[p]
			} else {
				keys[i] = "root " + r.UUID + "#" + itoa(i)
			}
		}
	}
	return keys
}

// ccRewinds finds rewinds: user prompts whose parent chain reaches a record of their conversation
// after which other records of it were written. It returns record index → uuid to rewind to, and
// the set of uuids whose position must be saved.
func ccRewinds(recs []*ccRecord, chains []string) (map[int]string, map[string]bool) {
	idx := map[string]int{}
	for i, r := range recs {
		if r.UUID != "" {
			idx[r.UUID] = i
		}
	}
	rewinds := map[int]string{}
	targets := map[string]bool{}
	lastConv := map[string]int{} // per conversation
	for i, r := range recs {
		if !r.isConv() {
			continue
		}
		k := chains[i]
		last, seen := lastConv[k]
		if !seen {
			last = -1
		}
		if r.Type == "user" && !ccIsResultRecord(r) && r.parent != "" {
			// Resolve the parent through non-conversation records.
			a, ok := idx[r.parent]
			for steps := 0; ok && !recs[a].isConv(); steps++ {
				if steps > len(recs) { // a parent cycle
					ok = false
					break
				}
				a, ok = idx[recs[a].parent]
			}
			if ok && a < last && chains[a] == k {
				rewinds[i] = recs[a].UUID
				targets[recs[a].UUID] = true
			}
		}
		lastConv[k] = i
	}
	return rewinds, targets
}

// ccCheckContent rejects message content the importer cannot read: it must be a string, null or
// an array of typed blocks.
func ccCheckContent(name string, line int, content json.RawMessage) error {
	if isNull(content) {
		return nil
	}
	if _, ok := rawString(content); ok {
		return nil
	}
	g := gjson.ParseBytes(content)
	if !g.IsArray() {
		var v []json.RawMessage
		return lineError(name, line, prefixPath("message.content", json.Unmarshal(content, &v)))
	}
	var err error
	i := 0
	g.ForEach(func(_, v gjson.Result) bool {
		switch {
		case !v.IsObject():
			err = &ParseError{File: name, Line: line, Path: fmt.Sprintf("message.content[%d]", i), Err: errors.New("content block is not an object")}
		case v.Get("type").Type != gjson.String:
			err = &ParseError{File: name, Line: line, Path: fmt.Sprintf("message.content[%d].type", i), Err: errors.New("content block has no type")}
		}
		i++
		return err == nil
	})
	return err
}

// ccInputObject makes a tool_use input that is not an object into one: {} for none, else
// {"input": <value>}.
func ccInputObject(in gjson.Result) json.RawMessage {
	if !in.Exists() || in.Type == gjson.Null {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(`{"input":` + in.Raw + `}`)
}

// ccResultContentOK reports whether a tool_result content can be sent as recorded: absent, a
// string, or an array of typed blocks.
func ccResultContentOK(c gjson.Result) bool {
	switch {
	case !c.Exists() || c.Type == gjson.String:
		return true
	case !c.IsArray():
		return false
	}
	ok := true
	c.ForEach(func(_, v gjson.Result) bool {
		ok = v.IsObject() && v.Get("type").Type == gjson.String
		return ok
	})
	return ok
}

// ccIsResultRecord reports whether a user record carries a tool result.
func ccIsResultRecord(r *ccRecord) bool {
	if r.Message == nil || len(r.Message.Content) == 0 || r.Message.Content[0] != '[' {
		return false
	}
	found := false
	gjson.ParseBytes(r.Message.Content).ForEach(func(_, v gjson.Result) bool {
		if v.Get("type").String() == "tool_result" {
			found = true
			return false
		}
		return true
	})
	return found
}

// ccImporter is the state of one Claude Code import.
type ccImporter struct {
	name   string
	b      *builder
	respID string // message.id of the open response
	respPt int    // its request index
	synth  bool   // the open response is a synthetic API-error message
	asst   []part // blocks of the open response
	held   []part // tool results written while the response was still streaming
}

// ccSnap is a saved importer position (rewinds).
type ccSnap struct {
	b      *snapshot
	respID string
	respPt int
	synth  bool
	asst   []part
	held   []part
}

// save returns the importer's current position.
func (c *ccImporter) save() *ccSnap {
	return &ccSnap{b: c.b.save(), respID: c.respID, respPt: c.respPt, synth: c.synth,
		asst: append([]part(nil), c.asst...), held: append([]part(nil), c.held...)}
}

// restore returns to a saved position (a rewind).
func (c *ccImporter) restore(sn *ccSnap) {
	c.b.restore(sn.b)
	c.respID, c.respPt, c.synth = sn.respID, sn.respPt, sn.synth
	c.asst = append([]part(nil), sn.asst...)
	c.held = append([]part(nil), sn.held...)
}

// closeResp emits the open response and the tool results written during it.
func (c *ccImporter) closeResp() {
	if c.respID == "" {
		return
	}
	if !c.synth {
		c.b.add(msg{role: "assistant", parts: c.asst})
	}
	if len(c.held) > 0 {
		c.b.add(msg{role: "user", parts: c.held})
	}
	c.respID, c.asst, c.held, c.synth = "", nil, nil, false
}

// record processes one record (its content was checked by ccCheckContent).
func (c *ccImporter) record(r *ccRecord) {
	b := c.b
	switch r.Type {
	case "system":
		if r.Subtype == "compact_boundary" {
			c.closeResp()
			b.newContext()
			b.s.Stats.Compactions++
		}
	case "assistant":
		m := r.Message
		id := m.ID
		if id == "" {
			id = r.UUID
		}
		if id == "" {
			id = "line " + itoa(r.line) // no id at all: a response of its own
		}
		if id != c.respID {
			c.closeResp()
			c.respID = id
			c.synth = r.IsAPIErrorMessage || m.Model == "<synthetic>"
			pt := RequestPoint{Model: m.Model, Line: r.line, Time: parseTime(r.Timestamp), Dropped: c.synth}
			if c.synth {
				b.s.Stats.DroppedResponses++
			}
			c.respPt = b.request(pt)
		}
		if m.Usage != nil && c.respPt >= 0 {
			b.s.points[c.respPt].Usage = &Usage{InputTokens: m.Usage.InputTokens, OutputTokens: m.Usage.OutputTokens,
				CacheReadTokens: m.Usage.CacheReadInputTokens, CacheWriteTokens: m.Usage.CacheCreationInputTokens}
		}
		c.asst = append(c.asst, c.blocks(r, true)...)
	case "user":
		m := r.Message
		var um msg
		if s, ok := rawString(m.Content); ok {
			um = msg{role: "user", str: true, parts: []part{{kind: pText, text: s}}}
		} else {
			um = msg{role: "user", parts: c.blocks(r, false)}
		}
		if c.respID != "" {
			onlyResults := len(um.parts) > 0
			for _, p := range um.parts {
				if p.kind != pResult {
					onlyResults = false
				}
			}
			if onlyResults {
				c.held = append(c.held, um.parts...)
				return
			}
			c.closeResp()
		}
		b.add(um)
	}
}

// blocks converts the content array of a record into parts, keeping each block's bytes.
func (c *ccImporter) blocks(r *ccRecord, assistant bool) []part {
	content := r.Message.Content
	if isNull(content) {
		return nil
	}
	var raws []json.RawMessage
	if json.Unmarshal(content, &raws) != nil {
		return nil // a string: handled by the caller
	}
	var out []part
	for _, raw := range raws {
		g := gjson.ParseBytes(raw)
		switch g.Get("type").String() {
		case "text":
			p := part{kind: pText, text: g.Get("text").String(), raw: raw}
			if g.Get("text").Type != gjson.String {
				p.raw = nil // re-encoded as the text it stands for
			}
			out = append(out, p)
		case "thinking":
			sig := g.Get("signature")
			if sig.Type != gjson.String || sig.Str == "" || sig.Str == ccRedactedSignature || g.Get("thinking").Type != gjson.String {
				c.b.s.Stats.DroppedThinking++
				continue
			}
			out = append(out, part{kind: pRaw, raw: raw})
		case "tool_use":
			in := g.Get("input")
			p := part{kind: pCall, id: g.Get("id").String(), name: g.Get("name").String(), input: json.RawMessage(in.Raw), raw: raw}
			if !validToolID(p.id) || g.Get("name").Type != gjson.String || !in.IsObject() {
				// Not a block the API accepts as recorded: re-encoded (id mapped, input an object).
				p.raw = nil
				if !in.IsObject() {
					p.input = ccInputObject(in)
				}
			}
			out = append(out, p)
		case "tool_result":
			if assistant {
				// A result inside a model turn answers nothing the API would accept.
				c.b.s.Stats.OrphanResults++
				continue
			}
			p := part{kind: pResult, id: g.Get("tool_use_id").String(), isError: g.Get("is_error").Bool(), raw: raw}
			if !validToolID(p.id) || g.Get("tool_use_id").Type != gjson.String || !ccResultContentOK(g.Get("content")) {
				p.raw = nil
				if ct := g.Get("content"); ct.Type == gjson.String {
					p.text = ct.Str
				} else if ccResultContentOK(ct) {
					p.content = json.RawMessage(ct.Raw)
				}
			}
			out = append(out, p)
		default:
			out = append(out, part{kind: pRaw, raw: raw})
		}
	}
	return out
}
