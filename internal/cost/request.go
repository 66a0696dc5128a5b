package cost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

// BreakpointMode says where the cache model takes Anthropic cache breakpoints from.
type BreakpointMode uint8

const (
	// BreakpointsAuto uses the client's cache_control markers when there are any, else those pi and
	// Claude Code place (last tool, last system block, last block of the last message), since
	// transcripts do not record cache_control.
	BreakpointsAuto BreakpointMode = iota
	// BreakpointsClient uses only the request's own cache_control markers.
	BreakpointsClient
)

// ErrBody reports a request body the cost model cannot read.
var ErrBody = errors.New("cost: unreadable request body")

// PromptOptions configures FromBody.
type PromptOptions struct {
	// Format is the body's wire format (zero: wire.Anthropic).
	Format wire.Format
	// Estimator estimates tokens (DefaultEstimator when nil).
	Estimator Estimator
	// Breakpoints selects where Anthropic breakpoints come from.
	Breakpoints BreakpointMode
}

// FromBody flattens a request body into a Prompt: tools, system, then a segment per content
// block (OpenAI: part and tool call; Responses: see responsesPrompt), keyed by the block without
// cache_control plus role and position. Time and Output are the caller's.
func FromBody(body []byte, o PromptOptions) (Prompt, error) {
	if !gjson.ValidBytes(body) {
		return Prompt{}, fmt.Errorf("%w: invalid JSON", ErrBody)
	}
	est := o.Estimator
	if est == nil {
		est = DefaultEstimator
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return Prompt{}, fmt.Errorf("%w: not a JSON object", ErrBody)
	}
	f := o.Format
	if f == 0 {
		f = wire.Anthropic
	}
	b := builder{est: est}
	p := Prompt{Model: root.Get("model").String()}
	if f == wire.Responses {
		if err := b.responsesBody(root); err != nil {
			return Prompt{}, err
		}
		p.Segments = b.segs
		return p, nil
	}
	msgs := root.Get("messages")
	if !msgs.IsArray() {
		return Prompt{}, fmt.Errorf("%w: no messages array", ErrBody)
	}
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		b.add(0x54, true, t, est.Text(t.Raw)+est.Overhead("block"))
		return true
	})
	lastTool := len(b.segs) - 1
	lastSystem := -1
	if f == wire.Anthropic {
		sys := root.Get("system")
		switch {
		case sys.Type == gjson.String:
			b.add(0x53, true, sys, est.Text(sys.Str)+est.Overhead("message"))
		case sys.IsArray():
			first := true
			sys.ForEach(func(_, blk gjson.Result) bool {
				b.add(0x53, first, blk, b.blockTokens(blk))
				first = false
				return true
			})
		}
		if len(b.segs)-1 > lastTool {
			lastSystem = len(b.segs) - 1
		}
	}
	var err error
	msgs.ForEach(func(_, m gjson.Result) bool {
		err = b.rawMessage(m, f)
		return err == nil
	})
	if err != nil {
		return Prompt{}, err
	}
	if f == wire.Anthropic && o.Breakpoints == BreakpointsAuto && !b.anyBreakpoint {
		for _, i := range []int{lastTool, lastSystem, len(b.segs) - 1} {
			if i >= 0 {
				b.segs[i].Breakpoint = true
			}
		}
	}
	p.Segments = b.segs
	return p, nil
}

type builder struct {
	est           Estimator
	segs          []Segment
	anyBreakpoint bool
}

func roleKey(role string) byte {
	switch role {
	case "user":
		return 'u'
	case "assistant":
		return 'a'
	case "system":
		return 's'
	case "developer":
		return 'd'
	case "tool":
		return 't'
	}
	return '?'
}

// rawMessage adds the segments of one message read from its JSON: its content blocks or
// parts, then (OpenAI) its tool calls; an empty message is one segment of framing.
func (b *builder) rawMessage(m gjson.Result, f wire.Format) error {
	est := b.est
	rk := roleKey(m.Get("role").String())
	first := true
	add := func(v gjson.Result, tokens int) {
		if first {
			tokens += est.Overhead("message")
		}
		b.add(rk, first, v, tokens)
		first = false
	}
	content := m.Get("content")
	switch {
	case content.Type == gjson.String:
		add(content, est.Text(content.Str))
	case content.IsArray():
		content.ForEach(func(_, blk gjson.Result) bool {
			if f != wire.Anthropic {
				add(blk, b.partTokens(blk))
			} else {
				add(blk, b.blockTokens(blk))
			}
			return true
		})
	case content.Exists() && content.Type != gjson.Null:
		return fmt.Errorf("%w: message content is neither a string nor an array", ErrBody)
	}
	if f == wire.OpenAI {
		m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			fn := tc.Get("function")
			add(tc, est.Text(fn.Get("name").Str)+est.Text(fn.Get("arguments").Str)+est.Overhead("block"))
			return true
		})
	}
	if first { // empty message: still framing
		add(m, 0)
	}
	return nil
}

// add appends a segment for the JSON value v (a block, part, tool or string).
func (b *builder) add(kind byte, first bool, v gjson.Result, tokens int) {
	s := memoSeg{content: contentHash(v), tokens: tokens}
	if v.IsObject() {
		if cc := v.Get("cache_control"); cc.Exists() {
			s.mark([]byte(cc.Raw))
		}
	}
	b.addSeg(kind, first, s, 0)
}

// addSeg appends the segment s with extra tokens (a message's framing), keyed by its content
// hash mixed with its kind (role, tool or system) and whether it starts its message.
func (b *builder) addSeg(kind byte, first bool, s memoSeg, extra int) {
	var hdr [10]byte
	hdr[0] = kind
	if first {
		hdr[1] = 1
	}
	binary.LittleEndian.PutUint64(hdr[2:], s.content)
	seg := Segment{Key: xxhash.Sum64(hdr[:]), Tokens: s.tokens + extra, Breakpoint: s.breakpoint}
	if s.breakpoint {
		b.anyBreakpoint = true
		if s.ttl1h {
			seg.TTL = TTL1h
		}
	}
	b.segs = append(b.segs, seg)
}

// contentHash hashes a JSON value for segment keys: an object's members (raw key and raw
// value) without cache_control, since the marker is not content; any other value's raw JSON.
func contentHash(v gjson.Result) uint64 {
	if !v.IsObject() {
		return xxhash.Sum64String(v.Raw)
	}
	d := xxhash.New()
	v.ForEach(func(k, val gjson.Result) bool {
		if k.Str != "cache_control" {
			_, _ = d.WriteString(k.Raw)
			_, _ = d.WriteString(val.Raw)
		}
		return true
	})
	return d.Sum64()
}

// contentTokens estimates a content value: a string's text, or the sum of part over the
// elements of an array.
func (b *builder) contentTokens(c gjson.Result, part func(gjson.Result) int) int {
	if c.Type == gjson.String {
		return b.est.Text(c.Str)
	}
	n := 0
	c.ForEach(func(_, p gjson.Result) bool {
		n += part(p)
		return true
	})
	return n
}

// blockTokens estimates an Anthropic content block.
func (b *builder) blockTokens(blk gjson.Result) int {
	est := b.est
	n := est.Overhead("block")
	switch blk.Get("type").Str {
	case "text":
		return n + est.Text(blk.Get("text").Str)
	case "thinking":
		return n + est.Text(blk.Get("thinking").Str)
	case "redacted_thinking":
		return n + est.Text(blk.Get("data").Str)
	case "tool_use", "server_tool_use":
		return n + est.Text(blk.Get("name").Str) + est.Text(blk.Get("input").Raw)
	case "tool_result", "web_search_tool_result":
		return n + b.contentTokens(blk.Get("content"), b.blockTokens)
	case "image":
		src := blk.Get("source")
		return n + est.Image(src.Get("media_type").Str, src.Get("data").Str)
	case "document":
		src := blk.Get("source")
		switch src.Get("type").Str {
		case "text":
			return n + est.Text(src.Get("data").Str)
		case "base64":
			return n + est.Document(src.Get("media_type").Str, src.Get("data").Str)
		}
		return n + est.Text(src.Raw)
	}
	return n + est.Text(blk.Raw)
}

// partTokens estimates an OpenAI content part (Chat Completions or Responses).
func (b *builder) partTokens(part gjson.Result) int {
	est := b.est
	n := est.Overhead("block")
	switch part.Get("type").Str {
	case "text", "input_text", "output_text", "refusal":
		t := part.Get("text")
		if !t.Exists() {
			t = part.Get("refusal")
		}
		return n + est.Text(t.Str)
	case "image_url", "input_image":
		url := part.Get("image_url.url").Str
		if u := part.Get("image_url"); u.Type == gjson.String {
			url = u.Str // a Responses input_image
		}
		if meta, data, ok := strings.Cut(url, ";base64,"); ok && strings.HasPrefix(meta, "data:") {
			return n + est.Image(strings.TrimPrefix(meta, "data:"), data)
		}
		return n + est.Image("", "")
	}
	return n + est.Text(part.Raw)
}
