package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// responsesSample is a Responses request with every kind of input item, pretty-printed so
// that re-emitted lists must keep their separators.
const responsesSample = `{"model":"gpt-5.5","instructions":"You are Codex.","input":[
 {"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>"}]},
 {"role":"user","content":"hi"},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:x"},{"type":"input_file","file_id":"f"},{"type":"input_audio","x":1}]},
 {"type":"reasoning","summary":[{"type":"summary_text","text":"plan"},{"type":"summary_text","text":"more"}],"content":null,"encrypted_content":"gAAAA=="},
 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"I'll look"},{"type":"refusal","refusal":"no"}],"phase":"commentary"},
 {"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_1"},
 {"type":"custom_tool_call","status":"completed","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"},
 {"type":"local_shell_call","call_id":"call_3","status":"completed","action":{"type":"exec","command":["ls","-l"]}},
 {"type":"function_call_output","call_id":"call_1","output":"Chunk ID: a1\nWall time: 0.1 seconds\nProcess exited with code 2\nOriginal token count: 3\nOutput:\nboom"},
 {"type":"custom_tool_call_output","call_id":"call_2","output":"{\"output\":\"Success.\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.2}}"},
 {"type":"function_call_output","call_id":"call_3","output":[{"type":"input_text","text":"p1"},{"type":"input_image","image_url":"data:y"},{"type":"input_text","text":"p2"}],"zz":"keep"},
 {"type":"compaction","encrypted_content":"opaque"},
 {"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go"}},
 {"type":"computer_call","call_id":"cc_1","action":{"type":"screenshot"}},
 {"type":"computer_call_output","call_id":"cc_1","output":{"type":"computer_screenshot","image_url":"data:z"}},
 {"type":"message","role":"assistant","content":"done"}
],"tools":[{"type":"function","name":"exec_command","parameters":{"type":"object"},"strict":false},{"type":"custom","name":"apply_patch","format":{"type":"text"}},{"type":"web_search"},{"type":"namespace","name":"mcp__repl__","tools":[]}],
"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"medium"},"store":false,"stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":"s1","previous_response_id":null,"x-unknown":[1]}`

func TestParseResponsesModel(t *testing.T) {
	r := mustParse(t, Responses, responsesSample)
	if r.Format != Responses || r.Model != "gpt-5.5" || !r.Stream || r.System != nil {
		t.Fatalf("top: %+v", r)
	}
	if v, ok := r.Field("instructions"); !ok || string(v) != `"You are Codex."` {
		t.Fatalf("instructions: %s", v)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "exec_command,apply_patch,,mcp__repl__" {
		t.Fatalf("tools: %q", names)
	}
	type want struct {
		role  Role
		kinds []Kind
	}
	wants := []want{
		{RoleDeveloper, []Kind{KindText}},
		{RoleUser, []Kind{KindText}},
		{RoleUser, []Kind{KindText, KindImage, KindDocument, KindUnknown}},
		{RoleAssistant, []Kind{KindReasoning, KindText, KindToolUse, KindToolUse, KindToolUse}},
		{RoleTool, []Kind{KindToolResult}},
		{RoleTool, []Kind{KindToolResult}},
		{RoleTool, []Kind{KindToolResult}},
		{"", []Kind{KindUnknown}},
		{RoleAssistant, []Kind{KindServerToolUse, KindUnknown}},
		{"", []Kind{KindUnknown}},
		{RoleAssistant, []Kind{KindText}},
	}
	if len(r.Messages) != len(wants) {
		t.Fatalf("%d messages, want %d", len(r.Messages), len(wants))
	}
	for i, w := range wants {
		m := r.Messages[i]
		if m.Role != w.role || len(m.Blocks) != len(w.kinds) {
			t.Fatalf("message %d: role %q, %d blocks; want %q, %d", i, m.Role, len(m.Blocks), w.role, len(w.kinds))
		}
		for j, k := range w.kinds {
			if m.Blocks[j].Kind != k {
				t.Errorf("message %d block %d: %v, want %v", i, j, m.Blocks[j].Kind, k)
			}
		}
	}
	if m := r.Messages[1]; !m.StringContent || m.Blocks[0].Text() != "hi" || string(m.Blocks[0].Raw()) != `"hi"` {
		t.Errorf("string content: %+v", m.Blocks[0])
	}
	a := r.Messages[3]
	// The run's bytes are its items with the separators between them.
	first := strings.Index(responsesSample, `{"type":"reasoning"`)
	last := strings.Index(responsesSample, `{"type":"local_shell_call"`)
	end := last + strings.Index(responsesSample[last:], "}}") + 2
	if string(a.Raw()) != responsesSample[first:end] {
		t.Fatalf("run raw:\n%s", a.Raw())
	}
	rs, txt, fc, ct, ls := a.Blocks[0], a.Blocks[1], a.Blocks[2], a.Blocks[3], a.Blocks[4]
	if rs.Text() != "plan\nmore" || rs.Signature != "gAAAA==" || rs.Type != "reasoning" || !strings.HasPrefix(string(rs.Raw()), `{"type":"reasoning"`) {
		t.Errorf("reasoning %+v", rs)
	}
	if txt.Text() != "I'll look" || txt.Type != "message" {
		t.Errorf("assistant text %+v", txt)
	}
	if fc.ID != "call_1" || fc.Name != "exec_command" || string(fc.Input) != `{"cmd":"ls"}` || fc.Type != "function_call" {
		t.Errorf("function_call %+v", fc)
	}
	if ct.ID != "call_2" || ct.Name != "apply_patch" || string(ct.Input) != "*** Begin Patch\n*** End Patch\n" {
		t.Errorf("custom_tool_call %+v", ct)
	}
	if ls.ID != "call_3" || ls.Name != "local_shell" || string(ls.Input) != `{"type":"exec","command":["ls","-l"]}` {
		t.Errorf("local_shell_call %+v", ls)
	}
	o1, o2, o3 := r.Messages[4].Blocks[0], r.Messages[5].Blocks[0], r.Messages[6].Blocks[0]
	if o1.ID != "call_1" || o1.Name != "exec_command" || !o1.IsError || !o1.ContentString || !strings.HasSuffix(o1.ResultText(), "Output:\nboom") {
		t.Errorf("function_call_output %+v", o1)
	}
	if !bytes.Equal(o1.Raw(), r.Messages[4].Raw()) {
		t.Error("a tool output's block raw must be the item")
	}
	if o2.ID != "call_2" || o2.Name != "apply_patch" || o2.IsError {
		t.Errorf("custom_tool_call_output %+v", o2)
	}
	if o3.ID != "call_3" || o3.Name != "local_shell" || o3.ResultText() != "p1\np2" || o3.ContentString || len(o3.Content) != 3 || o3.Content[1].Kind != KindImage {
		t.Errorf("array output %+v", o3)
	}
	if b := r.Messages[7].Blocks[0]; b.Type != "compaction" || string(b.Raw()) != `{"type":"compaction","encrypted_content":"opaque"}` {
		t.Errorf("compaction %+v", b)
	}
	ws, cc := r.Messages[8].Blocks[0], r.Messages[8].Blocks[1]
	if ws.ID != "ws_1" || ws.Name != "web_search" || string(ws.Input) != `{"type":"search","query":"go"}` || cc.Type != "computer_call" || cc.ID != "cc_1" {
		t.Errorf("hosted calls %+v %+v", ws, cc)
	}
	if b := r.Messages[9].Blocks[0]; b.Type != "computer_call_output" || b.ID != "cc_1" {
		t.Errorf("computer_call_output %+v", b)
	}
	if r.Messages[10].Blocks[0].Text() != "done" {
		t.Error("final assistant text")
	}
	if err := Validate(r); err != nil {
		t.Fatal(err)
	}
	if KindReasoning.String() != "reasoning" || Responses.String() != "responses" {
		t.Fatal("names")
	}
}

func TestResponsesRoundTrip(t *testing.T) {
	for _, body := range []string{
		responsesSample,
		`{"model":"m","input":"just text"}`,
		` { "input" : [ ] , "model" : "m" } `,
		`{"input":[{"role":"user","content":"a"}],"messages":[1],"system":{"kept":true}}`,
		`{"input":[{"role":"assistant","content":"a"}, {"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
	} {
		b := []byte(body)
		r, err := Parse(Responses, b)
		if err != nil {
			t.Fatal(err)
		}
		if out := r.Bytes(); r.modified() || !bytes.Equal(out, b) || &out[0] != &b[0] {
			t.Fatalf("unmodified request must return the input slice itself: %s", body)
		}
		msgs := make([]*Message, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i] = m.WithBlocks(append([]*Block(nil), m.Blocks...))
		}
		if got := r.WithMessages(msgs).Bytes(); !bytes.Equal(got, b) && !r.inputStr {
			t.Fatalf("rebuild differs:\n%s\n---\n%s", got, body)
		}
	}
}

func TestResponsesModifications(t *testing.T) {
	r := mustParse(t, Responses, responsesSample)
	msgs := append([]*Message(nil), r.Messages...)
	// A stub: the output becomes a string, every other member kept.
	o3 := msgs[6].Blocks[0]
	st := o3.WithResultText("[pruned]")
	if want := `{"type":"function_call_output","call_id":"call_3","output":"[pruned]","zz":"keep"}`; string(st.Raw()) != want {
		t.Fatalf("stub: %s", st.Raw())
	}
	if st.ResultText() != "[pruned]" || st.ID != "call_3" || o3.ResultText() != "p1\np2" {
		t.Fatal("stub fields or receiver changed")
	}
	msgs[6] = msgs[6].WithBlocks([]*Block{st})
	// Purge: the arguments string of a function_call, the input of a custom_tool_call.
	a := msgs[3]
	fc := a.Blocks[2].WithInput([]byte(`{"_purged":"x"}`))
	if string(fc.Raw()) != `{"type":"function_call","name":"exec_command","arguments":"{\"_purged\":\"x\"}","call_id":"call_1"}` || string(fc.Input) != `{"_purged":"x"}` {
		t.Fatalf("function_call input: %s", fc.Raw())
	}
	ct := a.Blocks[3].WithInput([]byte("p"))
	if !strings.Contains(string(ct.Raw()), `"input":"p"}`) {
		t.Fatalf("custom input: %s", ct.Raw())
	}
	if a.Blocks[4].WithInput([]byte(`{}`)) != a.Blocks[4] {
		t.Fatal("a local_shell_call's action must not be rewritten")
	}
	if _, err := a.Blocks[4].setInput([]byte(`{}`)); err == nil {
		t.Fatal("setInput on local_shell_call must fail")
	}
	// Dropping the text item of the run keeps the separators by position.
	msgs[3] = a.WithBlocks([]*Block{a.Blocks[0], fc, ct, a.Blocks[4]})
	msgs = append(msgs, NewTextMessage(Responses, RoleUser, "more \"quoted\"\n"))
	got := string(r.WithMessages(msgs).Bytes())
	want := strings.Replace(responsesSample, string(a.Blocks[2].Raw()), string(fc.Raw()), 1)
	want = strings.Replace(want, string(a.Blocks[3].Raw()), string(ct.Raw()), 1)
	want = strings.Replace(want, string(o3.Raw()), string(st.Raw()), 1)
	want = strings.Replace(want, "\n "+string(a.Blocks[1].Raw())+",", "", 1)
	want = strings.Replace(want, `"content":"done"}`+"\n]", `"content":"done"},{"type":"message","role":"user","content":[{"type":"input_text","text":"more \"quoted\"\n"}]}`+"\n]", 1)
	if got != want {
		t.Fatalf("request:\n%s\nwant\n%s", got, want)
	}
	r2, err := Parse(Responses, []byte(got))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r2.Messages); n != len(msgs) || r2.Messages[6].Blocks[0].ResultText() != "[pruned]" || r2.Messages[n-1].Blocks[0].Text() != "more \"quoted\"\n" {
		t.Fatalf("reparse: %d messages", n)
	}
	// A text block inserted into a run becomes an assistant message item.
	run := a.WithBlocks([]*Block{NewTextBlock(Responses, "note"), a.Blocks[2]})
	if !strings.HasPrefix(string(run.Raw()), `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"note"}]},`) {
		t.Fatalf("text in a run: %s", run.Raw())
	}
	// Dropping a message from the middle keeps the list's separators by position.
	short := append(append([]*Message(nil), r.Messages[:7]...), r.Messages[8:]...)
	if _, err := Parse(Responses, r.WithMessages(short).Bytes()); err != nil {
		t.Fatal(err)
	}
	// An assistant message without blocks writes no item.
	empty := append([]*Message(nil), r.Messages...)
	empty[8] = empty[8].WithBlocks(nil)
	er, err := Parse(Responses, r.WithMessages(empty).Bytes())
	if err != nil || len(er.Messages) != len(r.Messages)-1 {
		t.Fatalf("empty run: %v", err)
	}
	if checkRuleErr(Validate(r.WithMessages(empty))) != RuleEmptyContent {
		t.Fatal("an empty assistant message must not validate")
	}
}

func checkRuleErr(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Rule
	}
	return ""
}

func TestResponsesStringInput(t *testing.T) {
	body := []byte(`{"model":"m","input":"fix \"it\"\n","stream":null}`)
	r := mustParse(t, Responses, string(body))
	if len(r.Messages) != 1 || r.Stream {
		t.Fatal(r.Messages)
	}
	m := r.Messages[0]
	if m.Role != RoleUser || !m.StringContent || m.Blocks[0].Text() != "fix \"it\"\n" {
		t.Fatalf("%+v", m)
	}
	if offsetIn(body, m.Raw()) >= 0 || offsetIn(body, m.Blocks[0].Raw()) >= 0 {
		t.Fatal("the message a string input stands for must not point into the body")
	}
	out := r.WithMessages(append(append([]*Message(nil), r.Messages...), NewTextMessage(Responses, RoleAssistant, "ok"))).Bytes()
	want := `{"model":"m","input":[{"role":"user","content":"fix \"it\"\n"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],"stream":null}`
	if string(out) != want {
		t.Fatalf("%s", out)
	}
	r2 := mustParse(t, Responses, string(out))
	if len(r2.Messages) != 2 || r2.Messages[1].Blocks[0].Text() != "ok" || Validate(r2) != nil {
		t.Fatalf("reparse %v", Validate(r2))
	}
	// SetField on the modelled member re-parses.
	r3, err := r.SetField("input", []byte(`[{"role":"user","content":"x"}]`))
	if err != nil || r3.Messages[0].Blocks[0].Text() != "x" || r3.inputStr {
		t.Fatalf("SetField input: %v", err)
	}
	// "messages" and "system" are plain members in this format.
	r4 := r.WithField("messages", []byte(`[]`))
	if string(r4.Bytes()) != `{"model":"m","input":"fix \"it\"\n","stream":null,"messages":[]}` {
		t.Fatalf("%s", r4.Bytes())
	}
}

func TestNewTextMessageResponses(t *testing.T) {
	for _, tc := range []struct {
		role Role
		raw  string
		kind Kind
	}{
		{RoleUser, `{"type":"message","role":"user","content":[{"type":"input_text","text":"a\tb"}]}`, KindText},
		{RoleDeveloper, `{"type":"message","role":"developer","content":[{"type":"input_text","text":"a\tb"}]}`, KindText},
		{RoleAssistant, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a\tb"}]}`, KindText},
		{RoleTool, `{"type":"function_call_output","output":"a\tb"}`, KindToolResult},
	} {
		m := NewTextMessage(Responses, tc.role, "a\tb")
		if string(m.Bytes()) != tc.raw || m.Raw() != nil || m.Blocks[0].Kind != tc.kind || m.Format() != Responses {
			t.Fatalf("%s: %s", tc.role, m.Bytes())
		}
		if m.Blocks[0].Kind == KindText && m.Blocks[0].Text() != "a\tb" || m.Blocks[0].Kind == KindToolResult && m.Blocks[0].ResultText() != "a\tb" {
			t.Fatalf("%s: text", tc.role)
		}
		// Parsed, it is the same message (apart from being constructed).
		r := mustParse(t, Responses, `{"input":[`+tc.raw+`]}`)
		if p := r.Messages[0]; p.Role != m.Role || p.ShapeSum() != m.ShapeSum() {
			t.Fatalf("%s: parsed %q shape %x, built %x", tc.role, p.Role, p.ShapeSum(), m.ShapeSum())
		}
	}
	if b := NewTextBlock(Responses, "x"); string(b.Raw()) != `{"type":"input_text","text":"x"}` || b.Text() != "x" || b.Type != "input_text" {
		t.Fatalf("%s", b.Raw())
	}
	// A user message gets the block in its content.
	r := mustParse(t, Responses, `{"input":[{"role":"user","content":"a"}]}`)
	nm := r.Messages[0].WithBlocks([]*Block{r.Messages[0].Blocks[0], NewTextBlock(Responses, "b")})
	if string(nm.Raw()) != `{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}` {
		t.Fatalf("%s", nm.Raw())
	}
}

func TestOutputFailed(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"Exit code: 1\nWall time: 0.2 seconds\nOutput:\nx", true},
		{"Exit code: 0\nWall time: 0.2 seconds\nOutput:\nExit code: 1", false},
		{"Exit code: -1\nOutput:\n", true},
		{"Chunk ID: a\nWall time: 1 seconds\nProcess exited with code 127\nOriginal token count: 0\nOutput:\n", true},
		{"Chunk ID: a\nWall time: 1 seconds\nProcess exited with code 0\nOutput:\nProcess exited with code 1", false},
		{"Chunk ID: a\nWall time: 1.0 seconds\nProcess running with session ID 4\nOriginal token count: 0\nOutput:\n", false},
		{"Chunk ID: a\nOutput:\nProcess exited with code 3", false},
		{`{"output":"x","metadata":{"exit_code":2,"duration_seconds":0.1}}`, true},
		{`{"output":"x","metadata":{"exit_code":0,"duration_seconds":0.1}}`, false},
		{`{"output":"Exit code: 1","metadata":{}}`, false},
		{`{"output":"x","metadata":{"exit_code":"1"}}`, false},
		{`{"output":"x"`, false},
		{"line one\nExit code: 1", false},
		{"write_stdin failed: stdin is closed", false},
		{"", false},
	} {
		if got := outputFailed(tc.text); got != tc.want {
			t.Errorf("outputFailed(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestResponsesMalformedTypedErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, path string
		offset           int64
	}{
		{"input number", `{"input":5}`, "input", 9},
		{"item not object", `{"input":[{"role":"user","content":"a"},"x"]}`, "input[1]", 40},
		{"item without type or role", `{"input":[{"content":"a"}]}`, "input[0]", 10},
		{"type number", `{"input":[{"type":1}]}`, "input[0].type", 18},
		{"message without role", `{"input":[{"type":"message","content":"a"}]}`, "input[0]", 10},
		{"role number", `{"input":[{"type":"message","role":2}]}`, "input[0].role", 35},
		{"content number", `{"input":[{"role":"user","content":1}]}`, "input[0].content", 35},
		{"assistant content number", `{"input":[{"role":"assistant","content":1}]}`, "input[0].content", 40},
		{"part without type", `{"input":[{"role":"user","content":[{"text":"a"}]}]}`, "input[0].content[0]", 36},
		{"call_id number", `{"input":[{"type":"function_call","call_id":1}]}`, "input[0].call_id", 44},
		{"name number", `{"input":[{"type":"custom_tool_call","call_id":"c","name":[]}]}`, "input[0].name", 58},
		{"output number", `{"input":[{"type":"function_call_output","call_id":"c","output":3}]}`, "input[0].output", 64},
		{"output part not object", `{"input":[{"type":"function_call_output","call_id":"c","output":[1]}]}`, "input[0].output[0]", 65},
		{"second item path after a run", `{"input":[{"type":"reasoning","summary":[]},{"type":"function_call","call_id":"c","name":"n","arguments":"{}"},{"type":4}]}`, "input[2].type", 119},
		{"stream string", `{"stream":"yes","input":[]}`, "stream", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(Responses, []byte(tc.body))
			var sc *SchemaError
			if !errors.As(err, &sc) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("want *SchemaError, got %T %v", err, err)
			}
			if sc.Path != tc.path || sc.Offset != tc.offset {
				t.Fatalf("path %q offset %d, want %q %d (%v)", sc.Path, sc.Offset, tc.path, tc.offset, err)
			}
		})
	}
	// Bytes that are not JSON are a syntax error even after a shape problem.
	_, err := Parse(Responses, []byte(`{"input":[{"type":1}],"x":tru}`))
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("want *SyntaxError, got %T %v", err, err)
	}
}

func TestValidateResponses(t *testing.T) {
	call := func(ids ...string) string {
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf(`{"type":"function_call","name":"f","arguments":"{}","call_id":%q}`, id))
		}
		return strings.Join(parts, ",")
	}
	out := func(id string) string {
		return fmt.Sprintf(`{"type":"function_call_output","call_id":%q,"output":"r"}`, id)
	}
	u := `{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}`
	rs := `{"type":"reasoning","summary":[],"encrypted_content":"e"}`
	text := `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}`
	for _, tc := range []struct {
		name, items, rule string
		mi                int
	}{
		{"valid", `{"role":"developer","content":"d"},` + u + "," + rs + "," + call("c1", "c2") + "," + out("c2") + "," + out("c1") + "," + rs + "," + text + "," + u, "", 0},
		{"call at the end", u + "," + call("c1"), "", 0},
		{"output after a user message", u + "," + call("c1") + "," + u + "," + out("c1"), "", 0},
		{"output of an earlier turn's call", u + "," + call("c1", "c2") + "," + out("c1") + "," + text + "," + out("c2"), "", 0},
		{"reused id across turns", u + "," + call("c1") + "," + out("c1") + "," + call("c1") + "," + out("c1"), "", 0},
		{"custom and local shell", u + `,{"type":"custom_tool_call","call_id":"a","name":"apply_patch","input":"x"},{"type":"local_shell_call","call_id":"b","action":{}}` +
			`,{"type":"custom_tool_call_output","call_id":"a","output":"ok"},{"type":"function_call_output","call_id":"b","output":"ok"}`, "", 0},
		{"local_shell_call_output by id", u + `,{"type":"local_shell_call","id":"ls","action":{}},{"type":"local_shell_call_output","id":"ls","output":"ok"}`, "", 0},
		{"output without call", u + "," + out("c1"), RuleOrphanResult, 1},
		{"output before its call", u + "," + out("c1") + "," + call("c1"), RuleOrphanResult, 1},
		{"unknown id", u + "," + call("c1") + "," + out("c2"), RuleOrphanResult, 2},
		{"duplicate output", u + "," + call("c1") + "," + out("c1") + "," + out("c1"), RuleDuplicateResult, 3},
		{"dangling", u + "," + call("c1", "c2") + "," + out("c1") + "," + u, RuleDanglingCall, 1},
		{"dangling before a compaction", u + "," + call("c1") + `,{"type":"compaction","encrypted_content":"x"}`, RuleDanglingCall, 1},
		{"id twice in one message", u + "," + call("c1", "c1"), RuleDuplicateCallID, 1},
		{"call without id", u + `,{"type":"function_call","name":"f","arguments":"{}"}`, RuleCallID, 1},
		{"reasoning without its item", u + "," + rs + "," + u, RuleReasoning, 1},
		{"reasoning at the end", u + "," + rs, "", 0},
		{"reasoning before a compaction", u + "," + rs + `,{"type":"compaction","encrypted_content":"x"}`, "", 0},
		{"other output without its call", u + `,{"type":"computer_call_output","call_id":"k","output":{}}`, RuleOrphanResult, 1},
		{"other output after its call", u + `,{"type":"computer_call","call_id":"k"},{"type":"computer_call_output","call_id":"k","output":{}}`, "", 0},
		{"bad role", `{"role":"robot","content":"x"}`, RuleRole, 0},
		{"empty content", `{"role":"user","content":[]}`, RuleEmptyContent, 0},
		{"no content", `{"type":"message","role":"user"}`, RuleEmptyContent, 0},
		{"output null", u + "," + call("c1") + `,{"type":"function_call_output","call_id":"c1"}`, RuleEmptyContent, 2},
		{"no items", ``, RuleNoMessages, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, Responses, `{"model":"m","input":[`+tc.items+`]}`)
			checkRule(t, Validate(r), tc.rule, tc.mi)
		})
	}
}
