package wire

// kindOf returns the Kind of a block whose "type" is typ in format f (KindUnknown for
// types the format does not define); Anthropic's types are the kinds' names.
func kindOf(f Format, typ string) Kind {
	switch {
	case f == Responses:
		return responsesPartKind(typ)
	case f == OpenAI && typ == "image_url":
		return KindImage
	case f == OpenAI && typ == "file":
		return KindDocument
	case f == OpenAI && typ != "text":
		return KindUnknown
	}
	for k := KindText; k < KindReasoning; k++ {
		if kindNames[k] == typ {
			return k
		}
	}
	return KindUnknown
}

// A member the parser reads from a block or an input item, by key (fieldOf); mfNone for
// any other key.
const (
	mfNone = iota
	mfType
	mfText
	mfContent
	mfThinking
	mfSignature
	mfID
	mfName
	mfInput
	mfCacheControl
	mfToolUseID
	mfIsError
	mfRole
	mfOutput
	mfSummary
	mfCallID
	mfArguments
	mfAction
	mfEncrypted
	mfFunction
	mfCount
)

// fieldNames are the keys of the member fields, indexed by field.
var fieldNames = [mfCount]string{"", "type", "text", "content", "thinking", "signature", "id", "name",
	"input", "cache_control", "tool_use_id", "is_error", "role", "output", "summary", "call_id",
	"arguments", "action", "encrypted_content", "function"}

// fieldSlots finds the field of a key by fieldSlot, which is collision-free on fieldNames
// (checked at init).
var fieldSlots = func() (t [32]uint8) {
	for f := mfType; f < mfCount; f++ {
		if t[fieldSlot(fieldNames[f])] != mfNone {
			panic("wire: fieldNames collide in fieldSlots")
		}
		t[fieldSlot(fieldNames[f])] = uint8(f)
	}
	return
}()

func fieldSlot(k string) int { return (2*len(k) + 2*int(k[0]) + int(k[len(k)-1])) & 31 }

// fieldOf classifies the validated key literal lit (quotes included) by the string it
// decodes to, decoding it only when it has escapes.
func fieldOf(lit []byte) int {
	k := bodyString(lit[1 : len(lit)-1])
	if hasBackslash(lit) {
		k = unquote(lit)
	}
	if k == "" {
		return mfNone
	}
	if f := int(fieldSlots[fieldSlot(k)]); fieldNames[f] == k {
		return f
	}
	return mfNone
}

// fields is where the members of an object that the parser reads are, by field: val[f] spans
// the value of the last member of field f (e == 0: none; as object.lookup finds it), bit f of
// esc is set when that is a string with escapes. Errors name (*path)[idx] (idx < 0: *path).
type fields struct {
	val  [mfCount]span
	esc  uint32
	path *jpath
	idx  int
}

// note validates the value at d[vs] of a member of field f and notes in fs where it is.
func (p *parser) note(fs *fields, f, depth, vs int) (int, error) {
	e, err := 0, error(nil)
	fs.esc &^= 1 << f
	if f != mfNone && p.d[vs] == '"' {
		var x bool
		if e, x, err = scanString(p.d, vs); x {
			fs.esc |= 1 << f
		}
	} else {
		e, err = scanValue(p.d, vs, depth)
	}
	fs.val[f] = span{s: vs, e: e}
	return e, err
}

// value returns the raw value of field f and its offset in the body (nil when absent).
func (p *parser) value(fs *fields, f int) ([]byte, int) {
	v := fs.val[f]
	if v.e == 0 {
		return nil, 0
	}
	return p.d[v.s:v.e:v.e], v.s
}

// lit returns the body of the string field f and whether it has escapes; ok is false when it
// is absent or not a string (a schema error when strict).
func (p *parser) lit(fs *fields, f int, strict bool) (body string, escaped, ok bool, err error) {
	v, off := p.value(fs, f)
	if v == nil || v[0] != '"' && !strict {
		return "", false, false, nil
	}
	if v[0] != '"' {
		path := *fs.path
		if fs.idx >= 0 {
			path = path.at(fs.idx)
		}
		return "", false, false, p.schemaErr(off, path.key(fieldNames[f]), "expected string, found %s", jsonType(v[0]))
	}
	return bodyString(v[1 : len(v)-1]), fs.esc&(1<<f) != 0, true, nil
}

// str is lit's string decoded.
func (p *parser) str(fs *fields, f int, strict bool) (string, bool, error) {
	s, escaped, ok, err := p.lit(fs, f, strict)
	if escaped {
		p.keep(len(s))
		s = decoded(s)
	}
	return s, ok, err
}

// must is str of a field that must be a string when present; the first error is kept in *err.
func (p *parser) must(fs *fields, f int, err *error) string {
	s, _, e := p.str(fs, f, true)
	if *err == nil {
		*err = e
	}
	return s
}

// block parses the block object at d[i] == '{', element bi of the list at path list (the
// block's own path is built only for errors and nested content). On a *SchemaError the
// returned end offset is valid and the block is a KindUnknown block holding the raw bytes.
func (p *parser) block(i, depth int, list *jpath, bi int) (*Block, int, error) {
	d := p.d
	b := p.newBlock()
	var contentBlocks []*Block
	var contentArr *array
	var contentErr error
	fs := fields{path: list, idx: bi}
	obj, end, err := p.objectAt(i, depth, func(ks, ke, vs int) (int, error) {
		f := fieldOf(d[ks:ke])
		if f != mfContent || p.f != Anthropic || d[vs] != '[' {
			return p.note(&fs, f, depth, vs)
		}
		blocks, arr, e, err := p.blockList(vs, depth+1, list.at(bi).key("content"), false)
		if err != nil && !isSchema(err) {
			return 0, err
		}
		contentBlocks, contentArr, contentErr = blocks, arr, err
		fs.val[f] = span{s: vs, e: e}
		return e, nil
	})
	if err != nil {
		return nil, 0, err
	}
	b.obj = obj
	fail := func(err error) (*Block, int, error) {
		return &Block{f: p.f, obj: obj, Kind: KindUnknown}, end, err
	}
	typ, ok, err := p.str(&fs, mfType, true)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(p.schemaErr(i, list.at(bi), "content block has no \"type\""))
	}
	b.Type = typ
	b.Kind = kindOf(p.f, typ)
	b.CacheControl, _ = p.value(&fs, mfCacheControl)
	var ferr error // the first field error
	switch b.Kind {
	case KindText:
		b.text, b.textEsc, _, ferr = p.lit(&fs, mfText, true)
	case KindThinking:
		b.text, b.textEsc, _, ferr = p.lit(&fs, mfThinking, true)
		b.Signature = p.must(&fs, mfSignature, &ferr)
	case KindToolUse, KindServerToolUse:
		b.ID, b.Name = p.must(&fs, mfID, &ferr), p.must(&fs, mfName, &ferr)
		b.Input, _ = p.value(&fs, mfInput)
	case KindToolResult, KindWebSearchToolResult:
		b.ID = p.must(&fs, mfToolUseID, &ferr)
		if ferr != nil || b.Kind == KindWebSearchToolResult {
			break
		}
		if v, off := p.value(&fs, mfIsError); v != nil {
			switch v[0] {
			case 't':
				b.IsError = true
			case 'f':
			default:
				return fail(p.schemaErr(off, list.at(bi).key("is_error"), "expected boolean, found %s", jsonType(v[0])))
			}
		}
		if v, off := p.value(&fs, mfContent); v != nil {
			switch v[0] {
			case '"':
				b.Content = p.blockSlice([]*Block{p.textBlock(v, fs.esc&(1<<mfContent) != 0)})
				b.ContentString = true
			case '[':
				if contentErr != nil {
					return fail(contentErr)
				}
				b.Content, b.contentArr = contentBlocks, contentArr
			case 'n':
			default:
				return fail(p.schemaErr(off, list.at(bi).key("content"), "expected string or array, found %s", jsonType(v[0])))
			}
		}
	}
	if ferr != nil {
		return fail(ferr)
	}
	return b, end, nil
}
