package transcripts

import (
	"encoding/json"
	"maps"
	"sort"
	"strings"
)

// partKind is the kind of one piece of message content in the importer's neutral model.
type partKind uint8

const (
	pText   partKind = iota // plain text
	pRaw                    // an Anthropic content block kept verbatim (Anthropic-native sources)
	pImage                  // an image: Anthropic block in raw, OpenAI data URL in text
	pCall                   // a tool call
	pResult                 // a tool result
)

// part is one piece of message content.
type part struct {
	kind     partKind
	text     string          // pText; pResult: result text for the OpenAI tool message; pImage: OpenAI image URL
	raw      json.RawMessage // pRaw / pImage: Anthropic block; pText / pCall / pResult: the source block kept verbatim (Anthropic)
	id       string          // pCall: call id; pResult: id answered
	aid      string          // pCall / pResult: the Anthropic-form id when a reused id was renamed
	name     string          // pCall: tool name
	input    json.RawMessage // pCall: input object (Anthropic)
	args     string          // pCall: OpenAI arguments string
	hasArgs  bool            // args holds the source's own arguments string
	content  json.RawMessage // pResult: Anthropic content (JSON string or block array); nil → text
	isError  bool            // pResult
	errField bool            // pResult: emit is_error even when false (pi does)
	synth    bool            // pResult: synthetic "No result provided"
}

// msg is one logical message before encoding.
type msg struct {
	role  string // "user" or "assistant"
	parts []part
	str   bool // a single text part that came from string content: encode content as a string
}

// form holds one provider rendering of a session.
type form struct {
	p        Provider
	contexts [][][]byte
	cur      [][]byte
	curIdx   int // index of cur in contexts, -1 when cur is not (or no longer) published
	pendN    int // wire messages the encoded pending message occupies at the end of cur
	head     []byte
	headMsg  bool // head ends with a message: every message is preceded by a comma
	tail     []byte
}

// builder assembles contexts and request points from a stream of logical messages.
type builder struct {
	s           *Session
	forms       []*form
	pend        *msg
	pendEncoded bool
	prevCalls   []string          // call ids of the assistant message before pend
	prevAID     map[string]string // their renamed Anthropic-form ids, where renamed
	ctxCalls    map[string]int    // occurrences of each call's Anthropic-form id in the current context
	lastRole    string            // for Stats.Messages
	replay      bool              // re-adding kept messages after a compaction: no stats
	toolNames   map[string]bool
	missingIDs  int
}

// newBuilder returns a builder producing the given provider forms; the first is the one whose
// context index a request point records.
func newBuilder(format Format, native Provider, forms ...Provider) *builder {
	s := &Session{Format: format, Native: native}
	b := &builder{s: s, toolNames: map[string]bool{}, prevAID: map[string]string{}, ctxCalls: map[string]int{}}
	for _, p := range forms {
		f := &form{p: p, curIdx: -1}
		s.forms[formIndex(p)] = f
		b.forms = append(b.forms, f)
	}
	return b
}

// blankText reports whether s has no non-whitespace character (the APIs reject such blocks).
func blankText(s string) bool { return strings.TrimSpace(s) == "" }

// add appends a logical message, merging it into the previous one when the role is the same.
func (b *builder) add(m msg) {
	parts := m.parts[:0:0]
	for _, p := range m.parts {
		if p.kind == pText && blankText(p.text) {
			continue
		}
		parts = append(parts, p)
	}
	if m.role == "user" {
		parts = b.dropOrphans(parts)
	}
	if len(parts) == 0 {
		return
	}
	m.parts = parts
	if len(parts) != 1 || parts[0].kind != pText {
		m.str = false
	}
	for i := range parts {
		p := &parts[i]
		if p.kind != pCall {
			continue
		}
		// Calls without id or name cannot be sent: give them stand-ins (their results, if
		// any, cannot be matched and are dropped; the call gets a synthetic result).
		if p.id == "" {
			b.missingIDs++
			p.id = "condense_missing_id_" + itoa(b.missingIDs)
			p.raw = nil
		}
		if p.name == "" {
			p.name = "unnamed_tool"
			p.raw = nil
		}
		b.toolNames[p.name] = true
		// Anthropic rejects a tool_use id used twice in one request: a reused id — or one
		// that maps to an id already used ("call same", "call!same") — is renamed in that
		// form (its results follow); the other forms keep the id as sent.
		if n := b.ctxCalls[anthropicID(p.id)]; n > 0 {
			p.aid = renamedID(p.id, n+1)
			p.raw = nil
			if !b.replay {
				b.s.Stats.RenamedCalls++
			}
		}
		b.ctxCalls[anthropicID(p.id)]++
	}
	if !b.replay {
		if m.role != b.lastRole {
			b.s.Stats.Messages++
			b.lastRole = m.role
		}
		for _, p := range parts {
			switch p.kind {
			case pCall:
				b.s.Stats.ToolCalls++
			case pResult:
				b.s.Stats.ToolResults++
				if p.isError {
					b.s.Stats.FailedResults++
				}
			}
		}
	}
	if b.pend != nil && b.pend.role == m.role {
		if b.pendEncoded {
			b.unencode()
		}
		b.pend.parts = append(b.pend.parts, m.parts...)
		b.pend.str = false
		return
	}
	b.finalize()
	mm := m
	b.pend = &mm
}

// dropOrphans removes tool results that cannot answer a call of the assistant message before
// the user message they will land in (so that a message made only of orphans never exists).
func (b *builder) dropOrphans(parts []part) []part {
	calls := b.prevCalls
	if b.pend != nil && b.pend.role == "assistant" {
		calls = nil
		for _, p := range b.pend.parts {
			if p.kind == pCall {
				calls = append(calls, p.id)
			}
		}
	}
	out := parts[:0]
	for _, p := range parts {
		if p.kind == pResult && !p.synth {
			found := false
			for _, c := range calls {
				if c == p.id {
					found = true
					break
				}
			}
			if !found {
				if !b.replay {
					b.s.Stats.OrphanResults++
				}
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// unencode removes the encoded pending message from every form (copy-on-write: the context a
// request already refers to is left intact and a new context starts).
func (b *builder) unencode() {
	for _, f := range b.forms {
		n := len(f.cur) - f.pendN
		f.cur = f.cur[:n:n]
		f.curIdx = -1
		f.pendN = 0
	}
	b.pendEncoded = false
}

// encodePend encodes the pending message into every form (after the user-message fixups).
func (b *builder) encodePend() {
	if b.pend == nil || b.pendEncoded {
		return
	}
	if b.pend.role == "user" {
		b.fixResults(b.pend)
		if len(b.pend.parts) == 0 {
			b.pend = nil
			return
		}
	}
	for _, f := range b.forms {
		n := len(f.cur)
		switch f.p {
		case Anthropic:
			f.cur = append(f.cur, encodeAnthropic(b.pend))
		case OpenAI:
			f.cur = encodeOpenAI(f.cur, b.pend)
		}
		f.pendN = len(f.cur) - n
	}
	b.pendEncoded = true
}

// finalize closes the pending message: encodes it and records its tool calls.
func (b *builder) finalize() {
	if b.pend == nil {
		return
	}
	b.encodePend()
	if b.pend == nil {
		return
	}
	b.prevCalls = b.prevCalls[:0]
	clear(b.prevAID)
	if b.pend.role == "assistant" {
		for _, p := range b.pend.parts {
			if p.kind == pCall {
				b.prevCalls = append(b.prevCalls, p.id)
				if p.aid != "" {
					b.prevAID[p.id] = p.aid
				}
			}
		}
	}
	b.pend = nil
	b.pendEncoded = false
	for _, f := range b.forms {
		f.pendN = 0
	}
}

// fixResults makes a user message valid after the preceding assistant message: tool results
// first (in source order), results that answer no call of that message (or answer one twice)
// dropped, and a synthetic error result for every call left unanswered.
func (b *builder) fixResults(m *msg) {
	var results, others []part
	answered := map[string]bool{}
	want := map[string]bool{}
	for _, id := range b.prevCalls {
		want[id] = true
	}
	for _, p := range m.parts {
		switch {
		case p.kind == pResult && p.synth:
		case p.kind == pResult:
			if !want[p.id] || answered[p.id] {
				if !b.replay {
					b.s.Stats.OrphanResults++
				}
				continue
			}
			answered[p.id] = true
			if a := b.prevAID[p.id]; a != "" {
				p.aid, p.raw = a, nil
			}
			results = append(results, p)
		default:
			others = append(others, p)
		}
	}
	for _, id := range b.prevCalls {
		if !answered[id] {
			answered[id] = true
			if !b.replay {
				b.s.Stats.SyntheticResults++
			}
			results = append(results, part{kind: pResult, id: id, aid: b.prevAID[id], text: "No result provided",
				isError: true, errField: true, synth: true})
		}
	}
	m.parts = append(results, others...)
	if len(m.parts) != 1 || m.parts[0].kind != pText {
		m.str = false
	}
}

// request records a request point: everything added so far is the request's context. It
// returns the request index, or -1 (and counts Stats.EmptyRequests) when nothing precedes
// the response.
func (b *builder) request(pt RequestPoint) int {
	if b.pend != nil && b.pend.role == "assistant" && hasCalls(b.pend) {
		// A response that follows a tool-calling assistant message with no results in
		// between: close the calls with synthetic results so the request stays valid.
		b.finalize()
		b.pend = &msg{role: "user"}
	}
	if b.pend != nil && b.pend.role == "assistant" && !b.pendEncoded {
		// The request ends with an assistant message (an Anthropic prefill, which the
		// response continues): the API rejects trailing whitespace there.
		trimTrailing(b.pend)
		if len(b.pend.parts) == 0 {
			b.pend = nil
		}
	}
	b.encodePend()
	if len(b.forms[0].cur) == 0 {
		// A response with nothing before it: no valid request can be rebuilt for it.
		b.s.Stats.EmptyRequests++
		return -1
	}
	for _, f := range b.forms {
		b.publish(f)
		pt.n[formIndex(f.p)] = len(f.cur)
		pt.ctx[formIndex(f.p)] = f.curIdx
	}
	b.s.points = append(b.s.points, pt)
	if !b.replay {
		b.s.Stats.Requests++
	}
	return len(b.s.points) - 1
}

// hasCalls reports whether m holds a tool call.
func hasCalls(m *msg) bool {
	for _, p := range m.parts {
		if p.kind == pCall {
			return true
		}
	}
	return false
}

// publish makes the current message list visible as a context.
func (b *builder) publish(f *form) {
	if f.curIdx < 0 {
		f.contexts = append(f.contexts, f.cur)
		f.curIdx = len(f.contexts) - 1
	} else {
		f.contexts[f.curIdx] = f.cur
	}
}

// newContext starts a new context (compaction): later messages do not see earlier ones.
func (b *builder) newContext() {
	b.finalize()
	for _, f := range b.forms {
		if len(f.cur) > 0 {
			b.publish(f)
		}
		f.cur = nil
		f.curIdx = -1
		f.pendN = 0
	}
	b.prevCalls = b.prevCalls[:0]
	clear(b.prevAID)
	b.ctxCalls = map[string]int{}
}

// snapshot is a saved builder position, for rewinds and branch switches.
type snapshot struct {
	cur         [][][]byte
	pendN       []int
	pend        *msg
	pendEncoded bool
	prevCalls   []string
	prevAID     map[string]string
	ctxCalls    map[string]int
}

// save returns the current position.
func (b *builder) save() *snapshot {
	sn := &snapshot{pendEncoded: b.pendEncoded, prevCalls: append([]string(nil), b.prevCalls...),
		prevAID: maps.Clone(b.prevAID), ctxCalls: maps.Clone(b.ctxCalls)}
	for _, f := range b.forms {
		sn.cur = append(sn.cur, f.cur[:len(f.cur):len(f.cur)])
		sn.pendN = append(sn.pendN, f.pendN)
	}
	if b.pend != nil {
		p := *b.pend
		p.parts = append([]part(nil), p.parts...)
		sn.pend = &p
	}
	return sn
}

// restore returns to a saved position; the next request starts a new context.
func (b *builder) restore(sn *snapshot) {
	for i, f := range b.forms {
		f.cur = sn.cur[i]
		f.pendN = sn.pendN[i]
		f.curIdx = -1
	}
	b.pend = nil
	if sn.pend != nil {
		p := *sn.pend
		p.parts = append([]part(nil), p.parts...)
		b.pend = &p
	}
	b.pendEncoded = sn.pendEncoded
	b.prevCalls = append(b.prevCalls[:0], sn.prevCalls...)
	b.prevAID = maps.Clone(sn.prevAID)
	if b.prevAID == nil {
		b.prevAID = map[string]string{}
	}
	b.ctxCalls = maps.Clone(sn.ctxCalls)
	if b.ctxCalls == nil {
		b.ctxCalls = map[string]int{}
	}
}

// finish closes the session: publishes trailing messages and renders the request envelopes
// around the messages (system prompt, stand-in tools).
func (b *builder) finish(system string, maxTokens int) *Session {
	b.finalize()
	for _, f := range b.forms {
		if len(f.cur) > 0 || f.curIdx >= 0 {
			b.publish(f)
		}
	}
	s := b.s
	s.system = system
	for i := range s.points {
		s.points[i].Context = s.points[i].ctx[formIndex(s.Native)]
	}
	for n := range b.toolNames {
		s.tools = append(s.tools, n)
	}
	sort.Strings(s.tools)
	for _, f := range b.forms {
		switch f.p {
		case Anthropic:
			h := []byte(`,"max_tokens":` + itoa(maxTokens))
			if system != "" {
				h = append(h, `,"system":`...)
				h = appendJSONString(h, system)
			}
			if len(s.tools) > 0 {
				h = append(h, `,"tools":[`...)
				for i, n := range s.tools {
					if i > 0 {
						h = append(h, ',')
					}
					h = append(h, `{"name":`...)
					h = appendJSONString(h, n)
					h = append(h, `,"description":`...)
					h = appendJSONString(h, toolDescription(s, n))
					h = append(h, `,"input_schema":`...)
					h = append(h, standInSchema...)
					h = append(h, '}')
				}
				h = append(h, ']')
			}
			f.head = append(h, `,"messages":[`...)
			f.tail = []byte(`]}`)
		case OpenAI:
			h := []byte(`,"messages":[`)
			if system != "" {
				h = append(h, `{"role":"system","content":`...)
				h = appendJSONString(h, system)
				h = append(h, '}')
				f.headMsg = true
			}
			f.head = h
			t := []byte(`]`)
			if len(s.tools) > 0 {
				t = append(t, `,"tools":[`...)
				for i, n := range s.tools {
					if i > 0 {
						t = append(t, ',')
					}
					t = append(t, `{"type":"function","function":{"name":`...)
					t = appendJSONString(t, n)
					t = append(t, `,"description":`...)
					t = appendJSONString(t, toolDescription(s, n))
					t = append(t, `,"parameters":`...)
					t = append(t, standInSchema...)
					t = append(t, `}}`...)
				}
				t = append(t, ']')
			}
			f.tail = append(t, '}')
		}
	}
	return s
}

// standInSchema is the input schema of every stand-in tool: any JSON object.
const standInSchema = `{"type":"object","additionalProperties":true}`

// toolDescription is the stand-in description of a tool the session used.
func toolDescription(s *Session, name string) string {
	return "Stand-in schema for the " + string(s.Format) + " tool " + name +
		": the session file does not record tool schemas (condense import)."
}

// validToolID reports whether id matches Anthropic's ^[a-zA-Z0-9_-]+$ (at most 64 chars is
// not required for history, but pi-ai trims to 64; we keep valid ids untouched).
func validToolID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// renamedID is the Anthropic-form id of the k-th call (k ≥ 2) of a context that uses id.
func renamedID(id string, k int) string {
	base, suffix := anthropicID(id), "__"+itoa(k)
	if len(base)+len(suffix) > 64 {
		base = base[:64-len(suffix)]
	}
	return base + suffix
}

// anthropicID maps a tool-call id to one the Anthropic API accepts (pi-ai's normalisation:
// invalid characters become '_', cut to 64 bytes). Valid ids are returned unchanged.
func anthropicID(id string) string {
	if validToolID(id) {
		return id
	}
	if id == "" {
		return "call_empty"
	}
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// encodeAnthropic renders a logical message as an Anthropic Messages API message.
func encodeAnthropic(m *msg) []byte {
	dst := make([]byte, 0, 64+estimate(m))
	dst = append(dst, `{"role":`...)
	dst = appendJSONString(dst, m.role)
	dst = append(dst, `,"content":`...)
	if m.str && len(m.parts) == 1 && m.parts[0].kind == pText {
		dst = appendJSONString(dst, m.parts[0].text)
		return append(dst, '}')
	}
	dst = append(dst, '[')
	for i := range m.parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		p := &m.parts[i]
		switch p.kind {
		case pText:
			if len(p.raw) > 0 {
				dst = append(dst, p.raw...)
				continue
			}
			dst = append(dst, `{"type":"text","text":`...)
			dst = appendJSONString(dst, p.text)
			dst = append(dst, '}')
		case pRaw, pImage:
			dst = append(dst, p.raw...)
		case pCall:
			if len(p.raw) > 0 {
				dst = append(dst, p.raw...)
				continue
			}
			dst = append(dst, `{"type":"tool_use","id":`...)
			dst = appendJSONString(dst, p.anthropicID())
			dst = append(dst, `,"name":`...)
			dst = appendJSONString(dst, p.name)
			dst = append(dst, `,"input":`...)
			if len(p.input) == 0 {
				dst = append(dst, `{}`...)
			} else {
				dst = append(dst, p.input...)
			}
			dst = append(dst, '}')
		case pResult:
			if len(p.raw) > 0 {
				dst = append(dst, p.raw...)
				continue
			}
			dst = append(dst, `{"type":"tool_result","tool_use_id":`...)
			dst = appendJSONString(dst, p.anthropicID())
			switch {
			case len(p.content) > 0:
				dst = append(dst, `,"content":`...)
				dst = append(dst, p.content...)
			case p.text != "":
				dst = append(dst, `,"content":`...)
				dst = appendJSONString(dst, p.text)
			}
			if p.isError {
				dst = append(dst, `,"is_error":true`...)
			} else if p.errField {
				dst = append(dst, `,"is_error":false`...)
			}
			dst = append(dst, '}')
		}
	}
	return append(dst, ']', '}')
}

// anthropicID is the id of a call or result in the Anthropic form.
func (p *part) anthropicID() string {
	if p.aid != "" {
		return p.aid
	}
	return anthropicID(p.id)
}

// estimate is a size hint for an encoded message.
func estimate(m *msg) int {
	n := 0
	for i := range m.parts {
		p := &m.parts[i]
		n += len(p.text) + len(p.raw) + len(p.input) + len(p.content) + len(p.args) + 48
	}
	return n + n/16
}

// encodeOpenAI renders a logical message as Chat Completions messages (a user message with
// tool results becomes one "tool" message per result, then the user message if any content
// remains) and appends them to dst.
func encodeOpenAI(dst [][]byte, m *msg) [][]byte {
	if m.role == "assistant" {
		b := make([]byte, 0, 64+estimate(m))
		b = append(b, `{"role":"assistant","content":`...)
		var texts []string
		for _, p := range m.parts {
			if p.kind == pText {
				texts = append(texts, p.text)
			}
		}
		if len(texts) == 0 {
			b = append(b, `null`...)
		} else {
			b = appendJSONString(b, strings.Join(texts, "\n\n"))
		}
		first := true
		for _, p := range m.parts {
			if p.kind != pCall {
				continue
			}
			if first {
				b = append(b, `,"tool_calls":[`...)
				first = false
			} else {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, p.id)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendJSONString(b, p.name)
			b = append(b, `,"arguments":`...)
			if p.hasArgs {
				b = appendJSONString(b, p.args)
			} else if len(p.input) == 0 {
				b = append(b, `"{}"`...)
			} else {
				b = appendJSONString(b, string(p.input))
			}
			b = append(b, `}}`...)
		}
		if !first {
			b = append(b, ']')
		}
		return append(dst, append(b, '}'))
	}
	var rest []part
	for _, p := range m.parts {
		if p.kind != pResult {
			rest = append(rest, p)
			continue
		}
		b := make([]byte, 0, 48+len(p.text)+len(p.text)/16)
		b = append(b, `{"role":"tool","tool_call_id":`...)
		b = appendJSONString(b, p.id)
		b = append(b, `,"content":`...)
		b = appendJSONString(b, p.text)
		dst = append(dst, append(b, '}'))
	}
	if len(rest) == 0 {
		return dst
	}
	b := make([]byte, 0, 64+estimate(m))
	b = append(b, `{"role":"user","content":`...)
	if m.str && len(rest) == 1 && rest[0].kind == pText {
		b = appendJSONString(b, rest[0].text)
		return append(dst, append(b, '}'))
	}
	b = append(b, '[')
	for i, p := range rest {
		if i > 0 {
			b = append(b, ',')
		}
		switch p.kind {
		case pImage:
			b = append(b, `{"type":"image_url","image_url":{"url":`...)
			b = appendJSONString(b, p.text)
			b = append(b, `}}`...)
		default:
			b = append(b, `{"type":"text","text":`...)
			b = appendJSONString(b, p.text)
			b = append(b, '}')
		}
	}
	b = append(b, ']', '}')
	return append(dst, b)
}

// trimTrailing removes trailing whitespace from the last text part of m (dropping the part
// when nothing remains).
func trimTrailing(m *msg) {
	n := len(m.parts)
	if n == 0 || m.parts[n-1].kind != pText {
		return
	}
	p := &m.parts[n-1]
	t := strings.TrimRight(p.text, " \t\r\n")
	if t == p.text {
		return
	}
	if t == "" {
		m.parts = m.parts[:n-1]
		return
	}
	p.text = t
	p.raw = nil
}
