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

// openAIBody builds a streaming Chat Completions request with usage in the final chunk:
// Thinking maps to reasoning_effort ("off" omits it, docs/summarizer.md), and
// max_completion_tokens includes the same reasoning allowance as the Anthropic budget.
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

// responsesBody builds a streaming Responses API request: the prompt as input, the system
// prompt as instructions, nothing stored; thinking maps to reasoning.effort and the token
// allowance as openAIBody's (max_output_tokens counts reasoning tokens too).
func (l *LLM) responsesBody(req *Request) ([]byte, error) {
	type reasoning struct {
		Effort string `json:"effort"`
	}
	body := struct {
		Model           string     `json:"model"`
		Instructions    string     `json:"instructions,omitempty"`
		Input           string     `json:"input"`
		Stream          bool       `json:"stream"`
		Store           bool       `json:"store"`
		MaxOutputTokens int64      `json:"max_output_tokens"`
		Reasoning       *reasoning `json:"reasoning,omitempty"`
	}{
		Model:           l.opt.Endpoint.Model,
		Instructions:    req.System,
		Input:           req.Prompt,
		Stream:          true,
		MaxOutputTokens: l.opt.MaxOutputTokens,
	}
	switch l.opt.Thinking {
	case ThinkingDefault, ThinkingOff:
	default:
		body.Reasoning = &reasoning{Effort: string(l.opt.Thinking)}
		body.MaxOutputTokens += anthropicBudget[l.opt.Thinking]
	}
	return json.Marshal(body)
}

// parseResponsesEvent folds one Responses API stream event into sr: output_text deltas join
// into the text ("\n" between parts); the terminal event sets the stop reason ("length" for
// max_output_tokens) and the usage, cached tokens moved to CacheReadTokens.
func parseResponsesEvent(sr *streamResult, event string, data []byte) error {
	var ev struct {
		Type    string `json:"type"`
		Delta   string `json:"delta"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Part    struct {
			Type string `json:"type"`
		} `json:"part"`
		Response struct {
			Status            string `json:"status"`
			IncompleteDetails *struct {
				Reason string `json:"reason"`
			} `json:"incomplete_details"`
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Usage *struct {
				InputTokens        int64 `json:"input_tokens"`
				OutputTokens       int64 `json:"output_tokens"`
				InputTokensDetails *struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"input_tokens_details"`
			} `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return &protocolError{msg: "responses stream: bad JSON in " + event + " event: " + err.Error()}
	}
	if ev.Type == "" {
		ev.Type = event
	}
	switch ev.Type {
	case "response.content_part.added":
		if ev.Part.Type == "output_text" && sr.text.Len() > 0 {
			sr.text.WriteByte('\n')
		}
	case "response.output_text.delta":
		sr.text.WriteString(ev.Delta)
	case "response.completed", "response.incomplete":
		sr.stopReason = "end"
		if d := ev.Response.IncompleteDetails; ev.Type == "response.incomplete" && d != nil && d.Reason == "max_output_tokens" {
			sr.stopReason = "length"
		}
		if u := ev.Response.Usage; u != nil {
			cached := int64(0)
			if u.InputTokensDetails != nil {
				cached = u.InputTokensDetails.CachedTokens
			}
			sr.usage.InputTokens, sr.usage.CacheReadTokens, sr.usage.OutputTokens = u.InputTokens-cached, cached, u.OutputTokens
		}
	case "response.failed":
		sr.streamErr = "response failed"
		if e := ev.Response.Error; e != nil {
			sr.streamErr = e.Code + ": " + e.Message
		}
	case "error":
		sr.streamErr = ev.Code + ": " + ev.Message
	}
	return nil
}
