package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/poll"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

var urlSafeRe = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// TestClientSessionIDs: the session ids known clients send name their session, in the
// documented precedence, as URL-safe ids.
func TestClientSessionIDs(t *testing.T) {
	const uuid = "707a4c11-a739-498a-a24d-02ce74e4c7a2"
	meta := `{"metadata":{"user_id":"{\"device_id\":\"abc\",\"account_uuid\":\"\",\"session_id\":\"` + uuid + `\"}"},"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name   string
		f      wire.Format
		hdr    map[string]string
		body   string
		sid    string
		source SessionSource
	}{
		{"claude code header", wire.Anthropic, map[string]string{"X-Claude-Code-Session-Id": uuid}, meta, "claude-" + uuid, SourceClaudeCode},
		{"claude code metadata", wire.Anthropic, nil, meta, "claude-" + uuid, SourceClaudeCode},
		{"codex session-id", wire.Responses, map[string]string{"Session-Id": "019e1625-789d", "Thread-Id": "other"}, `{"input":"hi","prompt_cache_key":"k"}`, "codex-019e1625-789d", SourceCodex},
		{"codex thread-id", wire.Responses, map[string]string{"Thread-Id": "019e1625"}, `{"input":"hi"}`, "codex-019e1625", SourceCodex},
		{"opencode", wire.Anthropic, map[string]string{"X-Session-Affinity": "ses_dcadb9fa8ffeYFLJKE4DvZqVI8", "X-Session-Id": "ses_dcadb9fa8ffeYFLJKE4DvZqVI8"}, `{"messages":[{"role":"user","content":"hi"}]}`, "opencode-ses_dcadb9fa8ffeYFLJKE4DvZqVI8", SourceOpencode},
		{"explicit header first", wire.Anthropic, map[string]string{HeaderSession: "mine", "X-Claude-Code-Session-Id": uuid}, meta, "mine", SourceHeader},
		{"header beats metadata", wire.Anthropic, map[string]string{"X-Claude-Code-Session-Id": "h1"}, meta, "claude-h1", SourceClaudeCode},
	} {
		h := http.Header{}
		for k, v := range tc.hdr {
			h.Set(k, v)
		}
		id := identify(tc.f, h, []byte(tc.body))
		if id.sid != tc.sid || id.src != tc.source || id.opening {
			t.Errorf("%s: %+v, want %s from %s", tc.name, id, tc.sid, tc.source)
		}
	}
}

// TestSessionIDsAreURLSafe: ids from client values (a JSON user id, slashes, spaces, very long
// values) become URL-safe and stay distinct.
func TestSessionIDsAreURLSafe(t *testing.T) {
	seen := map[string]string{}
	for _, v := range []string{`{"device_id":"x"}`, `{"device_id":"y"}`, "team/alice", "team alice", "team_alice", strings.Repeat("a", 200), strings.Repeat("a", 201), "plain-id.1"} {
		body := `{"metadata":{"user_id":` + string(jsonStr(v)) + `},"messages":[{"role":"user","content":"go"},{"role":"assistant","content":"ok"}]}`
		id := identify(wire.Anthropic, http.Header{}, []byte(body))
		if !urlSafeRe.MatchString(id.sid) || store.ValidateSessionID(id.sid) != nil || len(id.sid) > 120 {
			t.Errorf("%.40q: session id %q is not URL-safe", v, id.sid)
		}
		if prev, dup := seen[id.sid]; dup {
			t.Errorf("%.40q and %.40q share session id %q", v, prev, id.sid)
		}
		seen[id.sid] = v
	}
	if got := urlSafe("plain-id.1"); got != "plain-id.1" {
		t.Errorf("a safe id changed: %q", got)
	}
}

// TestConversationKey: the derived session names the conversation by its first exchange, in
// every format, whatever the system prompt says; a conversation's first request is an opening.
func TestConversationKey(t *testing.T) {
	for _, tc := range []struct {
		f                      wire.Format
		opening, first, second string // an opening; two later requests of one conversation (system prompts differ)
		other                  string // another conversation with the same first message
	}{
		{wire.Anthropic,
			`{"system":"day 1","messages":[{"role":"user","content":"fix it"}]}`,
			`{"system":"day 1","messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`,
			`{"system":"day 2","messages":[{"role":"user","content":[{"type":"text","text":"fix it"}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{"a":1}}]},{"role":"user","content":"more"}]}`,
			`{"system":"day 1","messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"bash","input":{}}]},{"role":"user","content":"x"}]}`},
		{wire.OpenAI,
			`{"messages":[{"role":"system","content":"day 1"},{"role":"user","content":"fix it"}]}`,
			`{"messages":[{"role":"system","content":"day 1"},{"role":"user","content":"fix it"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{}"}}]}]}`,
			`{"messages":[{"role":"developer","content":"day 2"},{"role":"user","content":"fix it"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"x"}]}`,
			`{"messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":"Done."}]}`},
		{wire.Responses,
			`{"instructions":"day 1","input":"fix it"}`,
			`{"instructions":"day 1","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]},{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"call_1","name":"exec","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"x"}]}`,
			`{"instructions":"day 2","input":[{"role":"developer","content":"d"},{"role":"user","content":"fix it"},{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"call_1","name":"exec","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"call_1","output":"y"},{"role":"user","content":"more"}]}`,
			`{"instructions":"day 1","input":[{"role":"user","content":"fix it"},{"type":"function_call","call_id":"call_2","name":"exec","arguments":"{}"}]}`},
	} {
		h := http.Header{}
		op := identify(tc.f, h, []byte(tc.opening))
		a, b, o := identify(tc.f, h, []byte(tc.first)), identify(tc.f, h, []byte(tc.second)), identify(tc.f, h, []byte(tc.other))
		if !op.opening || a.opening || b.opening || o.opening {
			t.Errorf("%s: opening flags %v %v %v %v, want only the first", tc.f, op.opening, a.opening, b.opening, o.opening)
		}
		if a.sid != b.sid || a.src != SourceDerived || !strings.HasPrefix(a.sid, "d-") {
			t.Errorf("%s: one conversation, two sessions: %s %s", tc.f, a.sid, b.sid)
		}
		if o.sid == a.sid {
			t.Errorf("%s: two conversations with the same first message share session %s", tc.f, a.sid)
		}
	}
}

// TestSessionSurvivesSystemPromptChange: an agent that changes its system prompt between two
// prompts of one conversation (pi writes the date into it) keeps its session and its state:
// the second prompt's first request is pruned by the flush of the first.
func TestSessionSurvivesSystemPromptChange(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	c := r.anthropic("")
	params := func(system string, msgs []anthropic.MessageParam) anthropic.MessageNewParams {
		p := aParams(msgs)
		p.System = []anthropic.TextBlockParam{{Text: system}}
		return p
	}
	send := func(p anthropic.MessageNewParams) *anthropic.Message {
		t.Helper()
		m, err := c.Messages.New(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	r.up.Enqueue(upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_read1", Name: "bash", Input: `{"cmd":"cat log"}`}}}, upstreamfake.Reply{Text: "The log is fine."})
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("check the log"))}
	m := send(params("Current date: 2026-12-01", msgs))
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_read1", bigOutput("log", 60), false)))
	m = send(params("Current date: 2026-12-01", msgs))
	msgs = append(msgs, m.ToParam())
	r.settle()
	r.up.Enqueue(upstreamfake.Reply{Text: "Still fine."})
	send(params("Current date: 2026-12-02", append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("and today?")))))
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if strings.Contains(string(rec.Body), "log line 030") || !strings.Contains(string(rec.Body), "ref `t1`") {
		t.Fatalf("the request after the system prompt changed is not pruned by the first prompt's flush: %.400s", rec.Body)
	}
	r.settle()
	sessions, err := r.st.List(context.Background())
	if err != nil || len(sessions) != 1 || sessions[0].Stats[store.StatRequests] != 2 {
		t.Fatalf("sessions %+v (%v), want one holding the two requests after the opening one", sessions, err)
	}
}

// TestOpeningRequest: a conversation's first request gets the query tool but creates no
// session; the session starts with the request that carries the model's first answer.
func TestOpeningRequest(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	c := r.anthropic("")
	r.up.Enqueue(upstreamfake.Reply{Text: "Hello."})
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	m := aTurn(t, c, msgs, false)
	r.settle()
	rec, _ := lastModelRequest(t, r.up, wire.Anthropic)
	if !strings.Contains(gjson.GetBytes(rec.Body, "tools").Raw, pruner.QueryToolName) {
		t.Fatalf("the opening request is not offered %s: %s", pruner.QueryToolName, rec.Body)
	}
	if sessions, _ := r.st.List(context.Background()); len(sessions) != 0 {
		t.Fatalf("the opening request created sessions %+v", sessions)
	}
	r.up.Enqueue(upstreamfake.Reply{Text: "Sure."})
	aTurn(t, c, append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("thanks"))), false)
	r.settle()
	if sessions, _ := r.st.List(context.Background()); len(sessions) != 1 || !strings.HasPrefix(sessions[0].Session, "d-") {
		t.Fatalf("sessions %+v, want the conversation's one", sessions)
	}
}

// TestSideRequests: a request that offers no tools (count_tokens with tools: [], a title or
// summary request) gets the session's pruning but no query tool, starts no flush, and leaves
// the session's last values as the conversation set them.
func TestSideRequests(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	c := r.anthropic("side")
	r.up.Enqueue(upstreamfake.Reply{ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_s1", Name: "bash", Input: `{"cmd":"cat log"}`}}}, upstreamfake.Reply{Text: "Fine."})
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("check the log"))}
	m := aTurn(t, c, msgs, false)
	msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_s1", bigOutput("log", 60), false)))
	m = aTurn(t, c, msgs, false)
	msgs = append(msgs, m.ToParam())
	r.settle()
	var before *store.Snapshot
	poll.Until(t, 10*time.Second, "the flush of the final answer", func() (bool, string) {
		snap, err := r.st.Load(context.Background(), "side")
		before = snap
		return err == nil && snap.Version > 0, fmt.Sprint(err)
	})
	flushes := r.up.Requests()
	side := aParams(append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("Write a title for this conversation."))))
	side.Tools = nil
	for _, path := range []string{"/v1/messages/count_tokens", "/v1/messages"} {
		body := mustJSON(t, side)
		if path == "/v1/messages/count_tokens" {
			body = strings.Replace(body, `"messages"`, `"tools":[],"messages"`, 1)
		}
		r.up.Enqueue(upstreamfake.Reply{Text: "Log check"})
		if resp, b := post(t, r.http.URL+path, body, map[string]string{HeaderSession: "side", "Anthropic-Version": "2023-06-01"}); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		rec, _ := r.up.Last()
		if strings.Contains(string(rec.Body), `"name":"`+pruner.QueryToolName) {
			t.Errorf("%s: the side request was offered %s: %.300s", path, pruner.QueryToolName, rec.Body)
		}
		if !strings.Contains(string(rec.Body), "ref `t1`") || strings.Contains(string(rec.Body), "log line 030") {
			t.Errorf("%s: the side request is not pruned with the session's state: %.300s", path, rec.Body)
		}
	}
	r.settle()
	after, err := r.st.Load(context.Background(), "side")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{statLastMessages, statLastTokens, statLastRequestMs, statContextReqs} {
		if after.Stats[k] != before.Stats[k] {
			t.Errorf("side requests moved %s from %d to %d", k, before.Stats[k], after.Stats[k])
		}
	}
	if after.Version != before.Version || len(r.up.Requests()) != len(flushes)+2 {
		t.Errorf("a side request started a flush (version %d → %d)", before.Version, after.Version)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
