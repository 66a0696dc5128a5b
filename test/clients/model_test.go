package clients

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// step is one scripted model turn of a prompt: a tool call that reads a file or runs a
// command, or a context_tree_query call for a ref the request shows.
type step struct {
	read  string // file of the scratch repository to read
	shell string // command to run
	query bool
}

// plan is the scripted session: prompt n (1-based, marked "[Pn]" in its text) makes the tool
// calls of plan[n-1], then gives a final answer. 17 tool rounds over four prompts, an agent
// reading its way through a repository: one failing command, one context_tree_query call, and
// a short last prompt, so its requests show what pruning the earlier prompts' outputs saves.
var plan = [][]step{
	{{read: "alpha.go"}, {read: "beta.go"}, {shell: "ls -la"}, {read: "gamma.go"}, {shell: "grep -n func delta.go"}, {read: "delta.go"}},
	{{read: "epsilon.go"}, {shell: "cat no-such-file.txt"}, {read: "zeta.go"}, {read: "eta.go"}, {shell: "grep -n return theta.go"}, {read: "theta.go"}},
	{{read: "iota.go"}, {query: true}, {read: "kappa.go"}, {read: "lambda.go"}},
	{{shell: "wc -l alpha.go beta.go"}},
}

// prompt returns the text of prompt n.
func prompt(n int) string {
	return fmt.Sprintf("[P%d] Look at the files of this repository with your tools and tell me what you find.", n)
}

// toolSet builds an agent's own tool calls.
type toolSet struct {
	read  func(path string) upstreamfake.ToolCall
	shell func(cmd string) upstreamfake.ToolCall
}

// readShellTools is the toolSet of an agent whose read tool takes the path as pathKey and whose
// shell tool takes "command", and a "description" too when described.
func readShellTools(read, pathKey, shell string, described bool) toolSet {
	return toolSet{
		read: func(p string) upstreamfake.ToolCall {
			return upstreamfake.ToolCall{Name: read, Input: jsonArgs(pathKey, p)}
		},
		shell: func(c string) upstreamfake.ToolCall {
			if described {
				return upstreamfake.ToolCall{Name: shell, Input: jsonArgs("command", c, "description", "Run "+c)}
			}
			return upstreamfake.ToolCall{Name: shell, Input: jsonArgs("command", c)}
		},
	}
}

func jsonArgs(kv ...string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// model is the scripted provider behind the fake upstream. It decides each reply from the
// request alone (the prompt marker and the tool results after it), as a real model would.
type model struct {
	t     *testing.T
	repo  string
	tools toolSet
	// holdAt is the prompt whose final answer is streamed with a pause after its first event,
	// until the tap saw that event arrive (proof the proxy relays event by event).
	holdAt int
	// reasoning makes every tool-calling reply start with a reasoning item (Responses API):
	// the agent sends it back encrypted, and the proxy must keep it whole before its call.
	reasoning bool

	scriptLog
	mu       sync.Mutex
	queried  []string // refs the model asked context_tree_query for
	held     map[int]chan struct{}
	released bool // a hold was released by the tap, not by its timeout
}

// scriptLog collects what a scripted model found wrong in the requests it answered.
type scriptLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *scriptLog) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// report fails t with every error collected.
func (l *scriptLog) report(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		t.Errorf("scripted model: %s", e)
	}
}

// parse reads a request the scripted model answers: ok false with the reply to give for
// another path than a model endpoint's, or a body that does not parse (logged).
func (l *scriptLog) parse(rec upstreamfake.Recorded) (req *wire.Request, reply upstreamfake.Reply, ok bool) {
	f, isModel := formatOfPath(rec.Path)
	if !isModel {
		return nil, upstreamfake.Reply{Text: "ok"}, false
	}
	req, err := wire.Parse(f, rec.Body)
	if err != nil {
		l.fail("request %d does not parse: %v", rec.Seq, err)
		return nil, upstreamfake.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: err.Error()}, false
	}
	return req, upstreamfake.Reply{}, true
}

func newModel(t *testing.T, repo string, tools toolSet) *model {
	return &model{t: t, repo: repo, tools: tools, holdAt: 2, held: map[int]chan struct{}{}}
}

// formatOfPath returns the wire format of a provider path, ok false for other paths.
func formatOfPath(path string) (wire.Format, bool) {
	switch {
	case strings.HasSuffix(path, "/v1/messages"):
		return wire.Anthropic, true
	case strings.HasSuffix(path, "/v1/chat/completions"):
		return wire.OpenAI, true
	case strings.HasSuffix(path, "/v1/responses"):
		return wire.Responses, true
	}
	return 0, false
}

var (
	markerRe = regexp.MustCompile(`\[P(\d+)\]`)
	refRe    = regexp.MustCompile("ref `(t\\d+)`")
)

// position finds the prompt a request is in and how many tool results follow it.
func position(req *wire.Request) (promptN, done int) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != wire.RoleUser || hasResult(m) {
			continue
		}
		for _, b := range m.Blocks {
			if sm := markerRe.FindStringSubmatch(b.Text()); sm != nil {
				n, _ := strconv.Atoi(sm[1])
				for _, later := range req.Messages[i+1:] {
					for _, lb := range later.Blocks {
						if lb.Kind == wire.KindToolResult {
							done++
						}
					}
				}
				return n, done
			}
		}
	}
	return 0, 0
}

func hasResult(m *wire.Message) bool {
	for _, b := range m.Blocks {
		if b.Kind == wire.KindToolResult {
			return true
		}
	}
	return false
}

// respond is the upstreamfake.Responder.
func (m *model) respond(rec upstreamfake.Recorded) upstreamfake.Reply {
	req, reply, ok := m.parse(rec)
	if !ok {
		return reply
	}
	n, done := position(req)
	if n == 0 || n > len(plan) || len(req.Tools) == 0 {
		return upstreamfake.Reply{Text: "ok"} // a side request (title, summary, probe)
	}
	if done >= len(plan[n-1]) {
		rep := upstreamfake.Reply{Text: fmt.Sprintf("Finished P%d: the files look fine.", n)}
		if n == m.holdAt {
			rep.Hold = m.hold(rec)
		}
		return rep
	}
	s := plan[n-1][done]
	var thinking string
	if m.reasoning {
		thinking = fmt.Sprintf("P%d step %d: pick the next command.", n, done+1)
	}
	switch {
	case s.read != "":
		return upstreamfake.Reply{Thinking: thinking, ToolCalls: []upstreamfake.ToolCall{m.tools.read(filepath.Join(m.repo, s.read))}}
	case s.shell != "":
		return upstreamfake.Reply{Thinking: thinking, ToolCalls: []upstreamfake.ToolCall{m.tools.shell(s.shell)}}
	}
	refs := refRe.FindAllStringSubmatch(string(rec.Body), -1)
	if len(refs) == 0 {
		m.fail("P%d step %d: the request shows no ref to query", n, done+1)
		return upstreamfake.Reply{Text: "no refs"}
	}
	ref := refs[0][1]
	m.mu.Lock()
	m.queried = append(m.queried, ref)
	m.mu.Unlock()
	return upstreamfake.Reply{Thinking: thinking, ToolCalls: []upstreamfake.ToolCall{{Name: "context_tree_query", Input: `{"toolCallIds":["` + ref + `"]}`}}}
}

// hold returns a channel that pauses the reply after its first event until the tap saw that
// event (release), or 20 s passed (a relay that buffers the stream).
func (m *model) hold(rec upstreamfake.Recorded) <-chan struct{} {
	seq, _ := strconv.Atoi(rec.Header.Get(HeaderSeq))
	ch := make(chan struct{})
	m.mu.Lock()
	m.held[seq] = ch
	m.mu.Unlock()
	go func() {
		time.Sleep(20 * time.Second)
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.held[seq] == ch {
			delete(m.held, seq)
			close(ch)
		}
	}()
	return ch
}

// release is the tap's onFirst: the first bytes of seq's response arrived at the agent side.
func (m *model) release(seq int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch, ok := m.held[seq]; ok {
		delete(m.held, seq)
		m.released = true
		close(ch)
	}
}

// scratchRepo writes the files the plan reads: Go sources of about 16 KB, each with a marker
// line in its middle that no summary of its first and last lines shows.
func scratchRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"} {
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\n", name)
		for i := range 300 {
			if i == 150 {
				fmt.Fprintf(&b, "// %s\n", marker(name))
			}
			fmt.Fprintf(&b, "func %s%03d(x int) int { return x*%d + %d }\n", name, i, i+3, i*7)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".go"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// marker is the unique line in the middle of file name.
func marker(name string) string { return "MARKER-" + strings.ToUpper(name) + "-MIDDLE" }
