package cost

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

// itemKind is the segment kind of a Responses input item that is not a message: calls,
// outputs, reasoning and any other item, told apart by their content hash only.
const itemKind = 'i'

// responsesBody adds the segments of a Responses body: tools, "instructions" as the system
// prompt, then the input (a string is one user message, a message item one segment per content
// part, any other item one segment keyed by its JSON).
func (b *builder) responsesBody(root gjson.Result) error {
	est := b.est
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		b.add(0x54, true, t, est.Text(t.Raw)+est.Overhead("block"))
		return true
	})
	b.instructions(root.Get("instructions"))
	input := root.Get("input")
	switch {
	case input.Type == gjson.String:
		b.add('u', true, input, est.Text(input.Str)+est.Overhead("message"))
	case input.IsArray():
		var err error
		input.ForEach(func(_, it gjson.Result) bool {
			err = b.responsesItem(it)
			return err == nil
		})
		return err
	case input.Exists() && input.Type != gjson.Null:
		return fmt.Errorf("%w: input is neither a string nor an array", ErrBody)
	}
	return nil
}

// instructions adds the "instructions" member when it is a string.
func (b *builder) instructions(v gjson.Result) {
	if v.Type == gjson.String {
		b.add(0x53, true, v, b.est.Text(v.Str)+b.est.Overhead("message"))
	}
}

// responsesItem adds the segments of one input item.
func (b *builder) responsesItem(it gjson.Result) error {
	if !it.IsObject() {
		return fmt.Errorf("%w: input item is not an object", ErrBody)
	}
	if t := it.Get("type"); t.Str == "message" || !t.Exists() && it.Get("role").Exists() {
		return b.rawMessage(it, wire.Responses)
	}
	b.add(itemKind, true, it, b.itemTokens(it)+b.est.Overhead("message"))
	return nil
}

// itemTokens estimates an input item that is not a message: a call's name and arguments (a
// custom tool's input), an output's text or parts, reasoning's summary and content texts plus
// its encrypted content, anything else its JSON.
func (b *builder) itemTokens(it gjson.Result) int {
	est := b.est
	n := est.Overhead("block")
	typ := it.Get("type").Str
	switch typ {
	case "function_call":
		return n + est.Text(it.Get("name").Str) + est.Text(it.Get("arguments").Str)
	case "custom_tool_call":
		return n + est.Text(it.Get("name").Str) + est.Text(it.Get("input").Str)
	case "reasoning":
		for _, key := range []string{"summary", "content"} {
			it.Get(key).ForEach(func(_, p gjson.Result) bool {
				n += est.Text(p.Get("text").Str)
				return true
			})
		}
		return n + encryptedTokens(est, it.Get("encrypted_content").Str)
	}
	if o := it.Get("output"); strings.HasSuffix(typ, "_output") && o.Exists() {
		return n + b.contentTokens(o, b.partTokens)
	}
	return n + est.Text(it.Raw)
}

// encryptedTokens estimates the reasoning an encrypted_content string carries as Codex does
// (codex-rs estimate_reasoning_length): three quarters of its base64 length less 650 bytes.
func encryptedTokens(est Estimator, enc string) int {
	n := len(enc)*3/4 - 650
	if n <= 0 {
		return 0
	}
	return est.Text(enc[:n])
}

// responsesRequest adds the segments of a parsed Responses request after its tools, as
// responsesBody does from its bytes: user, system and developer messages from their JSON;
// every item of an assistant run, tool outputs and items without role one by one.
func (fb *fromRequest) responsesRequest(r *wire.Request) {
	if in, ok := r.Field("instructions"); ok {
		fb.instructions(gjson.ParseBytes(in))
	}
	for _, m := range r.Messages {
		if m.Role == wire.RoleAssistant || m.Role == wire.RoleTool || m.Role == "" && isItem(m) {
			for _, blk := range m.Blocks {
				fb.runItem(blk)
			}
			continue
		}
		_ = fb.rawMessage(gjson.ParseBytes(m.Bytes()), wire.Responses)
	}
}

// isItem reports a message without role that stands for an input item other than a message
// (its one block is the item), not a message item whose role is "".
func isItem(m *wire.Message) bool {
	if len(m.Blocks) != 1 {
		return false
	}
	a, b := m.Blocks[0].Raw(), m.Bytes()
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// runItem adds the segments of one block of an assistant run, a tool message or an item
// without role: the item it serializes to (an assistant message item as a message; a bare
// text part as the assistant message item wire writes for it).
func (fb *fromRequest) runItem(blk *wire.Block) {
	if blk.Kind == wire.KindText {
		raw := blk.Raw()
		if blk.Type == "input_text" || blk.Type == "output_text" {
			raw = append(append([]byte(`{"type":"message","role":"assistant","content":[`), raw...), ']', '}')
		}
		_ = fb.rawMessage(gjson.ParseBytes(raw), wire.Responses)
		return
	}
	s, ok := fb.memo.blocks[blk]
	if !ok {
		it := gjson.ParseBytes(blk.Raw())
		s = memoSeg{content: contentHash(it), tokens: fb.itemTokens(it)}
		fb.memo.blocks[blk] = s
	}
	fb.addSeg(itemKind, true, s, fb.est.Overhead("message"))
}
