package fidelity

import (
	"math/bits"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// Memo remembers the token forms of content blocks and tool definitions by a hash of their
// bytes, so a session's requests scan each block once. Not safe for concurrent use, but an
// Overlay's parent may be shared by many overlays once nothing writes it any more.
type Memo struct {
	parent *Memo
	keep   map[Token]struct{} // when non-nil, only these tokens are remembered
	m      map[uint64]*forms
}

// forms are the token forms of one block or tool: its class (tool: a tool result or text
// observation; obs: the latter), its tool call id (tool results, observations), and its
// distinct tokens, sorted.
type forms struct {
	tool, obs bool
	id        string
	toks      []Token
}

// NewMemo returns an empty memo that keeps every token.
func NewMemo() *Memo { return &Memo{m: map[uint64]*forms{}} }

// Restrict returns a memo holding m's entries reduced to the tokens in keep, and keeping only
// those from then on: an index over it answers for those tokens alone, at a fraction of the
// work. m is not changed.
func (m *Memo) Restrict(keep map[Token]struct{}) *Memo {
	r := &Memo{keep: keep, m: make(map[uint64]*forms, len(m.m))}
	for k, f := range m.m {
		r.m[k] = &forms{tool: f.tool, obs: f.obs, id: f.id, toks: filter(f.toks, keep)}
	}
	return r
}

// Overlay returns a memo that reads m's entries and writes its own: m, which must not be
// written any more, can be shared by the overlays of several goroutines.
func (m *Memo) Overlay() *Memo { return &Memo{parent: m, keep: m.keep, m: map[uint64]*forms{}} }

func filter(toks []Token, keep map[Token]struct{}) []Token {
	if keep == nil {
		return toks
	}
	var out []Token
	for _, t := range toks {
		if _, ok := keep[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

func (m *Memo) get(k uint64) *forms {
	for p := m; p != nil; p = p.parent {
		if f, ok := p.m[k]; ok {
			return f
		}
	}
	return nil
}

// blockKey is the memo key of a content block: a hash of its bytes and kind.
func blockKey(b *wire.Block) uint64 {
	if raw := b.Raw(); len(raw) > 0 {
		return xxhash.Sum64(raw) ^ uint64(b.Kind)
	}
	return xxhash.Sum64String(b.Text()) ^ uint64(b.Kind)<<8
}

// observation returns the forms of a text observation (pruner.ObservationOf): the text of its
// message's first block b, as the result of call id.
func (m *Memo) observation(b *wire.Block, id string) *forms {
	k := blockKey(b) ^ xxhash.Sum64String("observation\x00"+id)
	if f := m.get(k); f != nil {
		return f
	}
	var c collector
	Forms(b.Text(), c.add)
	f := &forms{tool: true, obs: true, id: strings.Clone(id), toks: filter(c.sorted(), m.keep)}
	m.m[k] = f
	return f
}

// block returns the forms of a content block: its text (text, thinking), the string values
// of its input (tool calls) or the text of its content (tool results).
func (m *Memo) block(b *wire.Block) *forms {
	k := blockKey(b)
	if f := m.get(k); f != nil {
		return f
	}
	f := &forms{}
	var c collector
	switch b.Kind {
	case wire.KindText, wire.KindThinking:
		Forms(b.Text(), c.add)
	case wire.KindToolUse, wire.KindServerToolUse:
		jsonStrings(b.Input, func(s string) { Forms(s, c.add) })
	case wire.KindToolResult:
		f.tool, f.id = true, strings.Clone(b.ID) // not a view into the request body, which it would keep alive
		for _, p := range b.Content {
			if p.Kind == wire.KindText {
				Forms(p.Text(), c.add)
			}
		}
	}
	f.toks = filter(c.sorted(), m.keep)
	m.m[k] = f
	return f
}

// tool returns the forms of a tool definition: the string values of its JSON.
func (m *Memo) tool(t *wire.Tool) *forms {
	k := xxhash.Sum64(t.Raw()) ^ 0x7001
	if f := m.get(k); f != nil {
		return f
	}
	var c collector
	jsonStrings(t.Raw(), func(s string) { Forms(s, c.add) })
	f := &forms{toks: filter(c.sorted(), m.keep)}
	m.m[k] = f
	return f
}

// jsonStrings calls fn with every string value (not key) inside a JSON document.
func jsonStrings(raw []byte, fn func(string)) {
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.Type == gjson.String:
			fn(v.Str)
		case v.IsObject() || v.IsArray():
			v.ForEach(func(_, e gjson.Result) bool {
				walk(e)
				return true
			})
		}
	}
	if len(raw) > 0 {
		walk(gjson.ParseBytes(raw))
	}
}

// collector gathers tokens; sorted returns them sorted and distinct.
type collector struct{ toks []Token }

func (c *collector) add(s string) { c.toks = append(c.toks, TokenOf(s)) }

func (c *collector) sorted() []Token {
	if len(c.toks) == 0 {
		return nil
	}
	slices.Sort(c.toks)
	return slices.Compact(c.toks)
}

// Index is the set of tokens one request shows, split into those inside tool results (and text
// observations, with Observe) and those anywhere else. Update moves it to the next request
// re-reading only changed messages. An Index is not safe for concurrent use.
type Index struct {
	memo  *Memo
	obs   pruner.ObservationPolicy // selects the text observations counted as tool results
	ents  []entry
	count [2]map[Token]int32 // [0] inside tool results, [1] elsewhere
}

// entry is one position of the indexed request (the tools, the system prompt, each message)
// with the hash of its bytes and the forms it added.
type entry struct {
	key   uint64
	parts []*forms
}

// NewIndex returns an empty index reading and writing memo (a fresh one when nil).
func NewIndex(memo *Memo) *Index {
	if memo == nil {
		memo = NewMemo()
	}
	return &Index{memo: memo, count: [2]map[Token]int32{{}, {}}}
}

// Observe makes the index count the text observations o recognises (pruner.ObservationOf: the
// engine's own recognition) as tool results of their synthetic calls, from the next Update on.
func (x *Index) Observe(o pruner.ObservationPolicy) { x.obs = o }

// Update makes the index show request r.
func (x *Index) Update(r *wire.Request) {
	d := xxhash.New()
	for _, t := range r.Tools {
		_, _ = d.Write(t.Raw())
	}
	x.set(0, d.Sum64(), func() []*forms {
		var parts []*forms
		for _, t := range r.Tools {
			parts = append(parts, x.memo.tool(t))
		}
		return parts
	})
	d.Reset()
	for _, b := range r.System {
		_, _ = d.Write(b.Raw())
		_, _ = d.WriteString(b.Text())
	}
	x.set(1, d.Sum64(), func() []*forms { return x.blocks(r.System) })
	var prev *wire.Message
	var prevHash uint64
	for i, m := range r.Messages {
		h := xxhash.Sum64(m.Bytes()) ^ uint64(len(m.Blocks))
		key := h
		if x.obs.Enabled && prev != nil {
			key ^= bits.RotateLeft64(prevHash, 1) // whether m is an observation, and its id, depend on prev
		}
		x.set(2+i, key, func() []*forms { return x.message(prev, m) })
		prev, prevHash = m, h
	}
	for i := 2 + len(r.Messages); i < len(x.ents); i++ {
		x.apply(x.ents[i].parts, -1)
	}
	x.ents = x.ents[:2+len(r.Messages)]
}

// message returns the forms of message m, which follows prev: its blocks', the first read as
// an observation's when m is one.
func (x *Index) message(prev, m *wire.Message) []*forms {
	if o, ok := pruner.ObservationOf(prev, m, x.obs); ok {
		return append([]*forms{x.memo.observation(m.Blocks[0], o.Result.ID)}, x.blocks(m.Blocks[1:])...)
	}
	return x.blocks(m.Blocks)
}

func (x *Index) blocks(bs []*wire.Block) []*forms {
	parts := make([]*forms, 0, len(bs))
	for _, b := range bs {
		parts = append(parts, x.memo.block(b))
	}
	return parts
}

// set makes position i hold the content hashed key, building its forms when it changed.
func (x *Index) set(i int, key uint64, build func() []*forms) {
	if i < len(x.ents) {
		if x.ents[i].key == key {
			return
		}
		x.apply(x.ents[i].parts, -1)
	} else {
		x.ents = append(x.ents, entry{})
	}
	parts := build()
	x.apply(parts, 1)
	x.ents[i] = entry{key: key, parts: parts}
}

func (x *Index) apply(parts []*forms, delta int32) {
	for _, f := range parts {
		c := x.count[1]
		if f.tool {
			c = x.count[0]
		}
		for _, t := range f.toks {
			if n := c[t] + delta; n > 0 {
				c[t] = n
			} else {
				delete(c, t)
			}
		}
	}
}

// Shows reports whether the request shows t anywhere.
func (x *Index) Shows(t Token) bool {
	return x.count[0][t] > 0 || x.count[1][t] > 0
}

// OnlyInToolResults reports whether t occurs in the request's tool results and nowhere else.
func (x *Index) OnlyInToolResults(t Token) bool {
	return x.count[0][t] > 0 && x.count[1][t] == 0
}

// ObservationMessage returns the index of the message of the indexed request that is the text
// observation with call id id (Observe), or -1.
func (x *Index) ObservationMessage(id string) int {
	for i := 2; i < len(x.ents); i++ {
		for _, f := range x.ents[i].parts {
			if f.obs && f.id == id {
				return i - 2
			}
		}
	}
	return -1
}

// sources returns the ids of the tool calls whose results (or observations) show t, in
// request order.
func (x *Index) sources(t Token) []string {
	var ids []string
	for _, e := range x.ents {
		for _, f := range e.parts {
			if _, ok := slices.BinarySearch(f.toks, t); ok && f.tool {
				ids = append(ids, f.id)
			}
		}
	}
	return ids
}
