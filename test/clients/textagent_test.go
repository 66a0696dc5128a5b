package clients

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// The templates of mini-swe-agent 1.x: system prompt (abridged), action_observation_template
// and format_error_template (abridged), as its trajectories' info.config.agent holds them.
const (
	msaSystem = "You are a helpful assistant that can interact multiple times with a computer shell to solve programming tasks.\n" +
		"Your response must contain exactly ONE bash code block with ONE command (or commands connected with && or ||)."
	msaTask        = "<pr_description>\nConsider the following PR description:\nDocument what the functions of this repository compute.\n</pr_description>"
	msaFormatError = "Please always provide EXACTLY ONE action in triple backticks, found %d actions.\n\n" +
		"Please format your action in triple backticks as shown in <response_example>.\n"
	msaSubmit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
)

var msaAction = regexp.MustCompile("(?s)```bash\\s*\\n(.*?)\\n```")

// textModel is the scripted model of a text-protocol agent: its replies are decided from the
// request alone — the results (observations and format errors) after the task — as mini-swe-agent's
// model would write them: a THOUGHT and one bash block.
type textModel struct {
	scriptLog
	mu      sync.Mutex
	queried []string // refs the model asked for in text
}

// textPlan is the replies by the number of results the request shows: four commands, a reply
// without an action (the agent rejects it: a final reply, which starts a flush), a command, a
// text recovery request for the first ref the request shows, a command, and the submission.
var textPlan = []string{"ls -la", "cat alpha.go", "cat beta.go", "cat gamma.go", "", "cat delta.go", "query", "wc -l alpha.go beta.go", msaSubmit}

var stubRef = regexp.MustCompile("reply with exactly: context_tree_query (t\\d+)")

func (m *textModel) respond(rec upstreamfake.Recorded) upstreamfake.Reply {
	req, reply, ok := m.parse(rec)
	if !ok {
		return reply
	}
	if len(req.Tools) > 0 {
		m.fail("request %d offers tools to a text agent", rec.Seq)
	}
	results, last := 0, ""
	for _, msg := range req.Messages {
		if msg.Role != wire.RoleUser || len(msg.Blocks) == 0 {
			continue
		}
		last = msg.Blocks[0].Text()
		if strings.HasPrefix(last, "<returncode>") || strings.HasPrefix(last, "Please always provide") {
			results++
		}
	}
	k := results
	if strings.HasPrefix(last, "## toolRef: ") { // the proxy's answer to the recovery request
		k++
	}
	if k >= len(textPlan) {
		m.fail("request %d is past the plan (%d results)", rec.Seq, results)
		return upstreamfake.Reply{Text: msaReply("Done.", msaSubmit)}
	}
	switch cmd := textPlan[k]; cmd {
	case "":
		return upstreamfake.Reply{Text: "THOUGHT: I have read enough of the files to describe them."}
	case "query":
		refs := stubRef.FindStringSubmatch(string(rec.Body))
		if refs == nil {
			m.fail("request %d (%d results) shows no stub to recover", rec.Seq, results)
			return upstreamfake.Reply{Text: msaReply("Look again.", "ls")}
		}
		m.mu.Lock()
		m.queried = append(m.queried, refs[1])
		m.mu.Unlock()
		return upstreamfake.Reply{Text: msaReply("I need the first output again.", "context_tree_query "+refs[1])}
	default:
		return upstreamfake.Reply{Text: msaReply(fmt.Sprintf("Step %d.", k+1), cmd)}
	}
}

func msaReply(thought, cmd string) string {
	return "THOUGHT: " + thought + "\n\n```bash\n" + cmd + "\n```"
}

// msaObserve runs a command as mini-swe-agent's LocalEnvironment does and formats its output
// with the action_observation_template.
func msaObserve(repo, cmd string) string {
	c := exec.Command("sh", "-c", cmd)
	c.Dir = repo
	out, err := c.CombinedOutput()
	rc := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		rc = ee.ExitCode()
	}
	return fmt.Sprintf("<returncode>%d</returncode>\n<output>\n%s</output>", rc, out)
}

// TestTextProtocolAgent runs a mini-swe-agent-style loop — no tools, the action in a bash
// block, its output back as a user message — on openai-go's Chat Completions client through a
// proxy with engine.observations on, every other request streamed. No real text-protocol
// agent installs from npm (mini-swe-agent and SWE-agent are Python), so the loop is written
// here with the SDK and mini-swe-agent's templates.
func TestTextProtocolAgent(t *testing.T) {
	repo := scratchRepo(t)
	m := &textModel{}
	r := startRigEngine(t, m.respond, "  observations: {enabled: true, harness: mini-swe-agent}\n")
	ctx := sdkContext(t)
	c := openai.NewClient(ooption.WithBaseURL(r.URL()+"/v1/"), ooption.WithAPIKey("sk-condense-test"), ooption.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(msaSystem), openai.UserMessage(msaTask)}
	var replies []string
	for step := 0; ; step++ {
		if step > 2*len(textPlan) {
			t.Fatal("the agent does not submit")
		}
		msg, _ := chatTurn(ctx, t, &c, openai.ChatCompletionNewParams{Model: "gpt-5.4", Messages: msgs}, step%2 == 1)
		reply := msg.Content
		replies = append(replies, reply)
		msgs = append(msgs, openai.AssistantMessage(reply))
		actions := msaAction.FindAllStringSubmatch(reply, -1)
		if len(actions) != 1 {
			msgs = append(msgs, openai.UserMessage(fmt.Sprintf(msaFormatError, len(actions))))
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(actions[0][1]), msaSubmit) {
			break
		}
		msgs = append(msgs, openai.UserMessage(msaObserve(repo, actions[0][1])))
	}
	checkTextSession(t, r, m, replies)
}

// checkTextSession checks a text-protocol session: the scripted model saw what it expected,
// every forwarded request is valid and offers no tool, the observations were stubbed after
// the flush at the rejected reply, the text recovery request was answered in the proxy with
// the original observation byte for byte and never reached the agent, and the last request
// went out smaller than the agent sent it, as one session.
func checkTextSession(t *testing.T, r *rig, m *textModel, replies []string) {
	t.Helper()
	m.report(t)
	m.mu.Lock()
	queried := append([]string(nil), m.queried...)
	m.mu.Unlock()
	all := collect(t, r)
	checkValid(t, all)
	if len(queried) != 1 {
		t.Fatalf("the model asked for %d recoveries, want 1", len(queried))
	}
	stubbed, answered := false, false
	var originals []string
	for _, ex := range r.tap.exchanges() {
		if bytes.Contains(ex.Response, []byte(pruner.QueryToolName)) {
			t.Errorf("agent request %d: the response the agent got holds %s", ex.Seq, pruner.QueryToolName)
		}
		if req, err := wire.Parse(wire.OpenAI, ex.Body); err == nil {
			for _, msg := range req.Messages {
				if txt := msg.Blocks[0].Text(); msg.Role == wire.RoleUser && strings.HasPrefix(txt, "<returncode>") && len(txt) > 1000 {
					originals = append(originals, txt)
				}
			}
		}
	}
	for _, s := range all {
		if len(s.req.Tools) > 0 {
			t.Errorf("provider request %d offers tools", s.rec.Seq)
		}
		for _, msg := range s.req.Messages {
			txt := msg.Blocks[0].Text()
			if msg.Role == wire.RoleUser && strings.HasPrefix(txt, "<returncode>0</returncode>\n<output>\n[Output summarized in pruner summary, ref `t") {
				stubbed = true
			}
			if msg.Role == wire.RoleUser && strings.HasPrefix(txt, "## toolRef: "+queried[0]+"\n") {
				for _, o := range originals {
					answered = answered || strings.HasSuffix(txt, "\n\n"+o)
				}
			}
		}
	}
	if !stubbed {
		t.Error("no forwarded request shows a stubbed observation")
	}
	if !answered {
		t.Errorf("no forwarded request answers %s with an original observation byte for byte", queried[0])
	}
	for _, rep := range replies {
		if strings.Contains(rep, pruner.QueryToolName) {
			t.Errorf("the agent got the recovery request %q", rep)
		}
	}
	// The agent's requests after the recovery get the hidden exchange back where it happened.
	reinserted := false
	for _, s := range all {
		n := len(s.req.Messages)
		if strings.HasPrefix(s.req.Messages[n-1].Blocks[0].Text(), "## toolRef: ") {
			continue // the continuation itself
		}
		for i, msg := range s.req.Messages[:n-1] {
			if msg.Role == wire.RoleAssistant && strings.Contains(msg.Blocks[0].Text(), "```bash\ncontext_tree_query "+queried[0]+"\n```") &&
				strings.HasPrefix(s.req.Messages[i+1].Blocks[0].Text(), "## toolRef: "+queried[0]+"\n") {
				reinserted = true
			}
		}
	}
	if !reinserted {
		t.Error("no later request re-inserts the hidden recovery exchange")
	}
	last := all[len(all)-1]
	ratio := float64(len(last.rec.Body)) / float64(len(last.client.Body))
	t.Logf("last request: the agent sent %d bytes, the provider got %d (%.0f %%)", len(last.client.Body), len(last.rec.Body), 100*ratio)
	if ratio > 0.8 {
		t.Errorf("the last request is %.0f %% of what the agent sent, want at most 80 %%", 100*ratio)
	}
	checkOneSession(t, r, all)
}
