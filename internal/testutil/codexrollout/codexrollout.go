// Package codexrollout builds OpenAI Responses API request bodies from the Codex CLI rollouts
// of the shared corpus (codex_*.jsonl), for tests and benchmarks: a rollout's response_item
// records are the items Codex sends as "input", in order, and Codex sends one request before
// each model response (a maximal run of model-produced items).
package codexrollout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// Tools is a fixed tool list in Codex's shapes (the rollouts do not record tool schemas):
// flat function tools, the freeform apply_patch custom tool and the hosted web_search tool.
const Tools = `[{"type":"function","name":"exec_command","description":"Runs a command in a PTY.","strict":false,` +
	`"parameters":{"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"},"yield_time_ms":{"type":"number"},"max_output_tokens":{"type":"number"}},"required":["cmd"],"additionalProperties":false}},` +
	`{"type":"function","name":"write_stdin","description":"Writes characters to a running session.","strict":false,` +
	`"parameters":{"type":"object","properties":{"session_id":{"type":"number"},"chars":{"type":"string"}},"required":["session_id"],"additionalProperties":false}},` +
	`{"type":"function","name":"update_plan","description":"Updates the task plan.","strict":false,"parameters":{"type":"object","properties":{"plan":{"type":"array","items":{"type":"object"}}},"required":["plan"],"additionalProperties":false}},` +
	`{"type":"custom","name":"apply_patch","description":"Edits files with a patch.","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}},` +
	`{"type":"web_search","external_web_access":true}]`

// Rollout is one Codex session: its input items and where each request ends.
type Rollout struct {
	// Name is the corpus file name.
	Name string
	// Model, Instructions and SessionID are the session's model, base instructions and id.
	Model, Instructions, SessionID string
	// Items are the input items in order.
	Items []json.RawMessage
	// Ends holds, per request, how many leading items it sends (one request before each
	// model response).
	Ends []int
}

// Files returns the Codex rollouts of the corpus, skipping the test when it is absent.
func Files(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, p := range corpus.Files(tb) {
		if strings.HasPrefix(filepath.Base(p), "codex_") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		tb.Skip("no Codex rollouts in the corpus")
	}
	return out
}

// Load reads a rollout. When a rollout records no user message items (a trimmed file), the
// user's text is taken from its user_message events, in place.
func Load(path string) (*Rollout, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &Rollout{Name: filepath.Base(path), Model: "gpt-5.5"}
	var fromEvents []json.RawMessage // items with the user messages from events
	hasUser := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var line struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Name, err)
		}
		var p struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			ID      string `json:"id"`
			Model   string `json:"model"`
			Message string `json:"message"`
			Base    struct {
				Text string `json:"text"`
			} `json:"base_instructions"`
		}
		if err := json.Unmarshal(line.Payload, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Name, err)
		}
		switch line.Type {
		case "session_meta":
			r.SessionID, r.Instructions = p.ID, p.Base.Text
		case "turn_context":
			if p.Model != "" {
				r.Model = p.Model
			}
		case "response_item":
			item := append(json.RawMessage(nil), line.Payload...)
			r.Items = append(r.Items, item)
			fromEvents = append(fromEvents, item)
			hasUser = hasUser || p.Type == "message" && p.Role == "user"
		case "event_msg":
			if p.Type == "user_message" {
				text, _ := json.Marshal(p.Message)
				fromEvents = append(fromEvents, json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_text","text":`+string(text)+`}]}`))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !hasUser {
		r.Items = fromEvents
	}
	r.findEnds()
	return r, nil
}

// findEnds sets Ends from Items: a request before each run of model-produced items.
func (r *Rollout) findEnds() {
	r.Ends = nil
	prevModel := false
	for i, it := range r.Items {
		m := modelProduced(it)
		if m && !prevModel {
			r.Ends = append(r.Ends, i)
		}
		prevModel = m
	}
}

// Join returns one session made of the items of rs in order, with the first's model,
// instructions and id.
func Join(rs ...*Rollout) *Rollout {
	j := &Rollout{Name: "joined", Model: rs[0].Model, Instructions: rs[0].Instructions, SessionID: rs[0].SessionID}
	for _, r := range rs {
		j.Items = append(j.Items, r.Items...)
	}
	j.findEnds()
	return j
}

// Require loads a rollout, failing the test on error.
func Require(tb testing.TB, path string) *Rollout {
	tb.Helper()
	r, err := Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// modelProduced reports an item the model produced (one of a response's output items).
func modelProduced(item json.RawMessage) bool {
	var p struct {
		Type string `json:"type"`
		Role string `json:"role"`
	}
	_ = json.Unmarshal(item, &p)
	switch p.Type {
	case "message":
		return p.Role == "assistant"
	case "reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call":
		return true
	}
	return false
}

// Len returns the number of requests.
func (r *Rollout) Len() int { return len(r.Ends) }

// Request returns the body of request k as Codex sends it.
func (r *Rollout) Request(k int) []byte { return r.Body(r.Items[:r.Ends[k]]) }

// Final returns the body holding every item of the rollout.
func (r *Rollout) Final() []byte { return r.Body(r.Items) }

// Body returns a request body in Codex's member order with items as its input.
func (r *Rollout) Body(items []json.RawMessage) []byte {
	var b bytes.Buffer
	model, _ := json.Marshal(r.Model)
	instr, _ := json.Marshal(r.Instructions)
	key, _ := json.Marshal(r.SessionID)
	b.WriteString(`{"model":` + string(model) + `,"instructions":` + string(instr) + `,"input":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteString(`],"tools":` + Tools + `,"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":"none"},` +
		`"store":false,"stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":` + string(key) + `}`)
	return b.Bytes()
}

// ChatBody returns the same transcript as a Chat Completions request: the instructions as a
// system message, each run of model items as one assistant message (its text, and a
// tool_calls entry per call: a custom tool's freeform input as {"input": …}, a local shell
// action as its JSON), each output as a tool message; reasoning and hosted tool items,
// which Chat Completions has no place for, are left out.
func (r *Rollout) ChatBody(items []json.RawMessage) []byte {
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type msg struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCalls  []call  `json:"tool_calls,omitempty"`
		ToolCallID string  `json:"tool_call_id,omitempty"`
	}
	str := func(s string) *string { return &s }
	msgs := []msg{{Role: "system", Content: str(r.Instructions)}}
	var run *msg
	for _, raw := range items {
		var it struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
			Input     string          `json:"input"`
			CallID    string          `json:"call_id"`
			Action    json.RawMessage `json:"action"`
			Output    json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal(raw, &it)
		if !modelProduced(raw) {
			run = nil
		} else if run == nil {
			msgs = append(msgs, msg{Role: "assistant"})
			run = &msgs[len(msgs)-1]
		}
		addCall := func(name, args string) {
			c := call{ID: it.CallID, Type: "function"}
			c.Function.Name, c.Function.Arguments = name, args
			run.ToolCalls = append(run.ToolCalls, c)
		}
		switch it.Type {
		case "message", "":
			text := partsText(it.Content)
			if it.Role == "assistant" {
				if run.Content != nil {
					text = *run.Content + "\n" + text
				}
				run.Content = &text
				continue
			}
			msgs = append(msgs, msg{Role: it.Role, Content: &text})
		case "function_call":
			addCall(it.Name, it.Arguments)
		case "custom_tool_call":
			args, _ := json.Marshal(map[string]string{"input": it.Input})
			addCall(it.Name, string(args))
		case "local_shell_call":
			addCall("local_shell", string(it.Action))
		case "function_call_output", "custom_tool_call_output":
			text := partsText(it.Output)
			msgs = append(msgs, msg{Role: "tool", ToolCallID: it.CallID, Content: &text})
		}
	}
	for i := range msgs {
		if msgs[i].Role == "assistant" && msgs[i].Content == nil && len(msgs[i].ToolCalls) == 0 {
			msgs[i].Content = str("") // a run of reasoning or hosted calls only
		}
	}
	body, _ := json.Marshal(map[string]any{"model": r.Model, "messages": msgs, "stream": true})
	return body
}

// partsText returns a string value, or the "text" members of an array's parts joined with
// "\n".
func partsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n")
}
