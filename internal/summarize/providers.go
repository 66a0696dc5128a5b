package summarize

import (
	"encoding/json"
)

// anthropicBody builds a streaming Messages API request: one user message, the optional
// system prompt, max_tokens = MaxOutputTokens (+ the thinking budget when thinking is on).
func (l *LLM) anthropicBody(req *Request) ([]byte, error) {
	type thinking struct {
		Type         string `json:"type"`
		BudgetTokens int64  `json:"budget_tokens,omitempty"`
	}
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	body := struct {
		Model     string    `json:"model"`
		MaxTokens int64     `json:"max_tokens"`
		Stream    bool      `json:"stream"`
		System    string    `json:"system,omitempty"`
		Messages  []msg     `json:"messages"`
		Thinking  *thinking `json:"thinking,omitempty"`
	}{
		Model:     l.opt.Endpoint.Model,
		MaxTokens: l.opt.MaxOutputTokens,
		Stream:    true,
		System:    req.System,
		Messages:  []msg{{Role: "user", Content: req.Prompt}},
	}
	switch l.opt.Thinking {
	case ThinkingDefault:
	case ThinkingOff:
		body.Thinking = &thinking{Type: "disabled"}
	default:
		b := anthropicBudget[l.opt.Thinking]
		body.Thinking = &thinking{Type: "enabled", BudgetTokens: b}
		body.MaxTokens += b
	}
	return json.Marshal(body)
}

// openAIBody builds a streaming Chat Completions request with usage in the final chunk.
// Thinking maps to reasoning_effort, except "off", which omits it: "none" is refused by every
// model before gpt-5.1 and the parameter itself by non-reasoning models (gpt-4o, gpt-4.1), so
// only an omitted effort is taken by all of them (gpt-5.1 and later then reason not at all,
// earlier reasoning models at their default). max_completion_tokens includes the same
// reasoning allowance as the Anthropic budget because reasoning tokens count against it.
func (l *LLM) openAIBody(req *Request) ([]byte, error) {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	body := struct {
		Model               string        `json:"model"`
		Messages            []msg         `json:"messages"`
		Stream              bool          `json:"stream"`
		StreamOptions       streamOptions `json:"stream_options"`
		MaxCompletionTokens int64         `json:"max_completion_tokens"`
		ReasoningEffort     string        `json:"reasoning_effort,omitempty"`
	}{
		Model:               l.opt.Endpoint.Model,
		Stream:              true,
		StreamOptions:       streamOptions{IncludeUsage: true},
		MaxCompletionTokens: l.opt.MaxOutputTokens,
	}
	if req.System != "" {
		body.Messages = append(body.Messages, msg{Role: "system", Content: req.System})
	}
	body.Messages = append(body.Messages, msg{Role: "user", Content: req.Prompt})
	switch l.opt.Thinking {
	case ThinkingDefault, ThinkingOff:
	default:
		body.ReasoningEffort = string(l.opt.Thinking)
		body.MaxCompletionTokens += anthropicBudget[l.opt.Thinking]
	}
	return json.Marshal(body)
}

// parseAnthropicEvent folds one Messages API stream event into sr. Text blocks are joined
// with "\n"; thinking blocks are ignored (they only keep the idle timer alive).
func parseAnthropicEvent(sr *streamResult, event string, data []byte) error {
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			Usage *anthropicUsage `json:"usage"`
		} `json:"message"`
		ContentBlock struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content_block"`
		Delta struct {
			Type       string `json:"type"`
			Text       string `json:"text"`
			StopReason string `json:"stop_reason"`
		} `json:"delta"`
		Usage *anthropicUsage `json:"usage"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return &protocolError{msg: "anthropic stream: bad JSON in " + event + " event: " + err.Error()}
	}
	if ev.Type == "" {
		ev.Type = event
	}
	switch ev.Type {
	case "message_start":
		if ev.Message.Usage != nil {
			ev.Message.Usage.into(&sr.usage)
		}
	case "content_block_start":
		if ev.ContentBlock.Type == "text" {
			if sr.text.Len() > 0 {
				sr.text.WriteByte('\n')
			}
			sr.text.WriteString(ev.ContentBlock.Text)
		}
	case "content_block_delta":
		if ev.Delta.Type == "text_delta" {
			sr.text.WriteString(ev.Delta.Text)
		}
	case "message_delta":
		if ev.Usage != nil {
			ev.Usage.into(&sr.usage)
		}
		switch ev.Delta.StopReason {
		case "":
		case "max_tokens":
			sr.stopReason = "length"
		default:
			sr.stopReason = "end"
		}
	case "error":
		sr.streamErr = ev.Error.Type + ": " + ev.Error.Message
	}
	return nil
}

// anthropicUsage is the usage object of message_start and message_delta; message_delta
// counts are cumulative, so present fields overwrite.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

func (a *anthropicUsage) into(u *Usage) {
	if a.InputTokens != nil {
		u.InputTokens = *a.InputTokens
	}
	if a.OutputTokens != nil {
		u.OutputTokens = *a.OutputTokens
	}
	if a.CacheCreationInputTokens != nil {
		u.CacheCreationTokens = *a.CacheCreationInputTokens
	}
	if a.CacheReadInputTokens != nil {
		u.CacheReadTokens = *a.CacheReadInputTokens
	}
}

// parseOpenAIChunk folds one chat.completion.chunk into sr. prompt_tokens includes cached
// tokens; they are moved to CacheReadTokens so each token is billed once.
func parseOpenAIChunk(sr *streamResult, data []byte) error {
	var ch struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content *string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &ch); err != nil {
		return &protocolError{msg: "openai stream: bad JSON chunk: " + err.Error()}
	}
	if ch.Error != nil {
		sr.streamErr = ch.Error.Type + ": " + ch.Error.Message
		return nil
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue
		}
		if c.Delta.Content != nil {
			sr.text.WriteString(*c.Delta.Content)
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			if *c.FinishReason == "length" {
				sr.stopReason = "length"
			} else {
				sr.stopReason = "end"
			}
		}
	}
	if ch.Usage != nil {
		cached := int64(0)
		if ch.Usage.PromptTokensDetails != nil {
			cached = ch.Usage.PromptTokensDetails.CachedTokens
		}
		sr.usage.InputTokens = ch.Usage.PromptTokens - cached
		sr.usage.CacheReadTokens = cached
		sr.usage.OutputTokens = ch.Usage.CompletionTokens
	}
	return nil
}
