package wire

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// A Responses body's "input" (a string, or a list of items) maps onto Messages as a Chat
// Completions transcript would (docs/formats.md "Responses API requests"): a run of
// model-produced items is one assistant message, a tool output a tool message.

// responsesPartKind returns the Kind of a Responses content part (of a message or a tool
// output) whose "type" is typ.
func responsesPartKind(typ string) Kind {
	switch typ {
	case "input_text", "output_text":
		return KindText
	case "input_image":
		return KindImage
	case "input_file":
		return KindDocument
	}
	return KindUnknown
}

// responsesInput parses the "input" member at d[vs]: a string or an array of items.
func (p *parser) responsesInput(r *Request, vs int) (int, error) {
	d := p.d
	r.Messages, r.msgsArr, r.inputStr, r.reused = nil, nil, false, 0
	switch d[vs] {
	case '"':
		e, _, err := scanString(d, vs)
		if err != nil {
			return 0, err
		}
		r.Messages, r.inputStr = []*Message{p.inputStringMessage(d[vs:e])}, true
		r.msgHomes = p.messageHomes(0, 1)
		return e, nil
	case '[':
		return p.responsesItems(r, vs)
	}
	return 0, p.wrongType(vs, 1, root("input"), "string or array")
}

// inputStringMessage is the user message a string input stands for: the item
// {"role":"user","content":<lit>}, held in memory of its own (so a reusing parse never pins
// the body through it).
func (p *parser) inputStringMessage(lit []byte) *Message {
	const prefix = `{"role":"user","content":`
	raw := make([]byte, 0, len(prefix)+len(lit)+1)
	raw = append(raw, prefix...)
	raw = append(raw, lit...)
	raw = append(raw, '}')
	e := len(raw) - 1 // the end of lit
	m := &Message{Role: RoleUser, StringContent: true, f: p.f, obj: &object{raw: raw}, hasContent: true}
	m.Blocks = []*Block{stringBlock(p.f, raw[len(prefix):e:e])}
	p.keep(cap(raw) + int(unsafe.Sizeof(Message{})+unsafe.Sizeof(Block{})+unsafe.Sizeof(object{})))
	return m
}

// responsesItems parses the input item array at d[vs] == '[' into r.Messages, sharing the
// previous request's identical leading messages (an assistant message only when the item
// after it is the same too, so that its run ends where it did).
func (p *parser) responsesItems(r *Request, vs int) (int, error) {
	d := p.d
	var prevMsgs []*Message
	if pr := p.prev; pr != nil && !pr.inputStr {
		prevMsgs = pr.origMessages
	}
	mBase, sBase, gBase := len(p.msgStack), len(p.spanStack), len(p.blkStack)
	items := 0     // items seen, for error paths
	gs := 0        // the open assistant run's first item start
	var run []span // item spans of the open run, relative to gs
	// push adds a message and its span (relative to vs).
	push := func(m *Message, s, e int) {
		p.msgStack = append(p.msgStack, m)
		p.spanStack = append(p.spanStack, span{s: s - vs, e: e - vs})
	}
	closeRun := func() {
		if len(run) > 0 {
			ge := gs + run[len(run)-1].e
			push(p.runMessage(d[gs:ge:ge], p.blkStack[gBase:], run), gs, ge)
			p.blkStack, run = p.blkStack[:gBase], run[:0]
		}
	}
	end, err := scanArray(d, vs, 2, func(_, es int) (int, error) {
		if len(run) == 0 && len(p.msgStack)-mBase == r.reused && r.reused < len(prevMsgs) {
			if e, ok := p.unchangedAt(prevMsgs, r.reused, es); ok {
				pm := prevMsgs[r.reused]
				push(pm, es, e)
				r.reused++
				items += itemCount(pm)
				return e, nil
			}
		}
		path := root("input").at(items)
		items++
		if d[es] != '{' {
			return 0, p.wrongType(es, 2, path, "object")
		}
		b, m, e, err := p.responsesItem(es, 3, path)
		switch {
		case err != nil:
			return 0, err
		case b != nil:
			if len(run) == 0 {
				gs = es
			}
			p.blkStack = append(p.blkStack, b)
			run = append(run, span{s: es - gs, e: e - gs})
		default:
			closeRun()
			push(m, es, e)
		}
		return e, nil
	})
	if err == nil {
		closeRun()
	}
	p.blkStack = p.blkStack[:gBase]
	r.Messages = p.messageList(mBase)
	spans := slices.Clone(p.spanStack[sBase:])
	p.spanStack = p.spanStack[:sBase]
	if err != nil {
		return 0, err
	}
	r.msgsArr = &array{raw: d[vs:end:end], spans: spans}
	r.msgHomes = p.messageHomes(r.reused, len(r.Messages))
	return end, nil
}

// itemCount returns how many input items message m was parsed from.
func itemCount(m *Message) int {
	if m.itemsArr != nil {
		return len(m.itemsArr.spans)
	}
	return 1
}

// unchangedAt reports whether the previous request's message prevMsgs[i] stands unchanged
// at d[es] (returning the offset after it): the same bytes, and for an assistant message
// also the same next item, which is not model-produced (it was not in prev's run).
func (p *parser) unchangedAt(prevMsgs []*Message, i, es int) (int, bool) {
	d := p.d
	raw := prevMsgs[i].obj.raw
	if !bytes.HasPrefix(d[es:], raw) {
		return 0, false
	}
	e := es + len(raw)
	if prevMsgs[i].itemsArr == nil {
		return e, true
	}
	j := skipWS(d, e)
	return e, i+1 < len(prevMsgs) && j < len(d) && d[j] == ',' && bytes.HasPrefix(d[skipWS(d, j+1):], prevMsgs[i+1].obj.raw)
}

// runMessage is the assistant message of a run of model-produced items: raw spans them,
// blocks are theirs (copied), spans their positions in raw.
func (p *parser) runMessage(raw []byte, blocks []*Block, spans []span) *Message {
	m := p.newMessage()
	m.Role, m.Blocks, m.hasContent = RoleAssistant, p.blockSlice(blocks), true
	m.obj = take(p, &p.objs, 128)
	m.obj.raw = raw
	m.itemsArr = take(p, &p.arrs, 64)
	m.itemsArr.raw, m.itemsArr.spans = raw, slabCopy(p, &p.spanSlab, spans, 1024)
	return m
}

// responsesItem parses the item object at d[i] == '{': a model-produced item is returned as
// a block of an assistant message, any other as its own message.
func (p *parser) responsesItem(i, depth int, path jpath) (*Block, *Message, int, error) {
	it := &fields{path: &path, idx: -1}
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		return p.note(it, fieldOf(p.d[ks:ke]), depth, vs)
	})
	if err != nil {
		return nil, nil, 0, err
	}
	typ, hasType, err := p.str(it, mfType, true)
	if err != nil {
		return nil, nil, 0, err
	}
	if typ == "message" || !hasType && it.val[mfRole].e != 0 {
		role, ok, err := p.str(it, mfRole, true)
		switch {
		case err != nil:
			return nil, nil, 0, err
		case !ok:
			return nil, nil, 0, p.schemaErr(i, path, "message item has no \"role\"")
		case role == "assistant":
			b, err := p.assistantItem(it, obj, depth, path, typ)
			return b, nil, end, err
		}
		m := p.newMessage() // a user, system or developer message (or one of an unknown role)
		m.Role, m.obj = Role(role), obj
		m.Blocks, m.contentArr, m.StringContent, m.hasContent, err = p.itemContent(it, depth, path, mfContent, false)
		if err != nil {
			return nil, nil, 0, err
		}
		return nil, m, end, nil
	}
	if !hasType {
		return nil, nil, 0, p.schemaErr(i, path, "input item has no \"type\"")
	}
	switch typ {
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output": // a tool message
		m, err := p.outputItem(it, obj, depth, path, typ)
		return nil, m, end, err
	case "reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call",
		"file_search_call", "computer_call", "code_interpreter_call", "image_generation_call",
		"mcp_call", "mcp_list_tools", "mcp_approval_request", "shell_call", "apply_patch_call",
		"tool_search_call": // model-produced: a block of the assistant message of its run
		b, err := p.modelItem(it, obj, depth, typ)
		return b, nil, end, err
	}
	m := p.newMessage() // an unknown item: a message without role, the item kept raw
	m.obj = obj
	b, _ := p.modelItem(it, obj, depth, typ) // a KindUnknown block
	m.Blocks = p.blockSlice([]*Block{b})
	return nil, m, end, nil
}

// assistantItem parses an assistant message item into a KindText block whose Text is its
// content's text (the string, or the "text" of its parts joined with "\n").
func (p *parser) assistantItem(it *fields, obj *object, depth int, path jpath, typ string) (*Block, error) {
	b := p.newBlock()
	b.Kind, b.Type, b.obj = KindText, typ, obj
	v, off := p.value(it, mfContent)
	switch {
	case v == nil:
	case v[0] == '"':
		b.setText(lazyText(v))
	case v[0] == '[':
		b.setText(p.partsText(off, depth+1))
	default:
		return nil, p.wrongType(off, depth, path.key("content"), "string or array")
	}
	return b, nil
}

// partsText returns, for setText, the "text" members of the objects of the validated array
// at d[i] joined with "\n" (output_text parts, a reasoning summary); a lone text stays lazy.
func (p *parser) partsText(i, depth int) (string, bool) {
	d := p.d
	var first string
	var firstEsc bool
	var joined []byte
	n := 0
	_, _ = scanArray(d, i, depth, func(_, es int) (int, error) {
		if d[es] != '{' {
			return scanValue(d, es, depth)
		}
		var text string
		var esc, has bool
		e, err := scanObject(d, es, depth+1, func(ks, ke, vs int) (int, error) {
			if d[vs] != '"' || !keyMatch(d[ks:ke], "text") {
				return scanValue(d, vs, depth+1)
			}
			e, x, err := scanString(d, vs)
			text, esc, has = bodyString(d[vs+1:e-1]), x, true
			return e, err
		})
		if has {
			switch n++; n {
			case 1:
				first, firstEsc = text, esc
			case 2:
				joined = appendText(append(appendText(nil, first, firstEsc), '\n'), text, esc)
			default:
				joined = appendText(append(joined, '\n'), text, esc)
			}
		}
		return e, err
	})
	if n <= 1 {
		return first, firstEsc
	}
	p.keep(len(joined))
	return bodyString(joined), false
}

// modelItem parses a model-produced item other than an assistant message (an unknown item
// into a KindUnknown block, with its call_id as ID).
func (p *parser) modelItem(it *fields, obj *object, depth int, typ string) (*Block, error) {
	b := p.newBlock()
	b.Type, b.obj = typ, obj
	var err error
	switch typ {
	case "reasoning":
		b.Kind = KindReasoning
		b.Signature, _, _ = p.str(it, mfEncrypted, false)
		if v, off := p.value(it, mfSummary); v != nil && v[0] == '[' {
			b.setText(p.partsText(off, depth+1))
		}
	case "function_call", "custom_tool_call":
		b.Kind = KindToolUse
		err = p.callID(it, b, false)
		b.Name = p.must(it, mfName, &err)
		key := mfArguments
		if typ == "custom_tool_call" {
			key = mfInput
		}
		if v, _ := p.value(it, key); v != nil {
			b.Input = p.input(v)
		}
	case "local_shell_call":
		b.Kind, b.Name = KindToolUse, "local_shell"
		err = p.callID(it, b, true)
		b.Input, _ = p.value(it, mfAction)
	case "web_search_call":
		b.Kind, b.Name = KindServerToolUse, "web_search"
		b.ID, _, _ = p.str(it, mfID, false)
		b.Input, _ = p.value(it, mfAction)
	default:
		b.Kind = KindUnknown
		b.ID, _, _ = p.str(it, mfCallID, false)
	}
	return b, err
}

// callID sets b.ID to the item's "call_id" (a schema error when not a string), or when that
// is empty and orID, to its "id".
func (p *parser) callID(it *fields, b *Block, orID bool) (err error) {
	if b.ID, _, err = p.str(it, mfCallID, true); err == nil && b.ID == "" && orID {
		b.ID, _, _ = p.str(it, mfID, false)
	}
	return err
}

// outputItem parses a tool output item into a tool message with one KindToolResult block
// (ID = call_id; a local_shell_call_output without call_id names its call by "id").
func (p *parser) outputItem(it *fields, obj *object, depth int, path jpath, typ string) (*Message, error) {
	m := p.newMessage()
	m.Role, m.obj = RoleTool, obj
	b := p.newBlock()
	b.Kind, b.Type, b.obj = KindToolResult, typ, obj
	err := p.callID(it, b, typ == "local_shell_call_output")
	if err != nil {
		return nil, err
	}
	if b.Content, b.contentArr, b.ContentString, m.hasContent, err = p.itemContent(it, depth, path, mfOutput, true); err != nil {
		return nil, err
	}
	m.contentArr, m.StringContent = b.contentArr, b.ContentString
	b.IsError = b.outputFailed()
	m.Blocks = p.blockSlice([]*Block{b})
	return m, nil
}

// itemContent parses the content member f of the item as content does (null allowed when
// nullable; a string is not scanned again); present: the member is there.
func (p *parser) itemContent(it *fields, depth int, path jpath, f int, nullable bool) (blocks []*Block, arr *array, str, present bool, err error) {
	v, off := p.value(it, f)
	switch {
	case v == nil:
		return nil, nil, false, false, nil
	case v[0] == '"':
		return p.blockSlice([]*Block{p.textBlock(v, it.esc&(1<<f) != 0)}), nil, true, true, nil
	}
	blocks, arr, str, _, err = p.content(off, depth, path.key(fieldNames[f]), nullable)
	return blocks, arr, str, true, err
}

// outputFailed reports whether a tool output's text shows a non-zero exit code as Codex CLI
// writes it: "Exit code: N" or "Process exited with code N" in the header before "Output:",
// or {"output":…,"metadata":{"exit_code":N}}.
func outputFailed(text string) bool {
	if !startsLikeFailure(text) {
		return false
	}
	if strings.HasPrefix(text, `{"output":`) {
		return structuredExitCode(text)
	}
	n := 0
	for line := range strings.Lines(text) {
		if n++; n > 8 || strings.HasPrefix(line, "Output:") {
			return false
		}
		for _, pre := range [...]string{"Exit code: ", "Process exited with code "} {
			if code, ok := strings.CutPrefix(line, pre); ok {
				c, err := strconv.Atoi(strings.TrimSpace(code))
				return err == nil && c != 0
			}
		}
	}
	return false
}

// startsLikeFailure reports whether text starts as the outputs outputFailed reads further
// do; failureStartLen bounds the length of those starts.
func startsLikeFailure(text string) bool {
	return slices.ContainsFunc([]string{`{"output":`, "Exit code: ", "Chunk ID: ", "Wall time: "},
		func(pre string) bool { return strings.HasPrefix(text, pre) })
}

const failureStartLen = len("Exit code: ")

// outputFailed is outputFailed(b.ResultText()), decoding a lazy text (into scratch memory)
// only when it can start as a failed output's: its literal up to the first escape is text.
func (b *Block) outputFailed() bool {
	if len(b.Content) != 1 || b.Content[0].Kind != KindText || !b.Content[0].textEsc {
		return outputFailed(b.ResultText())
	}
	c := b.Content[0]
	if k := strings.IndexByte(c.text, '\\'); k >= failureStartLen && !startsLikeFailure(c.text[:k]) {
		return false
	}
	sp := getScratch()
	defer putScratch(sp)
	return outputFailed(c.peekText(sp))
}

// structuredExitCode reports a non-zero metadata.exit_code in the JSON object text.
func structuredExitCode(text string) bool {
	raw := strBytes(text) // read only
	v, err := TopLevel(raw, "metadata")
	if err != nil || v[0] == nil || v[0][0] != '{' {
		return false
	}
	c, err := TopLevel(v[0], "exit_code")
	if err != nil || c[0] == nil {
		return false
	}
	n, err := strconv.ParseFloat(string(c[0]), 64)
	return err == nil && n != 0
}
