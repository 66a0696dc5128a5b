package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// The templates of mini-swe-agent 1.x (its action_observation_template and
// format_error_template, as the corpus trajectories' info.config.agent holds them).
const msaSystem = "You are a helpful assistant that can interact multiple times with a computer shell to solve programming tasks.\n" +
	"Your response must contain exactly ONE bash code block with ONE command (or commands connected with && or ||)."

func msaReply(thought, cmd string) string {
	return "THOUGHT: " + thought + "\n\n```bash\n" + cmd + "\n```"
}

func msaObservation(rc int, out string) string {
	return fmt.Sprintf("<returncode>%d</returncode>\n<output>\n%s</output>", rc, out)
}

const msaFormatError = "Please always provide EXACTLY ONE action in triple backticks, found 0 actions.\n\n" +
	"Please format your action in triple backticks as shown in <response_example>.\n"

// textMsg is one message of a text-protocol conversation after its system prompt.
type textMsg struct{ role, text string }

// textAgent is a text-protocol agent (no tools: the model writes its action in its reply, the
// agent sends the output back as the next user message) on a real SDK client; sent holds the
// request bodies as the client sent them.
type textAgent struct {
	t    *testing.T
	f    wire.Format
	msgs []textMsg
	sent [][]byte
	ask  func(msgs []textMsg) (reply string, input, output int64)
}

// captureBodies is SDK middleware that records the request bodies the client sends.
func captureBodies(sent *[][]byte) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		*sent = append(*sent, body)
		return next(req)
	}
}

func newTextAgent(t *testing.T, r *rig, f wire.Format, session string, stream bool) *textAgent {
	a := &textAgent{t: t, f: f}
	mw := captureBodies(&a.sent)
	if f == wire.Anthropic {
		c := r.anthropic(session, aoption.WithMiddleware(mw))
		a.ask = func(msgs []textMsg) (string, int64, int64) {
			p := anthropic.MessageNewParams{Model: "claude-sonnet-test", MaxTokens: 1024, System: []anthropic.TextBlockParam{{Text: msaSystem}}}
			for _, m := range msgs {
				if m.role == "user" {
					p.Messages = append(p.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(m.text)))
				} else {
					p.Messages = append(p.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock(m.text)))
				}
			}
			var m *anthropic.Message
			if !stream {
				var err error
				if m, err = c.Messages.New(context.Background(), p); err != nil {
					t.Fatalf("messages.new: %v", err)
				}
			} else {
				st := c.Messages.NewStreaming(context.Background(), p)
				m = &anthropic.Message{}
				for st.Next() {
					if err := m.Accumulate(st.Current()); err != nil {
						t.Fatalf("accumulate: %v", err)
					}
				}
				if err := st.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
			}
			if len(m.Content) != 1 || m.Content[0].Type != "text" || m.StopReason != "end_turn" {
				t.Fatalf("the client got %+v (%s)", m.Content, m.StopReason)
			}
			return m.Content[0].Text, m.Usage.InputTokens, m.Usage.OutputTokens
		}
		return a
	}
	c := r.openai(session, ooption.WithMiddleware(mw))
	if f == wire.Responses {
		a.ask = func(msgs []textMsg) (string, int64, int64) {
			list := make(responses.ResponseInputParam, 0, len(msgs))
			for _, m := range msgs {
				var it json.RawMessage
				if m.role == "user" {
					it = userMessage(wire.Responses, m.text)
				} else {
					it = joinRaw(`{"type":"message","role":"assistant","content":[{"type":"output_text","annotations":[],"text":`, []json.RawMessage{jsonStr(m.text)}, `}]}`)
				}
				list = append(list, param.Override[responses.ResponseInputItemUnionParam](it))
			}
			p := responses.ResponseNewParams{Model: "gpt-5", Instructions: openai.String(msaSystem), Input: responses.ResponseNewParamsInputUnion{OfInputItemList: list}}
			resp := rTurn(t, c, p, stream)
			if len(resp.Output) != 1 || resp.Output[0].Type != "message" || resp.Status != "completed" {
				t.Fatalf("the client got %s", resp.RawJSON())
			}
			return resp.OutputText(), resp.Usage.InputTokens, resp.Usage.OutputTokens
		}
		return a
	}
	a.ask = func(msgs []textMsg) (string, int64, int64) {
		p := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(msaSystem)}}
		for _, m := range msgs {
			if m.role == "user" {
				p.Messages = append(p.Messages, openai.UserMessage(m.text))
			} else {
				p.Messages = append(p.Messages, openai.AssistantMessage(m.text))
			}
		}
		if stream {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		cc := oTurn(t, c, p, stream)
		if len(cc.Choices) != 1 || len(cc.Choices[0].Message.ToolCalls) != 0 || cc.Choices[0].FinishReason != "stop" {
			t.Fatalf("the client got %+v", cc.Choices)
		}
		return cc.Choices[0].Message.Content, cc.Usage.PromptTokens, cc.Usage.CompletionTokens
	}
	return a
}

// turn sends the conversation with the next user message and appends the reply the client got.
func (a *textAgent) turn(user string) string {
	a.t.Helper()
	a.msgs = append(a.msgs, textMsg{"user", user})
	reply, _, _ := a.ask(a.msgs)
	a.msgs = append(a.msgs, textMsg{"assistant", reply})
	return reply
}

// msaUpstream is what the upstream saw of a turn: its model requests, parsed and checked valid,
// without query tool or tools at all.
func msaUpstream(t *testing.T, f wire.Format, recs []upstreamfake.Recorded) []*wire.Request {
	t.Helper()
	var out []*wire.Request
	for _, rec := range recs {
		req := mustValid(t, f, rec.Body)
		if len(req.Tools) != 0 || gjson.GetBytes(rec.Body, "tools").Exists() || bytes.Contains(rec.Body, []byte(`"name":"`+pruner.QueryToolName+`"`)) {
			t.Fatalf("a tool was added to a text agent's request:\n%s", rec.Body)
		}
		out = append(out, req)
	}
	return out
}

func obsRig(t *testing.T, on bool, mod func(*Options)) *rig {
	return newRig(t, nil, nil, func(o *Options) {
		if on {
			o.Policy.Observations = pruner.ObservationPolicy{Enabled: true, Harness: pruner.HarnessMiniSWEAgent}
			o.Flusher.(*flush.InProcess).Orch.Planner = flush.EnginePlanner{Policy: o.Policy}
		}
		if mod != nil {
			mod(o)
		}
	})
}

// TestTextAgentObservationsPrunedLive: a mini-swe-agent conversation (no tools; actions in
// bash blocks, outputs as <returncode>/<output> user messages) through the proxy with
// observations on, on the real Anthropic and OpenAI SDKs (Messages, Chat Completions and
// Responses), JSON and SSE. No flush starts after
// an action; the reply no observation answers (here one the agent rejected with its format
// error) starts one at the next request, which goes out with the observations stubbed; the
// prefix stays byte-stable between flushes; a reply "context_tree_query t1" is answered in
// the proxy — the client gets only the continuation, with the usage summed — and the next
// request re-inserts that hidden exchange byte for byte; no tool is ever added and every
// forwarded request is valid.
func TestTextAgentObservationsPrunedLive(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI, wire.Responses} {
		for _, stream := range []bool{false, true} {
			t.Run(f.String()+"/"+map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
				testTextAgentLive(t, f, stream)
			})
		}
	}
}

func testTextAgentLive(t *testing.T, f wire.Format, stream bool) {
	r := obsRig(t, true, nil)
	a := newTextAgent(t, r, f, "msa-live", stream)
	triggers := func() float64 {
		return testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("agent-message"))
	}
	listing, source := bigOutput("ls -R", 60), bigOutput("models.py", 80)
	step := func(reply upstreamfake.Reply, user string) (string, []*wire.Request) {
		t.Helper()
		before := len(r.up.Requests())
		r.up.Enqueue(reply)
		got := a.turn(user)
		r.settle()
		return got, msaUpstream(t, f, r.up.Requests()[before:])
	}

	// The task, two actions and their observations: no flush, the bodies go as the client sent them.
	step(upstreamfake.Reply{Text: msaReply("List the repository.", "ls -R")}, "<pr_description>\nrequests.get always sends Content-Length\n</pr_description>")
	step(upstreamfake.Reply{Text: msaReply("Read the models.", "cat requests/models.py")}, msaObservation(0, listing))
	_, up := step(upstreamfake.Reply{Text: "THOUGHT: The header is set in prepare_content_length; I will change it for GET."}, msaObservation(0, source))
	if n := triggers(); n != 0 {
		t.Fatalf("%v agent-message flushes started after actions", n)
	}
	for i, rec := range r.up.Requests() {
		if !bytes.Equal(rec.Body, a.sent[i]) {
			t.Fatalf("request %d was changed before any flush:\n%s\nclient:\n%s", i, rec.Body, a.sent[i])
		}
	}
	if len(up) != 1 {
		t.Fatalf("%d upstream requests for one turn", len(up))
	}

	// The agent rejects the reply without an action: that reply was final, so this request
	// starts a flush, waits for it and goes out with both observations stubbed.
	_, up = step(upstreamfake.Reply{Text: msaReply("Find the line.", "grep -n Content-Length requests/models.py")}, msaFormatError)
	if n := triggers(); n != 1 {
		t.Fatalf("%v agent-message flushes after the final reply, want 1", n)
	}
	fwd4 := r.up.Requests()[len(r.up.Requests())-1].Body
	stub := func(ref string) string {
		return "<returncode>0</returncode>\n<output>\n[Output summarized in pruner summary, ref `" + ref + "`. To see it in full, reply with exactly: context_tree_query " + ref + "]\n</output>"
	}
	if txt := string(up[0].Raw()); strings.Contains(txt, "ls -R line 005") || strings.Contains(txt, "models.py line 005") ||
		!strings.Contains(joinTexts(up[0]), stub("t1")) || !strings.Contains(joinTexts(up[0]), stub("t2")) {
		t.Fatalf("the observations were not stubbed:\n%s", joinTexts(up[0]))
	}

	// The next action: no flush, the prefix extends the flushed request's byte for byte.
	step(upstreamfake.Reply{Text: msaReply("Fix it.", "sed -i s/a/b/ requests/models.py")}, msaObservation(0, "requests/models.py:388: self.headers['Content-Length'] = '0'\n"))
	fwd5 := r.up.Requests()[len(r.up.Requests())-1].Body
	if p4, p5 := convPrefix(f, fwd4), convPrefix(f, fwd5); !strings.HasPrefix(p5, p4) {
		t.Fatalf("the prefix changed between flushes:\n4: %s\n5: %s", p4, p5)
	}

	// The model asks for t1 in text: answered in the proxy; the client sees the continuation only.
	recovery := msaReply("I need the full listing again.", "context_tree_query t1")
	cont := msaReply("Check the build copy too.", "grep -rn Content-Length build/lib/requests")
	before := len(r.up.Requests())
	r.up.Enqueue(upstreamfake.Reply{Text: recovery, Usage: upstreamfake.Usage{InputTokens: 100, OutputTokens: 10}},
		upstreamfake.Reply{Text: cont, Usage: upstreamfake.Usage{InputTokens: 130, OutputTokens: 7}})
	a.msgs = append(a.msgs, textMsg{"user", msaObservation(0, "")})
	got, in, out := a.ask(a.msgs)
	r.settle()
	if got != cont {
		t.Fatalf("the client got %q, want only the continuation %q", got, cont)
	}
	if in != 230 || out != 17 {
		t.Fatalf("usage %d in / %d out, want the rounds summed (230/17)", in, out)
	}
	a.msgs = append(a.msgs, textMsg{"assistant", got})
	turn := msaUpstream(t, f, r.up.Requests()[before:])
	if len(turn) != 2 {
		t.Fatalf("%d upstream requests for the recovery turn, want 2", len(turn))
	}
	c := turn[1]
	n := len(c.Messages)
	asked, answer := c.Messages[n-2], c.Messages[n-1]
	if asked.Role != wire.RoleAssistant || joinMsg(asked) != recovery || answer.Role != wire.RoleUser ||
		!strings.Contains(joinMsg(answer), "## toolRef: t1") || !strings.Contains(joinMsg(answer), msaObservation(0, listing)) {
		t.Fatalf("the continuation does not carry the request and its answer:\n%s\n%s", asked.Raw(), answer.Raw())
	}
	contBody := r.up.Requests()[before+1].Body
	if p1, pc := convPrefix(f, r.up.Requests()[before].Body), convPrefix(f, contBody); !strings.HasPrefix(pc, p1) {
		t.Fatal("the continuation does not extend the forwarded request")
	}
	if n := testutil.ToFloat64(r.px.met.Recoveries.WithLabelValues("answered")); n != 1 {
		t.Fatalf("%v recoveries answered", n)
	}

	// The next request re-inserts the hidden exchange: the continuation's messages are its prefix.
	_, up = step(upstreamfake.Reply{Text: msaReply("Run the tests.", "pytest -q")}, msaObservation(1, "build/lib/requests/models.py:388\n"))
	fwd7 := r.up.Requests()[len(r.up.Requests())-1].Body
	if pc, p7 := convPrefix(f, contBody), convPrefix(f, fwd7); !strings.HasPrefix(p7, pc) {
		t.Fatalf("the hidden exchange was not re-inserted byte for byte:\ncont: %s\nnext: %s", pc, p7)
	}
	summaries := 0
	if f != wire.Anthropic {
		summaries = 2 // a summary is a user message of its own after its observation
	}
	if want := countMessages(f, a.sent[len(a.sent)-1]) + 2 + summaries; len(up[0].Messages) != want {
		t.Fatalf("%d messages upstream, want %d: the client's, the hidden 2 and %d summaries", len(up[0].Messages), want, summaries)
	}
	if n := triggers(); n != 1 {
		t.Fatalf("%v agent-message flushes, want still 1", n)
	}

	// Another final reply: the second flush goes over the re-inserted exchange; the request
	// stays valid and still carries the exchange where it happened.
	step(upstreamfake.Reply{Text: "THOUGHT: The tests fail for another reason."}, msaObservation(1, bigOutput("pytest", 60)))
	_, up = step(upstreamfake.Reply{Text: msaReply("Submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")}, msaFormatError)
	if n := triggers(); n != 2 {
		t.Fatalf("%v agent-message flushes, want 2", n)
	}
	all := joinTexts(up[0])
	if !strings.Contains(all, recovery+"\n~\n## toolRef: t1") || !strings.Contains(all, "\n~\n"+cont+"\n~\n") || strings.Contains(all, "pytest line 005") {
		t.Fatalf("after the second flush:\n%s", all)
	}
}

// joinTexts is every text block of a request's messages, in order.
func joinTexts(req *wire.Request) string {
	var parts []string
	for _, m := range req.Messages {
		parts = append(parts, joinMsg(m))
	}
	return strings.Join(parts, "\n~\n")
}

// joinMsg is a message's text blocks joined.
func joinMsg(m *wire.Message) string {
	var parts []string
	for _, b := range m.Blocks {
		if b.Kind == wire.KindText {
			parts = append(parts, b.Text())
		}
	}
	return strings.Join(parts, "\n")
}

// countMessages is the number of messages of a request body.
func countMessages(f wire.Format, body []byte) int {
	req, err := wire.Parse(f, body)
	if err != nil {
		return -1
	}
	return len(req.Messages)
}

// convPrefix is a forwarded body's raw messages (Responses: input) array without its closing
// bracket.
func convPrefix(f wire.Format, body []byte) string {
	if f == wire.Responses {
		return inputPrefix(body)
	}
	return messagesPrefix(body)
}

// TestTextAgentObservationsOff: the control — the same mini-swe-agent conversation with
// observations off (the default). Its requests offer no tools, so each is a side request: it
// goes upstream exactly as the client sent it, starts no flush, and a reply that reads like a
// text recovery request reaches the client as the model wrote it.
func TestTextAgentObservationsOff(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI, wire.Responses} {
		for _, stream := range []bool{false, true} {
			t.Run(f.String()+"/"+map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
				r := obsRig(t, false, func(o *Options) { o.Trigger = Trigger{CacheAware: true, MidRun: true, GraceTurns: 1} })
				a := newTextAgent(t, r, f, "msa-off", stream)
				replies := []string{msaReply("List.", "ls -R"), msaReply("Read.", "cat a.py"), "THOUGHT: done thinking.",
					msaReply("Again.", "context_tree_query t1"), msaReply("Test.", "pytest")}
				users := []string{"<pr_description>\nfix it\n</pr_description>", msaObservation(0, bigOutput("ls", 60)),
					msaObservation(0, bigOutput("cat", 60)), msaFormatError, msaObservation(0, "")}
				for i, u := range users {
					r.up.Enqueue(upstreamfake.Reply{Text: replies[i]})
					if got := a.turn(u); got != replies[i] {
						t.Fatalf("turn %d: the client got %q, want %q", i, got, replies[i])
					}
					r.settle()
				}
				recs := r.up.Requests()
				if len(recs) != len(a.sent) {
					t.Fatalf("%d upstream requests for %d client requests", len(recs), len(a.sent))
				}
				for i, rec := range recs {
					if !bytes.Equal(rec.Body, a.sent[i]) {
						t.Fatalf("request %d changed:\n%s\nclient:\n%s", i, rec.Body, a.sent[i])
					}
				}
				for _, trig := range []string{"agent-message", "mid-run", "retry", "delta"} {
					if n := testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues(trig)); n != 0 {
						t.Fatalf("%v %s flushes", n, trig)
					}
				}
			})
		}
	}
}

// TestTextAgentMidRun: with observations on, a mid-run flush cuts a text agent's run at its
// observation turns (ToolTurns), leaving the latest GraceTurns verbatim; a run too short for
// the cut starts none.
func TestTextAgentMidRun(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		t.Run(f.String(), func(t *testing.T) {
			r := obsRig(t, true, func(o *Options) { o.Trigger = Trigger{CacheAware: true, MidRun: true, GraceTurns: 1} })
			a := newTextAgent(t, r, f, "msa-midrun", false)
			midRuns := func() float64 { return testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("mid-run")) }
			r.up.Enqueue(upstreamfake.Reply{Text: msaReply("List.", "ls -R")})
			a.turn("<pr_description>\nfix it\n</pr_description>")
			for i, want := range []float64{0, 1} { // one observation turn: within the grace; two: the cut
				r.up.Enqueue(upstreamfake.Reply{Text: msaReply(fmt.Sprint("Step ", i), fmt.Sprint("cat f", i))})
				a.turn(msaObservation(0, bigOutput(fmt.Sprint("f", i), 60)))
				r.settle()
				if n := midRuns(); n != want {
					t.Fatalf("after %d observations: %v mid-run flushes, want %v", i+1, n, want)
				}
			}
			if n := testutil.ToFloat64(r.px.met.FlushTriggers.WithLabelValues("agent-message")); n != 0 {
				t.Fatalf("%v agent-message flushes in a run without a final reply", n)
			}
		})
	}
}

// TestTextRecoveryBounded: a model that keeps asking for outputs in text is answered for
// MaxRecoveryRounds rounds; the reply after them reaches the client as the model wrote it.
func TestTextRecoveryBounded(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "sse"}[stream], func(t *testing.T) {
			r := obsRig(t, true, func(o *Options) { o.MaxRecoveryRounds = 2 })
			a := newTextAgent(t, r, wire.OpenAI, "msa-bounded", stream)
			for _, s := range [][2]string{
				{"<pr_description>\nfix it\n</pr_description>", msaReply("List.", "ls -R")},
				{msaObservation(0, bigOutput("ls", 60)), msaReply("Read.", "cat a.py")},
				{msaObservation(0, bigOutput("cat", 60)), "THOUGHT: no action."},
				{msaFormatError, msaReply("Grep.", "grep -n x a.py")}, // flushes: both observations stubbed
			} {
				r.up.Enqueue(upstreamfake.Reply{Text: s[1]})
				a.turn(s[0])
				r.settle()
			}
			ask := func(i int) string { return msaReply(fmt.Sprint("Again ", i), "context_tree_query t1") }
			before := len(r.up.Requests())
			r.up.Enqueue(upstreamfake.Reply{Text: ask(1)}, upstreamfake.Reply{Text: ask(2)}, upstreamfake.Reply{Text: ask(3)})
			if got := a.turn(msaObservation(0, "")); got != ask(3) {
				t.Fatalf("the client got %q, want the third request as it came", got)
			}
			if n := len(r.up.Requests()) - before; n != 3 {
				t.Fatalf("%d upstream requests, want 3 (two answered rounds)", n)
			}
		})
	}
}

// TestClassifyTextTurns: which requests are turns. A request offering tools is one; one
// without tools is a side request (a title, a summary) — unless observations are on and its
// history holds an assistant message and no tool call: then it is a text-protocol agent's turn.
func TestClassifyTextTurns(t *testing.T) {
	on := Options{Policy: testPolicy()}
	on.Policy.Observations.Enabled = true
	off := Options{Policy: testPolicy()}
	for _, c := range []struct {
		name, body string
		opt        Options
		side, text bool
	}{
		{"tools, observations on", `{"model":"m","tools":[{"name":"bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, on, false, false},
		{"title call, observations on", `{"model":"m","tools":[],"messages":[{"role":"user","content":"Write a title for: fix the build"}]}`, on, true, false},
		{"text agent, observations on", `{"model":"m","messages":[{"role":"user","content":"task"},{"role":"assistant","content":"ls"},{"role":"user","content":"<returncode>0</returncode>\n<output>\n</output>"}]}`, on, false, true},
		{"a tool-using client's side call over its history", `{"model":"m","tools":[],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]},{"role":"assistant","content":"done"},{"role":"user","content":"Summarize the conversation."}]}`, on, true, false},
		{"text agent, observations off", `{"model":"m","messages":[{"role":"user","content":"task"},{"role":"assistant","content":"ls"},{"role":"user","content":"x"}]}`, off, true, false},
	} {
		req, err := wire.Parse(wire.Anthropic, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{opt: c.opt}
		if side, text := s.classify(req); side != c.side || text != c.text {
			t.Errorf("%s: side %v text %v, want %v %v", c.name, side, text, c.side, c.text)
		}
	}
}

// TestFinalReply: the request side of a text turn's final reply — its last assistant message,
// followed by a message, answered by no observation, after a turn an observation answered.
func TestFinalReply(t *testing.T) {
	msgs := func(roles ...string) []*wire.Message {
		var out []*wire.Message
		for i, r := range roles {
			body := fmt.Sprintf(`{"model":"m","messages":[{"role":%q,"content":"m%d"}]}`, r, i)
			req, err := wire.Parse(wire.OpenAI, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, req.Messages[0])
		}
		return out
	}
	for _, c := range []struct {
		name  string
		roles []string
		turns []bool
		want  bool
	}{
		{"after an action and its observation", []string{"user", "assistant", "user", "assistant", "user"}, []bool{false, true, false, false, false}, true},
		{"an action: its observation answers it", []string{"user", "assistant", "user", "assistant", "user"}, []bool{false, true, false, true, false}, false},
		{"the reply is the last message", []string{"user", "assistant", "user", "assistant"}, []bool{false, true, false, false}, false},
		{"no observation so far", []string{"user", "assistant", "user", "assistant", "user"}, []bool{false, false, false, false, false}, false},
		{"no assistant", []string{"user"}, []bool{false}, false},
	} {
		turns := c.turns
		toolTurn := func(_ []*wire.Message, i int) bool { return turns[i] }
		m := msgs(c.roles...)
		key, ok := finalReply(m, toolTurn)
		if ok != c.want {
			t.Errorf("%s: final %v, want %v", c.name, ok, c.want)
		}
		if ok {
			other := append(msgs(c.roles...)[:3:3], msgs("assistant", "user")...)
			if k2, _ := finalReply(other, toolTurn); k2 == key && string(other[3].Raw()) != string(m[3].Raw()) {
				t.Errorf("%s: another reply has the same key", c.name)
			}
		}
	}
}
