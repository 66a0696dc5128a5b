package pruner

import (
	"strings"

	"github.com/condense-dev/condense/internal/identity"

	"github.com/condense-dev/condense/internal/wire"
)

// QueryToolName is the name of the recovery tool (reference §14).
const QueryToolName = "context_tree_query"

// class is a message's role class in pi terms.
type class uint8

const (
	clsOther     class = iota // system, developer, unknown roles: barriers, otherwise ignored
	clsPrompt                 // a user message carrying no tool result: a user turn
	clsAssistant              // an assistant message
	clsResults                // Anthropic user message with tool_result blocks; OpenAI tool message; Responses tool output item
)

// call is one tool call of a transcript with its per-turn paired result.
type call struct {
	msg, blk int
	b        *wire.Block
	turn     int // 1-based assistant ordinal
	res      *result
	path     string // pathArg(b.Input), once pathRead
	hasPath  bool
	pathRead bool
}

// pathArg is pathArg of the call's input, read once per analysis.
func (c *call) pathArg() (string, bool) {
	if !c.pathRead {
		if c.b.Format() == wire.Anthropic {
			c.path, c.hasPath = pathArgValid(c.b.Input) // the input is a parsed JSON value
		} else {
			c.path, c.hasPath = pathArg(c.b.Input) // decoded arguments text, maybe not JSON
		}
		c.pathRead = true
	}
	return c.path, c.hasPath
}

// result is one tool result.
type result struct {
	msg, blk int
	b        *wire.Block
	call     *call // nil when no call of its own turn opened it
	key      string
	keyed    bool
	prompts  int       // user prompts seen before it (for grace)
	obs      *obsMatch // a text observation (b and its call are synthetic), else nil
}

// analysis is the analysed transcript shared by planning and render. Its per-message indexes
// are slices by message index, not maps: an analysis is built for every request, over every
// message of the transcript.
type analysis struct {
	f          wire.Format
	msgs       []*wire.Message
	cls        []class
	calls      []*call   // in message and block order
	results    []*result // in message and block order
	assistants []int     // indices of assistant messages
	prompts    []int     // indices of prompt messages
	turnOf     []int     // message index -> 1-based assistant ordinal (0: not an assistant message)
	// callSpan and resultSpan are, by message index, the ranges of calls and results that
	// belong to the message.
	callSpan, resultSpan []span
}

// span is a half-open range [lo, hi) of an analysis's calls or results.
type span struct{ lo, hi int32 }

// callsOf returns the tool calls of message i in block order.
func (v *analysis) callsOf(i int) []*call {
	s := v.callSpan[i]
	return v.calls[s.lo:s.hi:s.hi]
}

// toolUsing reports whether message i is an assistant message with tool calls.
func (v *analysis) toolUsing(i int) bool { s := v.callSpan[i]; return s.hi > s.lo }

// turnHolds reports whether a tool call of assistant message i has a result with occurrence
// key key.
func (v *analysis) turnHolds(i int, key string) bool {
	for _, c := range v.callsOf(i) {
		if c.res != nil && c.res.occKey() == key {
			return true
		}
	}
	return false
}

// isObservation reports whether message i is a text observation.
func (v *analysis) isObservation(i int) bool {
	s := v.resultSpan[i]
	return s.hi > s.lo && v.results[s.lo].obs != nil
}

// resultAt returns the result of block j of message i, or nil.
func (v *analysis) resultAt(i, j int) *result {
	s := v.resultSpan[i]
	for _, r := range v.results[s.lo:s.hi] {
		if r.blk == j {
			return r
		}
	}
	return nil
}

// analysisSlab hands out an analysis's calls and results from a few allocations.
type analysisSlab struct {
	calls   []call
	results []result
}

func (s *analysisSlab) call(c call) *call {
	if len(s.calls) == 0 {
		s.calls = make([]call, 64)
	}
	p := &s.calls[0]
	*p, s.calls = c, s.calls[1:]
	return p
}

func (s *analysisSlab) result(r result) *result {
	if len(s.results) == 0 {
		s.results = make([]result, 64)
	}
	p := &s.results[0]
	*p, s.results = r, s.results[1:]
	return p
}

// newAnalysis analyses a transcript without text observations.
func newAnalysis(f wire.Format, msgs []*wire.Message) *analysis { return analyse(f, msgs, nil) }

// analyse analyses a transcript under a policy: with observations on, a user message that a
// pattern recognises right after an assistant message without tool calls is that message's
// tool result, and the assistant message its call (both synthetic blocks, docs/engine.md).
func analyse(f wire.Format, msgs []*wire.Message, pol *Policy) *analysis {
	var obs *observer
	if pol != nil {
		obs = observerOf(&pol.Observations)
	}
	n := len(msgs)
	v := &analysis{f: f, msgs: msgs, cls: make([]class, n), turnOf: make([]int, n), callSpan: make([]span, n), resultSpan: make([]span, n),
		calls: make([]*call, 0, n/2+1), results: make([]*result, 0, n/2+1), assistants: make([]int, 0, n/2+1)}
	var slab analysisSlab
	var open map[string]*call // current turn's calls by id, unmatched
	prompts := 0
	for i, m := range msgs {
		var om *obsMatch
		if obs != nil && i > 0 {
			om = obs.observation(msgs[i-1], m)
		}
		switch {
		case m.Role == wire.RoleAssistant:
			v.cls[i] = clsAssistant
			v.assistants = append(v.assistants, i)
			turn := len(v.assistants)
			v.turnOf[i] = turn
			if open == nil {
				open = map[string]*call{}
			} else {
				clear(open) // a new turn: only its own calls are open
			}
			lo := len(v.calls)
			for j, b := range m.Blocks {
				if b.Kind != wire.KindToolUse || b.ID == "" {
					continue
				}
				c := slab.call(call{msg: i, blk: j, b: b, turn: turn})
				v.calls = append(v.calls, c)
				if _, dup := open[b.ID]; !dup {
					open[b.ID] = c
				}
			}
			v.callSpan[i] = span{int32(lo), int32(len(v.calls))}
		case hasToolResult(m):
			v.cls[i] = clsResults
			lo := len(v.results)
			for j, b := range m.Blocks {
				if b.Kind != wire.KindToolResult {
					continue
				}
				r := slab.result(result{msg: i, blk: j, b: b, prompts: prompts})
				if c, ok := open[b.ID]; ok && c.res == nil {
					c.res = r
					r.call = c
				}
				v.results = append(v.results, r)
			}
			v.resultSpan[i] = span{int32(lo), int32(len(v.results))}
		case om != nil:
			v.cls[i] = clsResults
			c := slab.call(call{msg: i - 1, blk: -1, b: om.call, turn: v.turnOf[i-1]})
			r := slab.result(result{msg: i, blk: 0, b: om.result, prompts: prompts, obs: om, call: c})
			c.res = r
			v.callSpan[i-1] = span{int32(len(v.calls)), int32(len(v.calls) + 1)}
			v.calls = append(v.calls, c)
			v.resultSpan[i] = span{int32(len(v.results)), int32(len(v.results) + 1)}
			v.results = append(v.results, r)
		case m.Role == wire.RoleUser:
			v.cls[i] = clsPrompt
			v.prompts = append(v.prompts, i)
			prompts++
		default:
			v.cls[i] = clsOther
		}
	}
	return v
}

// hasToolCall reports whether m holds a tool call with an id (what opens a call in a view).
func hasToolCall(m *wire.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind == wire.KindToolUse && b.ID != "" {
			return true
		}
	}
	return false
}

func hasToolResult(m *wire.Message) bool {
	if m.Role == wire.RoleAssistant {
		return false
	}
	for _, b := range m.Blocks {
		if b.Kind == wire.KindToolResult {
			return true
		}
	}
	return false
}

// key returns the occurrence key of a paired result ("" for an unpaired one).
func (r *result) occKey() string {
	if !r.keyed {
		r.keyed = true
		if r.call != nil {
			r.key = identity.OccurrenceKeyOf(r.call.b, r.b)
		}
	}
	return r.key
}

// isSynthetic reports a prompt that is one of our own <compressed-chain> messages.
func isSynthetic(m *wire.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind == wire.KindText {
			return strings.HasPrefix(strings.TrimLeftFunc(b.Text(), jsSpace), "<compressed-chain")
		}
		return false
	}
	return false
}

// msgSig is a structural signature of a message (wire.Message.ShapeSum, computed once per
// message). Messages with equal identity.MessageHash have equal signatures, so resolution
// only hashes messages whose signature matches. It costs O(blocks), not O(bytes).
func msgSig(m *wire.Message) uint64 { return m.ShapeSum() }

// fingerprints computes full fingerprints (with signatures) of the messages at idx.
func (v *analysis) fingerprints(idx []int) []Fingerprint {
	if len(idx) == 0 {
		return nil
	}
	sub := make([]*wire.Message, len(idx))
	for i, j := range idx {
		sub[i] = v.msgs[j]
	}
	fps := identity.Fingerprints(sub)
	out := make([]Fingerprint, len(fps))
	for i, fp := range fps {
		out[i] = Fingerprint{Hash: fp.Hash, Ordinal: fp.Ordinal, Sig: msgSig(sub[i])}
	}
	return out
}

// locator resolves fingerprints within one role class, hashing lazily.
type locator struct {
	v    *analysis
	idx  []int
	sigs []uint64
	full fpIndex // built on demand for fingerprints without signature
}

func (v *analysis) locator(idx []int) *locator {
	return &locator{v: v, idx: idx}
}

// resolve returns the unique message index of fp, or -1 (fail closed).
func (l *locator) resolve(fp Fingerprint) int {
	if fp.Sig == 0 {
		if l.full == nil {
			l.full = l.v.fpIndex(l.idx)
		}
		return l.full.resolve(fp)
	}
	if l.sigs == nil {
		l.sigs = make([]uint64, len(l.idx))
		for i, j := range l.idx {
			l.sigs[i] = msgSig(l.v.msgs[j])
		}
	}
	ord, found := 0, -1
	for i, j := range l.idx {
		if l.sigs[i] != fp.Sig {
			continue
		}
		if identity.MessageHash(l.v.msgs[j]) != fp.Hash { // memoised on the message
			continue
		}
		if ord == fp.Ordinal {
			if found >= 0 {
				return -1
			}
			found = j
		}
		ord++
	}
	return found
}

// fpIndex maps fingerprints (without signature) to message indices; a fingerprint seen twice
// maps to -1.
type fpIndex map[Fingerprint]int

func (v *analysis) fpIndex(idx []int) fpIndex {
	fps := v.fingerprints(idx)
	m := make(fpIndex, len(fps))
	for i, fp := range fps {
		fp.Sig = 0
		if _, dup := m[fp]; dup {
			m[fp] = -1
		} else {
			m[fp] = idx[i]
		}
	}
	return m
}

// resolve returns the unique index of fp, or -1 (fail closed).
func (m fpIndex) resolve(fp Fingerprint) int {
	fp.Sig = 0
	if i, ok := m[fp]; ok {
		return i
	}
	return -1
}

// assistantText joins an assistant message's text blocks with "\n", trimmed.
func assistantText(m *wire.Message) string {
	var parts []string
	for _, b := range m.Blocks {
		if b.Kind == wire.KindText {
			parts = append(parts, b.Text())
		}
	}
	return jsTrim(strings.Join(parts, "\n"))
}

// chainRange is one detected chain (reference §11.1).
type chainRange struct {
	start, end int // message indices; end -1 when interrupted
	ids        []string
	keys       []string
	protected  []string
	protKeys   []string // occurrence keys of protected calls' results
	calls      []*call
	turns      int
}

// detectChains finds chains: a prompt, tool-using turns, a closing text-only assistant.
// Interrupted chains (a new prompt before the close) are returned with end -1; a chain open at
// the end of the transcript is not returned.
func (v *analysis) detectChains(pol *Policy) []*chainRange {
	var out []*chainRange
	var cur *chainRange
	seenID := map[string]bool{}
	seenProt := map[string]bool{}
	for i, m := range v.msgs {
		switch v.cls[i] {
		case clsPrompt:
			if isSynthetic(m) {
				continue
			}
			if cur != nil {
				cur.end = -1
				out = append(out, cur)
			}
			cur = &chainRange{start: i}
			seenID = map[string]bool{}
			seenProt = map[string]bool{}
		case clsAssistant:
			if cur == nil {
				continue
			}
			if !v.toolUsing(i) {
				cur.end = i
				out = append(out, cur)
				cur = nil
				continue
			}
			cur.turns++
			for _, c := range v.callsOf(i) {
				b := c.b
				if b.Name == "" {
					continue
				}
				if !seenID[b.ID] {
					seenID[b.ID] = true
					cur.ids = append(cur.ids, b.ID)
				}
				p, hp := c.pathArg()
				cur.calls = append(cur.calls, c)
				if pol.IsProtected(b.Name, p, hp) && !seenProt[b.ID] {
					seenProt[b.ID] = true
					cur.protected = append(cur.protected, b.ID)
				}
			}
		case clsResults:
			if cur == nil {
				continue
			}
			sp := v.resultSpan[i]
			for _, r := range v.results[sp.lo:sp.hi] {
				if b := r.b; b.ID != "" && !seenID[b.ID] {
					seenID[b.ID] = true
					cur.ids = append(cur.ids, b.ID)
				}
			}
		}
	}
	for _, ch := range out {
		for _, c := range ch.calls {
			if c.res != nil {
				ch.keys = append(ch.keys, c.res.occKey())
				p, hp := c.pathArg()
				if pol.IsProtected(c.b.Name, p, hp) {
					ch.protKeys = append(ch.protKeys, c.res.occKey())
				}
			}
		}
	}
	return out
}

// graceKeys returns the occurrence keys of context_tree_query results still in recovery grace
// (reference §10.1): age in user turns = prompts now - prompts before the result.
func (v *analysis) graceKeys(k int) map[string]bool {
	if k <= 0 {
		return nil
	}
	now := len(v.prompts)
	var g map[string]bool
	for _, r := range v.results {
		if r.call == nil || r.call.b.Name != QueryToolName {
			continue
		}
		if now-r.prompts <= k {
			if g == nil {
				g = map[string]bool{}
			}
			g[r.occKey()] = true
		}
	}
	return g
}
