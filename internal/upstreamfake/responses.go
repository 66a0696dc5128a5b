package upstreamfake

import (
	"bytes"
	"fmt"
	"net/http"
	"time"
)

// responsesStatus returns a reply's Responses API status and incomplete_details: a Stop of
// "max_output_tokens" or "content_filter" makes the response incomplete for that reason.
func responsesStatus(rep Reply) (status, incomplete string) {
	switch rep.Stop {
	case "max_output_tokens", "content_filter":
		return "incomplete", fmt.Sprintf(`{"reason":%q}`, rep.Stop)
	}
	return "completed", "null"
}

// responsesUsage renders a reply's usage: input_tokens counts the cached tokens too, as the
// Responses API reports them.
func responsesUsage(u Usage) string {
	in := u.InputTokens + u.CacheReadTokens
	return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`,
		in, u.CacheReadTokens, u.OutputTokens, in+u.OutputTokens)
}

// responsesItems returns the output items of a reply in order: reasoning, message, calls.
// Each item is rendered whole (done) and as first announced (added).
type responsesItem struct {
	kind  string // "reasoning", "message", "function_call", "custom_tool_call"
	id    string
	text  string // reasoning summary, message text, call arguments or custom input
	call  ToolCall
	done  string
	added string
}

func (s *Server) responsesItems(rep Reply) []responsesItem {
	var items []responsesItem
	if rep.Thinking != "" {
		id := s.nextID("rs_")
		items = append(items, responsesItem{kind: "reasoning", id: id, text: rep.Thinking,
			added: fmt.Sprintf(`{"id":%s,"type":"reasoning","summary":[]}`, jsonString(id)),
			done: fmt.Sprintf(`{"id":%s,"type":"reasoning","summary":[{"type":"summary_text","text":%s}],"encrypted_content":%s}`,
				jsonString(id), jsonString(rep.Thinking), jsonString(signature(rep.Thinking)))})
	}
	if rep.Text != "" {
		id := s.nextID("msg_")
		items = append(items, responsesItem{kind: "message", id: id, text: rep.Text,
			added: fmt.Sprintf(`{"id":%s,"type":"message","status":"in_progress","content":[],"role":"assistant"}`, jsonString(id)),
			done: fmt.Sprintf(`{"id":%s,"type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":%s}],"role":"assistant"}`,
				jsonString(id), jsonString(rep.Text))})
	}
	for _, c := range rep.ToolCalls {
		if c.Custom {
			id := s.nextID("ctc_")
			items = append(items, responsesItem{kind: "custom_tool_call", id: id, text: c.Input, call: c,
				added: fmt.Sprintf(`{"id":%s,"type":"custom_tool_call","status":"in_progress","call_id":%s,"input":"","name":%s}`, jsonString(id), jsonString(c.ID), jsonString(c.Name)),
				done:  fmt.Sprintf(`{"id":%s,"type":"custom_tool_call","status":"completed","call_id":%s,"input":%s,"name":%s}`, jsonString(id), jsonString(c.ID), jsonString(c.Input), jsonString(c.Name))})
			continue
		}
		id := s.nextID("fc_")
		items = append(items, responsesItem{kind: "function_call", id: id, text: c.Input, call: c,
			added: fmt.Sprintf(`{"id":%s,"type":"function_call","status":"in_progress","arguments":"","call_id":%s,"name":%s}`, jsonString(id), jsonString(c.ID), jsonString(c.Name)),
			done:  fmt.Sprintf(`{"id":%s,"type":"function_call","status":"completed","arguments":%s,"call_id":%s,"name":%s}`, jsonString(id), jsonString(c.Input), jsonString(c.ID), jsonString(c.Name))})
	}
	return items
}

// responseObject renders the response object with the given status, output and usage
// (usage "null" while in progress).
func responseObject(id, model, status, incomplete string, created int64, output []string, usage string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%s,"object":"response","created_at":%d,"status":%q,"error":null,"incomplete_details":%s,"model":%s,"output":[`,
		jsonString(id), created, status, incomplete, jsonString(model))
	for i, o := range output {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(o)
	}
	fmt.Fprintf(&b, `],"parallel_tool_calls":true,"previous_response_id":null,"store":false,"tool_choice":"auto","tools":[],"usage":%s}`, usage)
	return b.String()
}

// ResponsesBody renders a Reply as a non-streaming Responses API response body.
func (s *Server) ResponsesBody(id, model string, rep Reply) []byte {
	var out []string
	for _, it := range s.responsesItems(rep) {
		out = append(out, it.done)
	}
	status, incomplete := responsesStatus(rep)
	return []byte(responseObject(id, model, status, incomplete, time.Now().Unix(), out, responsesUsage(rep.Usage)))
}

// streamResponses streams a Reply as Responses API events, each with its sequence_number.
func (s *Server) streamResponses(w http.ResponseWriter, model string, rep Reply, gen time.Duration) {
	e := newSSE(w, rep)
	seq := 0
	ev := func(typ, fields string) {
		e.event(typ, fmt.Sprintf(`{"type":%q,%s,"sequence_number":%d}`, typ, fields, seq))
		seq++
	}
	id, created := s.nextID("resp_"), time.Now().Unix()
	ev("response.created", `"response":`+responseObject(id, model, "in_progress", "null", created, nil, "null"))
	ev("response.in_progress", `"response":`+responseObject(id, model, "in_progress", "null", created, nil, "null"))
	items := s.responsesItems(rep)
	var out []string
	for i, it := range items {
		ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, i, it.added))
		at := fmt.Sprintf(`"item_id":%s,"output_index":%d`, jsonString(it.id), i)
		switch it.kind {
		case "reasoning":
			ev("response.reasoning_summary_part.added", at+`,"summary_index":0,"part":{"type":"summary_text","text":""}`)
			for _, p := range chunks(it.text) {
				ev("response.reasoning_summary_text.delta", at+`,"summary_index":0,"delta":`+jsonString(p))
			}
			ev("response.reasoning_summary_text.done", at+`,"summary_index":0,"text":`+jsonString(it.text))
			ev("response.reasoning_summary_part.done", at+`,"summary_index":0,"part":{"type":"summary_text","text":`+jsonString(it.text)+`}`)
		case "message":
			ev("response.content_part.added", at+`,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`)
			for _, p := range chunks(it.text) {
				ev("response.output_text.delta", at+`,"content_index":0,"delta":`+jsonString(p)+`,"logprobs":[]`)
			}
			ev("response.output_text.done", at+`,"content_index":0,"text":`+jsonString(it.text)+`,"logprobs":[]`)
			ev("response.content_part.done", at+`,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":`+jsonString(it.text)+`}`)
		case "function_call":
			for _, p := range chunks(it.text) {
				ev("response.function_call_arguments.delta", at+`,"delta":`+jsonString(p))
			}
			ev("response.function_call_arguments.done", at+`,"arguments":`+jsonString(it.text))
		case "custom_tool_call":
			for _, p := range chunks(it.text) {
				ev("response.custom_tool_call_input.delta", at+`,"delta":`+jsonString(p))
			}
			ev("response.custom_tool_call_input.done", at+`,"input":`+jsonString(it.text))
		}
		ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, i, it.done))
		out = append(out, it.done)
	}
	time.Sleep(gen)
	status, incomplete := responsesStatus(rep)
	final := "response.completed"
	if status == "incomplete" {
		final = "response.incomplete"
	}
	ev(final, `"response":`+responseObject(id, model, status, incomplete, created, out, responsesUsage(rep.Usage)))
}
