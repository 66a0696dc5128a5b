package transcripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// msaMessage is one entry of a mini-SWE-agent trajectory's messages: a Chat Completions
// message (1.x; 2.x tool calling), a Responses API response object (2.x, "object":"response")
// or a Responses input item (2.x: "type" function_call_output or message).
type msaMessage struct {
	Role       string          `json:"role"`
	Type       string          `json:"type"`
	Object     string          `json:"object"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	CallID     string          `json:"call_id"`
	Output     json.RawMessage `json:"output"` // function_call_output: the text; response: its items
	Model      string          `json:"model"`
	CreatedAt  float64         `json:"created_at"`
	Usage      *responsesUsage `json:"usage"`
	Extra      *struct {
		Response *struct {
			Created float64 `json:"created"`
			Usage   *struct {
				PromptTokens        int64 `json:"prompt_tokens"`
				CompletionTokens    int64 `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		} `json:"response"`
		Actions       []json.RawMessage `json:"actions"`
		ReturnCode    *int              `json:"returncode"`
		InterruptType string            `json:"interrupt_type"`
	} `json:"extra"`

	text  string          // decoded content (Chat Completions messages)
	items []*codexPayload // decoded output items (response objects)
}

// responsesUsage is the usage object of a Responses API response.
type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

var (
	// msaActionRe finds a text action: 1.x ```bash blocks, 2.x text-based ```mswea_bash_command.
	msaActionRe = regexp.MustCompile("(?s)```(?:bash|mswea_bash_command)\\s*\\n(.*?)```")
	msaReturnRe = regexp.MustCompile(`<returncode>(-?\d+)</returncode>`)
)

// importMiniSWEAgent imports a mini-SWE-agent .traj.json, 1.x (plain text turns) or 2.x (Chat
// Completions tool calls or Responses items). Text turns are kept as sent; a text action counts
// as a tool call and its observation as a result, failed when <returncode> ≠ 0.
func importMiniSWEAgent(in *input, data []byte) (*Session, error) {
	name := in.name
	var doc struct {
		Info struct {
			Config struct {
				Model struct {
					ModelName string `json:"model_name"`
				} `json:"model"`
			} `json:"config"`
		} `json:"info"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, docError(name, data, err)
	}
	if len(doc.Messages) == 0 {
		return nil, &ParseError{File: name, Path: "messages", Err: ErrEmpty}
	}
	model := doc.Info.Config.Model.ModelName
	if model == "" {
		model = "mini-swe-agent-unknown-model"
	}
	b := newBuilder(FormatMiniSWEAgent, OpenAI, Anthropic, OpenAI)
	system := ""
	structured := false // the last model turn made structured tool calls (its results are items)
	for i, raw := range doc.Messages {
		m := &msaMessage{}
		if err := m.decode(name, data, raw, fmt.Sprintf("messages[%d]", i)); err != nil {
			if err := in.skip(err); err != nil {
				return nil, err
			}
			continue
		}
		if m.Extra != nil && m.Extra.InterruptType == "FormatError" {
			// 2.x records a response it could not parse only as this error message: the
			// request was sent, its response is not part of later requests.
			b.request(RequestPoint{Model: model, Line: i + 1, Dropped: true})
			b.s.Stats.DroppedResponses++
		}
		switch {
		case m.Object == "response":
			b.request(m.point(model, i))
			for _, it := range m.items {
				codexItem(b, it)
			}
			structured = true
		case m.Type == "function_call_output":
			out, _ := rawString(m.Output)
			b.add(msg{role: "user", parts: []part{{kind: pResult, id: m.CallID, text: out, isError: m.failed(out)}}})
		case m.Type == "message":
			codexItem(b, &codexPayload{Type: "message", Role: m.Role, Content: m.Content})
		case m.Role == "system" && system == "" && i == 0:
			system = m.text
		case m.Role == "system":
			b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: m.text}}})
		case m.Role == "assistant":
			b.request(m.point(model, i))
			calls := chatCalls(m.ToolCalls)
			structured = len(calls) > 0
			if !structured && (m.Extra != nil && len(m.Extra.Actions) > 0 || msaActionRe.MatchString(m.text)) {
				b.s.Stats.ToolCalls++ // a text action
				b.s.Observations = harnessMiniSWEAgent
			}
			if len(calls) == 0 {
				b.add(msg{role: "assistant", str: true, parts: []part{{kind: pText, text: m.text}}})
			} else {
				b.add(msg{role: "assistant", parts: append([]part{{kind: pText, text: m.text}}, calls...)})
			}
		case m.Role == "tool":
			b.add(msg{role: "user", parts: []part{{kind: pResult, id: m.ToolCallID, text: m.text, isError: m.failed(m.text)}}})
		case m.Role == "exit":
			// The agent's exit record (2.x): not sent to the model.
		default:
			if i > 1 && !structured { // the observation of a text action
				b.s.Stats.ToolResults++
				if m.failed(m.text) {
					b.s.Stats.FailedResults++
				}
			}
			b.add(msg{role: "user", str: true, parts: []part{{kind: pText, text: m.text}}})
		}
	}
	s := b.finish(system, 32000)
	if s.Len() == 0 {
		return nil, &ParseError{File: name, Err: ErrNoRequests}
	}
	return s, nil
}

// decode reads one message and its content, so that a bad message is skipped whole.
func (m *msaMessage) decode(name string, data, raw []byte, path string) error {
	perr := func(p string, err error) error {
		return &ParseError{File: name, Line: lineOfEntry(data, raw), Path: p, Err: err}
	}
	if err := json.Unmarshal(raw, m); err != nil {
		return perr(path, unwrapType(err))
	}
	switch {
	case m.Object == "response":
		var items []json.RawMessage
		if err := json.Unmarshal(m.Output, &items); err != nil && !isNull(m.Output) {
			return perr(path+".output", unwrapType(err))
		}
		for j, it := range items {
			p := &codexPayload{}
			ipath := fmt.Sprintf("%s.output[%d]", path, j)
			if err := json.Unmarshal(it, p); err != nil {
				return perr(ipath, unwrapType(err))
			}
			if err := codexCheck(name, lineOfEntry(data, raw), ipath, p); err != nil {
				return err
			}
			m.items = append(m.items, p)
		}
	case m.Type == "function_call_output":
		if _, ok := rawString(m.Output); !ok {
			return perr(path+".output", errors.New("function_call_output output is not a JSON string"))
		}
	case m.Type == "message":
		if err := codexCheck(name, lineOfEntry(data, raw), path, &codexPayload{Type: "message", Content: m.Content}); err != nil {
			return err
		}
	default:
		text, err := trajText(m.Content)
		if err != nil {
			return perr(path+".content", unwrapType(err))
		}
		m.text = text
	}
	return nil
}

// point is the request point of a model turn at messages[i]: time and usage from the recorded
// response (Chat Completions extra.response, or the Responses object itself).
func (m *msaMessage) point(model string, i int) RequestPoint {
	pt := RequestPoint{Model: model, Line: i + 1}
	created := m.CreatedAt
	if m.Extra != nil && m.Extra.Response != nil {
		r := m.Extra.Response
		created = r.Created
		if u := r.Usage; u != nil {
			cached := int64(0)
			if u.PromptTokensDetails != nil {
				cached = u.PromptTokensDetails.CachedTokens
			}
			pt.Usage = &Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens,
				CacheReadTokens: cached, CacheWriteTokens: -1}
		}
	}
	if u := m.Usage; u != nil && m.Object == "response" {
		cached := int64(0)
		if u.InputTokensDetails != nil {
			cached = u.InputTokensDetails.CachedTokens
		}
		pt.Usage = &Usage{InputTokens: u.InputTokens - cached, OutputTokens: u.OutputTokens,
			CacheReadTokens: cached, CacheWriteTokens: -1}
	}
	if created > 0 {
		pt.Time = time.Unix(int64(created), 0).UTC()
	}
	return pt
}

// failed reports whether an observation reports a failed command: extra.returncode ≠ 0, else
// <returncode>N</returncode> with N ≠ 0 in its text.
func (m *msaMessage) failed(text string) bool {
	if m.Extra != nil && m.Extra.ReturnCode != nil {
		return *m.Extra.ReturnCode != 0
	}
	if mm := msaReturnRe.FindStringSubmatch(text); mm != nil {
		n, _ := strconv.Atoi(mm[1])
		return n != 0
	}
	return false
}
