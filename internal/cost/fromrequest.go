package cost

import (
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

// PromptMemo remembers, by pointer, the segment of every block and tool FromRequest flattened,
// so several renders of one request estimate and hash shared blocks once. It belongs to one
// request and one estimator, is not safe for concurrent use, and its zero value is ready.
type PromptMemo struct {
	blocks map[*wire.Block]memoSeg
	tools  map[*wire.Tool]memoSeg
}

// memoSeg is a segment before its role and position header is mixed into the key.
type memoSeg struct {
	content    uint64 // hash of the value's members without cache_control (see contentHash)
	tokens     int    // tokens without the message overhead
	breakpoint bool
	ttl1h      bool
}

// mark records the breakpoint a raw cache_control value (nil when absent) sets.
func (s *memoSeg) mark(cc []byte) {
	if len(cc) > 0 && string(cc) != "null" {
		s.breakpoint = true
		s.ttl1h = gjson.GetBytes(cc, "ttl").Str == "1h"
	}
}

// stringSeg is the segment of a string-form text block standing alone as string content
// (a message's or the system prompt's): its literal hashed, its text estimated, no block
// framing.
func stringSeg(blk *wire.Block, est Estimator) memoSeg {
	return memoSeg{content: xxhash.Sum64(blk.Raw()), tokens: est.Text(blk.Text())}
}

// FromRequest flattens a parsed or rendered request into the Prompt FromBody would build from
// its bytes (same segments, keys, tokens, breakpoints) without serializing. The request's own
// Format is used (o.Format is ignored); memo may be nil.
func FromRequest(r *wire.Request, o PromptOptions, memo *PromptMemo) Prompt {
	est := o.Estimator
	if est == nil {
		est = DefaultEstimator
	}
	if memo == nil {
		memo = &PromptMemo{}
	}
	if memo.blocks == nil {
		memo.blocks = map[*wire.Block]memoSeg{}
		memo.tools = map[*wire.Tool]memoSeg{}
	}
	f := r.Format
	if f != wire.OpenAI && f != wire.Responses {
		f = wire.Anthropic
	}
	fb := fromRequest{builder: builder{est: est}, memo: memo, f: f}
	b := &fb.builder
	for _, t := range r.Tools {
		b.addSeg(0x54, true, fb.tool(t), 0)
	}
	if f == wire.Responses {
		fb.responsesRequest(r)
		return Prompt{Model: r.Model, Segments: b.segs}
	}
	lastTool := len(b.segs) - 1
	lastSystem := -1
	if f == wire.Anthropic && len(r.System) > 0 {
		if len(r.System) == 1 && r.System[0].IsStringForm() {
			b.addSeg(0x53, true, stringSeg(r.System[0], est), est.Overhead("message"))
		} else {
			for i, blk := range r.System {
				b.addSeg(0x53, i == 0, fb.block(blk), 0)
			}
		}
		lastSystem = len(b.segs) - 1
	}
	for _, m := range r.Messages {
		fb.message(m)
	}
	if f == wire.Anthropic && o.Breakpoints == BreakpointsAuto && !b.anyBreakpoint {
		for _, i := range []int{lastTool, lastSystem, len(b.segs) - 1} {
			if i >= 0 {
				b.segs[i].Breakpoint = true
			}
		}
	}
	return Prompt{Model: r.Model, Segments: b.segs}
}

// fromRequest is one FromRequest call.
type fromRequest struct {
	builder
	memo *PromptMemo
	f    wire.Format
}

// message adds the segments of one message: its content blocks, OpenAI parts and tool calls.
// Messages whose content FromBody would read differently from the parsed blocks (no
// blocks, e.g. empty or null content) are flattened from their JSON as FromBody does.
func (fb *fromRequest) message(m *wire.Message) {
	est := fb.est
	rk := roleKey(string(m.Role))
	blocks := m.Blocks
	if fb.f == wire.OpenAI && m.Role == wire.RoleTool && len(blocks) == 1 && blocks[0].Kind == wire.KindToolResult {
		blocks = blocks[0].Content
	}
	if len(blocks) == 0 {
		_ = fb.rawMessage(gjson.ParseBytes(m.Bytes()), fb.f)
		return
	}
	// Content (OpenAI: every block but the tool calls) comes first, then the tool calls; a
	// lone string-form block is string content.
	isCall := func(blk *wire.Block) bool { return fb.f == wire.OpenAI && blk.Kind == wire.KindToolUse }
	first := true
	add := func(s memoSeg, overhead int) {
		if first {
			overhead += est.Overhead("message")
		}
		fb.addSeg(rk, first, s, overhead)
		first = false
	}
	parts, lone := 0, (*wire.Block)(nil)
	for _, blk := range blocks {
		if !isCall(blk) {
			parts++
			lone = blk
		}
	}
	if parts == 1 && lone.IsStringForm() {
		add(stringSeg(lone, est), 0)
	} else {
		for _, blk := range blocks {
			if !isCall(blk) {
				add(fb.block(blk), 0)
			}
		}
	}
	for _, blk := range blocks {
		if isCall(blk) {
			add(fb.block(blk), 0)
		}
	}
}

// block returns the memoized segment of a content block, part or tool call.
func (fb *fromRequest) block(blk *wire.Block) memoSeg {
	if s, ok := fb.memo.blocks[blk]; ok {
		return s
	}
	var s memoSeg
	if blk.IsStringForm() {
		// Serialized as a text block object inside a content array.
		d := xxhash.New()
		_, _ = d.WriteString(`"type""text""text"`)
		_, _ = d.Write(blk.Raw())
		s = memoSeg{content: d.Sum64(), tokens: fb.est.Overhead("block") + fb.est.Text(blk.Text())}
	} else {
		s.content = memberHash(blk)
		s.mark(blk.CacheControl)
		s.tokens = fb.blockTokens(blk)
	}
	fb.memo.blocks[blk] = s
	return s
}

// blockTokens estimates a block from its parsed fields where they hold exactly what
// FromBody reads, and from its JSON otherwise.
func (fb *fromRequest) blockTokens(blk *wire.Block) int {
	est := fb.est
	n := est.Overhead("block")
	if fb.f == wire.OpenAI {
		if blk.Kind == wire.KindText && blk.Type == "text" && blk.Text() != "" {
			return n + est.Text(blk.Text())
		}
		raw := gjson.ParseBytes(blk.Raw())
		if blk.Kind == wire.KindToolUse {
			fn := raw.Get("function")
			return n + est.Text(fn.Get("name").Str) + est.Text(fn.Get("arguments").Str)
		}
		return fb.partTokens(raw)
	}
	switch blk.Kind {
	case wire.KindText, wire.KindThinking:
		return n + est.Text(blk.Text())
	case wire.KindToolUse, wire.KindServerToolUse:
		return n + est.Text(blk.Name) + est.Text(bytesString(blk.Input))
	case wire.KindToolResult:
		if blk.ContentString && len(blk.Content) == 1 {
			return n + est.Text(blk.Content[0].Text())
		}
		for _, c := range blk.Content {
			if c.IsStringForm() {
				n += est.Overhead("block") + est.Text(c.Text())
			} else {
				n += fb.blockTokens(c)
			}
		}
		return n
	}
	return fb.builder.blockTokens(gjson.ParseBytes(blk.Raw()))
}

// tool returns the memoized segment of a tool definition.
func (fb *fromRequest) tool(t *wire.Tool) memoSeg {
	if s, ok := fb.memo.tools[t]; ok {
		return s
	}
	v := gjson.ParseBytes(t.Raw())
	s := memoSeg{content: contentHash(v), tokens: fb.est.Text(bytesString(t.Raw())) + fb.est.Overhead("block")}
	s.mark(t.CacheControl)
	fb.memo.tools[t] = s
	return s
}

// memberHash is contentHash of a block object, from its parsed members.
func memberHash(blk *wire.Block) uint64 {
	d := xxhash.New()
	blk.EachMember(func(k, v []byte) {
		if !isCacheControlKey(k) {
			_, _ = d.Write(k)
			_, _ = d.Write(v)
		}
	})
	return d.Sum64()
}

// isCacheControlKey reports whether a raw (quoted) key is "cache_control", escapes decoded.
func isCacheControlKey(k []byte) bool {
	if string(k) == `"cache_control"` {
		return true
	}
	for _, c := range k {
		if c == '\\' {
			return gjson.ParseBytes(k).Str == "cache_control"
		}
	}
	return false
}

// bytesString views b as a string without copying; the caller must not keep it.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
