package transcripts

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// codexInput assembles the Responses form of a Codex session: the recorded input items byte for
// byte, with Codex's own history corrections (docs/formats.md). A new context starts at every
// compaction; within one the items only grow.
type codexInput struct {
	f       *form
	cur     [][]byte
	checked int            // items before it were checked at a request
	calls   map[string]int // call_id -> kind of output it takes (outputKind), while unanswered
	seen    map[string]bool
	tools   map[string]string // tool name -> "function" or "custom"
	hosted  map[string]bool   // hosted tool types used: "local_shell", "web_search"
	empty   bool              // a request had no item the API can read
}

// Output kinds a call takes: Codex answers a local shell call with a function_call_output.
const (
	outFunction = 1 + iota
	outCustom
)

func newCodexInput() *codexInput {
	return &codexInput{f: &form{p: Responses, curIdx: -1}, calls: map[string]int{}, seen: map[string]bool{},
		tools: map[string]string{}, hosted: map[string]bool{}}
}

// codexItemHead holds the members of an input item that decide how it is assembled.
type codexItemHead struct {
	Type   string `json:"type"`
	Role   string `json:"role"`
	CallID string `json:"call_id"`
	ID     string `json:"id"`
	Name   string `json:"name"`
}

// add appends one recorded response item. Items Codex never sends (ghost snapshots, system
// messages, items the API cannot read: see apiReadable) and outputs without their call are
// left out.
func (ci *codexInput) add(raw []byte) {
	var h codexItemHead
	if json.Unmarshal(raw, &h) != nil || !apiReadable(raw) {
		return
	}
	switch h.Type {
	case "ghost_snapshot":
		return
	case "message", "":
		if h.Role == "system" {
			return
		}
	case "function_call", "custom_tool_call", "local_shell_call":
		id := h.CallID
		if id == "" && h.Type == "local_shell_call" {
			id = h.ID
		}
		kind := outFunction
		switch h.Type {
		case "function_call":
			ci.tool(h.Name, "function")
		case "custom_tool_call":
			kind = outCustom
			ci.tool(h.Name, "custom")
		default:
			ci.hosted["local_shell"] = true
		}
		if id == "" || ci.seen[id] {
			return // the API pairs outputs by call_id: a call without one, or reusing one, cannot be sent
		}
		ci.seen[id] = true
		ci.calls[id] = kind
	case "web_search_call":
		ci.hosted["web_search"] = true
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		want := outFunction
		if h.Type == "custom_tool_call_output" {
			want = outCustom
		}
		if k, open := ci.calls[h.CallID]; !open || k != want && h.Type != "local_shell_call_output" {
			return // no call of its kind waits for it: Codex removes orphan outputs
		}
		delete(ci.calls, h.CallID)
	default:
		if strings.HasSuffix(h.Type, "_output") && h.CallID != "" && !ci.seen[h.CallID] {
			return // the output of a hosted call this context does not hold
		}
	}
	if h.CallID != "" && codexModelType(h.Type, h.Role) {
		ci.seen[h.CallID] = true
	}
	ci.cur = append(ci.cur, append([]byte(nil), raw...))
}

// apiReadable reports whether the Responses API reads raw as the input item it is: string
// "type", call_id, name and id where present, and message, output and part shapes the API
// accepts.
func apiReadable(raw []byte) bool {
	it := gjson.ParseBytes(raw)
	if !it.IsObject() || !stringOrAbsent(it, "type", "call_id", "name", "id", "role") {
		return false
	}
	typ := it.Get("type").Str
	switch {
	case typ == "message" || typ == "":
		switch it.Get("role").Str {
		case "user", "developer", "assistant":
		default:
			return false
		}
		c := it.Get("content")
		return c.Type == gjson.String || c.IsArray() && len(c.Array()) > 0 && partsReadable(c)
	case strings.HasSuffix(typ, "_output"):
		o := it.Get("output")
		return o.Type == gjson.String || o.Type == gjson.Null && o.Exists() || o.IsArray() && partsReadable(o)
	}
	return true
}

// stringOrAbsent reports whether each member of keys is absent or a string.
func stringOrAbsent(obj gjson.Result, keys ...string) bool {
	for _, k := range keys {
		if v := obj.Get(k); v.Exists() && v.Type != gjson.String {
			return false
		}
	}
	return true
}

// partsReadable reports whether every element of a content array is an object with a string
// "type" and a string "text" where it has one.
func partsReadable(arr gjson.Result) bool {
	ok := true
	arr.ForEach(func(_, p gjson.Result) bool {
		t := p.Get("type")
		ok = p.IsObject() && t.Type == gjson.String && stringOrAbsent(p, "text")
		return ok
	})
	return ok
}

// tool records a tool name the session called (the first kind seen wins).
func (ci *codexInput) tool(name, kind string) {
	if _, ok := ci.tools[name]; !ok && name != "" {
		ci.tools[name] = kind
	}
}

// addUserText appends a user message item holding text (compaction messages, the user
// turns of a trimmed rollout).
func (ci *codexInput) addUserText(text string) {
	b := []byte(`{"type":"message","role":"user","content":[{"type":"input_text","text":`)
	b = appendJSONString(b, text)
	ci.cur = append(ci.cur, append(b, `}]}`...))
}

// compact starts a new context (a compacted record): later items do not see earlier ones.
func (ci *codexInput) compact() {
	ci.publish()
	ci.cur, ci.checked, ci.f.curIdx = nil, 0, -1
	clear(ci.calls)
	clear(ci.seen)
}

// request records the items of the request before the next model response in pt: the calls
// it holds without output get their "aborted" output right after them, and a reasoning item
// that no item of its run follows (the API rejects it) is left out.
func (ci *codexInput) request(pt *RequestPoint) {
	var fixed [][]byte
	for i := ci.checked; i < len(ci.cur); i++ {
		it := ci.cur[i]
		var h codexItemHead
		_ = json.Unmarshal(it, &h)
		if h.Type == "reasoning" && (i+1 == len(ci.cur) || !codexModelItem(ci.cur[i+1])) {
			continue
		}
		fixed = append(fixed, it)
		id := h.CallID
		if id == "" && h.Type == "local_shell_call" {
			id = h.ID
		}
		if k, open := ci.calls[id]; open && codexModelItem(it) {
			typ := "function_call_output"
			if k == outCustom {
				typ = "custom_tool_call_output"
			}
			out := appendJSONString([]byte(`{"type":`), typ)
			out = append(out, `,"call_id":`...)
			out = appendJSONString(out, id)
			fixed = append(fixed, append(out, `,"output":"aborted"}`...))
			delete(ci.calls, id)
		}
	}
	// Items from ci.checked on were never part of a published request: rewriting them leaves
	// every earlier request as it was.
	ci.cur = append(ci.cur[:ci.checked:ci.checked], fixed...)
	ci.checked = len(ci.cur)
	if len(ci.cur) == 0 {
		ci.empty = true // nothing the API can read precedes this response
		return
	}
	ci.publish()
	fi := formIndex(Responses)
	pt.n[fi], pt.ctx[fi] = len(ci.cur), ci.f.curIdx
}

// publish makes the current items visible as a context.
func (ci *codexInput) publish() {
	f := ci.f
	if len(ci.cur) == 0 && f.curIdx < 0 {
		return
	}
	if f.curIdx < 0 {
		f.contexts = append(f.contexts, ci.cur)
		f.curIdx = len(f.contexts) - 1
	} else {
		f.contexts[f.curIdx] = ci.cur
	}
}

// codexModelItem reports whether an input item is one the model produced (part of a run).
func codexModelItem(raw []byte) bool {
	var h codexItemHead
	_ = json.Unmarshal(raw, &h)
	return codexModelType(h.Type, h.Role)
}

// codexModelType reports whether an item of type typ and role is model-produced: an assistant
// message, reasoning, or a call (the Responses API's hosted calls included).
func codexModelType(typ, role string) bool {
	switch typ {
	case "reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call",
		"file_search_call", "computer_call", "code_interpreter_call", "image_generation_call",
		"mcp_call", "mcp_list_tools", "mcp_approval_request", "shell_call", "apply_patch_call",
		"tool_search_call":
		return true
	case "message", "":
		return role == "assistant"
	}
	return false
}

// codexSettings are the request members Codex derives from the session: its id (the
// prompt_cache_key) and the reasoning settings of its first turn.
type codexSettings struct {
	sessionID      string
	effort, digest string // turn_context effort and summary ("" when not recorded)
}

// finish renders the request members around the items in Codex's order, with stand-in tools in
// Codex's shapes, and attaches the form to s. A session with a request holding no readable item
// gets no Responses form (its native form is then Chat Completions).
func (ci *codexInput) finish(s *Session, instructions string, set codexSettings) {
	if ci.empty {
		s.Native = OpenAI
		for i := range s.points {
			s.points[i].Context = s.points[i].ctx[formIndex(OpenAI)]
		}
		return
	}
	ci.publish()
	f := ci.f
	h := []byte(`,"instructions":`)
	h = appendJSONString(h, instructions)
	f.head = append(h, `,"input":[`...)
	t := []byte(`],"tools":[`)
	names := make([]string, 0, len(ci.tools))
	for n := range ci.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	first := true
	sep := func() {
		if !first {
			t = append(t, ',')
		}
		first = false
	}
	for _, n := range names {
		sep()
		t = append(t, `{"type":"`+ci.tools[n]+`","name":`...)
		t = appendJSONString(t, n)
		t = append(t, `,"description":`...)
		t = appendJSONString(t, toolDescription(s, n))
		if ci.tools[n] == "function" {
			t = append(t, `,"strict":false,"parameters":`...)
			t = append(t, standInSchema...)
		}
		t = append(t, '}')
	}
	for _, hosted := range []string{"local_shell", "web_search"} {
		if ci.hosted[hosted] {
			sep()
			t = append(t, `{"type":"`+hosted+`"}`...)
		}
	}
	t = append(t, `],"tool_choice":"auto","parallel_tool_calls":true`...)
	if set.effort != "" {
		t = append(t, `,"reasoning":{"effort":`...)
		t = appendJSONString(t, set.effort)
		if set.digest != "" {
			t = append(t, `,"summary":`...)
			t = appendJSONString(t, set.digest)
		}
		t = append(t, '}')
	}
	t = append(t, `,"store":false,"stream":true`...)
	if set.effort != "" {
		t = append(t, `,"include":["reasoning.encrypted_content"]`...)
	}
	if set.sessionID != "" {
		t = append(t, `,"prompt_cache_key":`...)
		t = appendJSONString(t, set.sessionID)
	}
	f.tail = append(t, '}')
	s.forms[formIndex(Responses)] = f
}
