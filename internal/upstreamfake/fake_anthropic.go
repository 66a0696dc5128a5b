package upstreamfake

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"net/http"
	"time"
)

// anthropicStop returns the Anthropic stop_reason of a reply.
func anthropicStop(rep Reply) string { return stopReason(rep, "tool_use", "end_turn") }

// AnthropicMessage renders a Reply as a non-streaming Messages API response body.
func AnthropicMessage(id, model string, rep Reply) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%s,"type":"message","role":"assistant","model":%s,"content":[`, jsonString(id), jsonString(model))
	n := 0
	sep := func() {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
	}
	if rep.Thinking != "" {
		sep()
		fmt.Fprintf(&b, `{"type":"thinking","thinking":%s,"signature":%s}`, jsonString(rep.Thinking), jsonString(signature(rep.Thinking)))
	}
	if rep.Text != "" {
		sep()
		fmt.Fprintf(&b, `{"type":"text","text":%s}`, jsonString(rep.Text))
	}
	for _, c := range rep.ToolCalls {
		sep()
		fmt.Fprintf(&b, `{"type":"tool_use","id":%s,"name":%s,"input":%s}`, jsonString(c.ID), jsonString(c.Name), c.Input)
	}
	fmt.Fprintf(&b, `],"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d}}`,
		anthropicStop(rep), rep.Usage.InputTokens, rep.Usage.CacheCreationTokens, rep.Usage.CacheReadTokens, rep.Usage.OutputTokens)
	return b.Bytes()
}

func signature(s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	return fmt.Sprintf("fakesig%016x", h.Sum64())
}

func (s *Server) streamAnthropic(w http.ResponseWriter, model string, rep Reply, gen time.Duration) {
	e := newSSE(w, rep)
	e.event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":%s,"type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`,
		jsonString(s.nextID("msg_")), jsonString(model), rep.Usage.InputTokens, rep.Usage.CacheCreationTokens, rep.Usage.CacheReadTokens))
	idx := 0
	if rep.Thinking != "" {
		e.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, idx))
		for _, p := range chunks(rep.Thinking) {
			e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, idx, jsonString(p)))
		}
		e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%s}}`, idx, jsonString(signature(rep.Thinking))))
		e.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx))
		idx++
	}
	e.event("ping", `{"type": "ping"}`)
	if rep.Text != "" {
		e.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, idx))
		for _, p := range chunks(rep.Text) {
			e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, idx, jsonString(p)))
		}
		e.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx))
		idx++
	}
	for _, c := range rep.ToolCalls {
		e.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`, idx, jsonString(c.ID), jsonString(c.Name)))
		for _, p := range chunks(c.Input) {
			e.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, idx, jsonString(p)))
		}
		e.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, idx))
		idx++
	}
	time.Sleep(gen)
	e.event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, anthropicStop(rep), rep.Usage.OutputTokens))
	e.event("message_stop", `{"type":"message_stop"}`)
}
