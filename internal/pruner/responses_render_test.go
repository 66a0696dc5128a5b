package pruner

import (
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// responsesBody wraps Responses input items in a request body.
func responsesBody(items ...string) []byte {
	return []byte(`{"model":"gpt-5.5","instructions":"be brief","input":[` + strings.Join(items, ",") +
		`],"tools":[],"store":false,"stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":"s"}`)
}

func rUser(text string) string {
	return `{"type":"message","role":"user","content":[{"type":"input_text","text":"` + text + `"}]}`
}

func rReply(text string) string {
	return `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}],"phase":"final_answer"}`
}

func rReasoning(n string) string {
	return `{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gAAAA` + n + `"}`
}

func rCall(id, name, args string) string {
	return `{"type":"function_call","name":"` + name + `","arguments":` + string(quoteJSON(args)) + `,"call_id":"` + id + `"}`
}

func rOutput(id, text string) string {
	return `{"type":"function_call_output","call_id":"` + id + `","output":` + string(quoteJSON(text)) + `}`
}

func quoteJSON(s string) []byte {
	b := new(strings.Builder)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return []byte(b.String())
}

// TestResponsesRender covers what the Responses format adds to the shared rules: Codex's
// apply_patch (custom_tool_call) and its structured output, local shell calls, hosted calls
// inside a compressed range, compaction items, reasoning items and outputs that do not
// follow their call directly.
func TestResponsesRender(t *testing.T) {
	long := `{"cmd":"` + strings.Repeat("y", 600) + `"}`
	failed := "Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 1\nOriginal token count: 1\nOutput:\nboom"
	patch := "*** Begin Patch\n*** Update File: a.go\n" + strings.Repeat("+x\n", 300) + "*** End Patch\n"
	after := func(n int) []string {
		var items []string
		for i := 0; i < n; i++ {
			id := "k" + string(rune('a'+i))
			items = append(items, rCall(id, "read", `{}`), rOutput(id, "ok"))
		}
		return items
	}
	st := flush(t, mustParse(t, wire.Responses, responsesBody(rUser("x"), rCall("z9", "read", `{}`), rOutput("z9", big("Q", 2000)), rReply("ok"), rUser("y"))), NewState(), stubPolicy())

	t.Run("a failed exec_command has its arguments purged", func(t *testing.T) {
		req := mustParse(t, wire.Responses, responsesBody(append([]string{rUser("go"), rReasoning("1"), rCall("e1", "exec_command", long), rOutput("e1", failed)}, after(2)...)...))
		res := Render(req, flush(t, req, st, stubPolicy()), stubPolicy())
		mustValid(t, req, res)
		if res.Stats.Purged != 1 || !strings.Contains(string(res.Body), `"arguments":"{\"_purged\":\"<purged-errored-args size=\\\"610\\\"/>\"}"`) {
			t.Fatalf("purged %d:\n%s", res.Stats.Purged, res.Body)
		}
		if !strings.Contains(string(res.Body), rReasoning("1")+","+`{"type":"function_call","name":"exec_command"`) {
			t.Fatal("the reasoning item no longer precedes its call")
		}
	})
	t.Run("a failed apply_patch has its freeform input purged", func(t *testing.T) {
		out := `{"type":"custom_tool_call_output","call_id":"p1","output":"{\"output\":\"error: no such file\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.1}}"}`
		call := `{"type":"custom_tool_call","status":"completed","call_id":"p1","name":"apply_patch","input":` + string(quoteJSON(patch)) + `}`
		req := mustParse(t, wire.Responses, responsesBody(append([]string{rUser("go"), call, out}, after(2)...)...))
		res := Render(req, flush(t, req, st, stubPolicy()), stubPolicy())
		mustValid(t, req, res)
		if res.Stats.Purged != 1 || !strings.Contains(string(res.Body), `"name":"apply_patch","input":"{\"_purged\":\"<purged-errored-args size=`) {
			t.Fatalf("purged %d:\n%s", res.Stats.Purged, res.Body)
		}
	})
	t.Run("a failed local_shell_call keeps its action", func(t *testing.T) {
		call := `{"type":"local_shell_call","call_id":"l1","status":"completed","action":{"type":"exec","command":["sh","-c",` + string(quoteJSON(strings.Repeat("z", 700))) + `]}}`
		req := mustParse(t, wire.Responses, responsesBody(append([]string{rUser("go"), call, rOutput("l1", "Exit code: 2\nWall time: 0.1 seconds\nOutput:\nboom")}, after(2)...)...))
		res := Render(req, flush(t, req, st, stubPolicy()), stubPolicy())
		mustValid(t, req, res)
		if res.Stats.Purged != 0 || !strings.Contains(string(res.Body), call) {
			t.Fatalf("purged %d:\n%s", res.Stats.Purged, res.Body)
		}
	})
	t.Run("an output after other items is stubbed, not swept", func(t *testing.T) {
		req := mustParse(t, wire.Responses, responsesBody(rUser("go"), rCall("c1", "read", `{"path":"a"}`), rUser("steer"), rOutput("c1", big("A", 3000)), rReply("done"), rUser("next")))
		if err := wire.Validate(req); err != nil {
			t.Fatal(err)
		}
		res := Render(req, flush(t, req, NewState(), stubPolicy()), stubPolicy())
		mustValid(t, req, res)
		if res.Stats.Stubbed != 1 || res.Stats.Swept != 0 {
			t.Fatalf("%+v", res.Stats)
		}
	})
	t.Run("a compressed range drops its hosted calls' outputs and keeps compaction and reasoning", func(t *testing.T) {
		req := mustParse(t, wire.Responses, responsesBody(rUser("task"),
			`{"type":"compaction","encrypted_content":"history"}`,
			rReasoning("2"), rCall("c1", "read", `{}`), `{"type":"computer_call","call_id":"cc","action":{"type":"screenshot"}}`,
			`{"type":"computer_call_output","call_id":"cc","output":{"type":"computer_screenshot","image_url":"data:x"}}`,
			rOutput("c1", big("A", 2000)), rReasoning("3"), rReply("done"), rUser("next")))
		pol := kPolicy(0)
		res := Render(req, flush(t, req, NewState(), pol), pol)
		mustValid(t, req, res)
		body := string(res.Body)
		if res.Stats.Chains != 1 || strings.Contains(body, "computer_call") || strings.Contains(body, `"call_id":"c1"`) {
			t.Fatalf("%+v\n%s", res.Stats, body)
		}
		if !strings.Contains(body, `{"type":"compaction","encrypted_content":"history"}`) || !strings.Contains(body, rReasoning("3")+","+rReply("done")) || res.Stats.ThinkingStripped != 0 {
			t.Fatalf("compaction or the final reasoning lost:\n%s", body)
		}
		if !strings.Contains(body, `{"type":"message","role":"user","content":[{"type":"input_text","text":"\u003ccompressed-chain`) &&
			!strings.Contains(body, `{"type":"message","role":"user","content":[{"type":"input_text","text":"<compressed-chain`) {
			t.Fatalf("no synthetic user item:\n%s", body)
		}
	})
	t.Run("summaries are user message items after the turn's outputs", func(t *testing.T) {
		req := mustParse(t, wire.Responses, responsesBody(rUser("go"), rReasoning("4"), rCall("c1", "read", `{}`), rCall("c2", "read", `{"p":2}`),
			rOutput("c1", big("A", 3000)), rOutput("c2", big("B", 3000)), rReply("done"), rUser("next")))
		res := Render(req, flush(t, req, NewState(), stubPolicy()), stubPolicy())
		mustValid(t, req, res)
		got := texts(res.Request)
		if res.Stats.Summaries != 1 || len(got) != 7 || !strings.HasPrefix(got[4], "user|- `t1` read") || got[3] != "tool|R(c2):"+StubText("t2") ||
			!strings.Contains(string(res.Body), rOutput("c2", StubText("t2"))+`,{"type":"message","role":"user","content":[{"type":"input_text","text":"- `) {
			t.Fatalf("%+v\n%s", res.Stats, strings.Join(got, "\n"))
		}
	})
}
