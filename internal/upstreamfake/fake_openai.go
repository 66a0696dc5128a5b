package upstreamfake

import (
	"bytes"
	"fmt"
	"net/http"
	"time"
)

// finishReason returns the OpenAI finish_reason of a reply.
func finishReason(rep Reply) string { return stopReason(rep, "tool_calls", "stop") }

// OpenAICompletion renders a Reply as a non-streaming Chat Completions response body.
func OpenAICompletion(id, model string, rep Reply) []byte {
	var b bytes.Buffer
	content := "null"
	if rep.Text != "" {
		content = jsonString(rep.Text)
	}
	fmt.Fprintf(&b, `{"id":%s,"object":"chat.completion","created":%d,"model":%s,"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null`,
		jsonString(id), time.Now().Unix(), jsonString(model), content)
	finish := finishReason(rep)
	if len(rep.ToolCalls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, c := range rep.ToolCalls {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`, jsonString(c.ID), jsonString(c.Name), jsonString(c.Input))
		}
		b.WriteByte(']')
	}
	fmt.Fprintf(&b, `},"logprobs":null,"finish_reason":%q}],"usage":%s}`, finish, openAIUsage(rep.Usage))
	return b.Bytes()
}

func openAIUsage(u Usage) string {
	prompt := u.InputTokens + u.CacheReadTokens
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		prompt, u.OutputTokens, prompt+u.OutputTokens, u.CacheReadTokens)
}

func (s *Server) streamOpenAI(w http.ResponseWriter, model string, rep Reply, gen time.Duration, includeUsage bool) {
	e := newSSE(w, rep)
	id := s.nextID("chatcmpl-")
	created := time.Now().Unix()
	head := fmt.Sprintf(`{"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":[`, jsonString(id), created, jsonString(model))
	tail := `]}`
	if includeUsage {
		tail = `],"usage":null}`
	}
	e.event("", head+`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`+tail)
	for _, p := range chunks(rep.Text) {
		if p == "" {
			continue
		}
		e.event("", head+fmt.Sprintf(`{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":null}`, jsonString(p))+tail)
	}
	for i, c := range rep.ToolCalls {
		e.event("", head+fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]},"logprobs":null,"finish_reason":null}`, i, jsonString(c.ID), jsonString(c.Name))+tail)
		for _, p := range chunks(c.Input) {
			e.event("", head+fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null}`, i, jsonString(p))+tail)
		}
	}
	time.Sleep(gen)
	e.event("", head+fmt.Sprintf(`{"index":0,"delta":{},"logprobs":null,"finish_reason":%q}`, finishReason(rep))+tail)
	if includeUsage {
		e.event("", head+`],"usage":`+openAIUsage(rep.Usage)+`}`)
	}
	e.event("", "[DONE]")
}
