package upstreamfake

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

// openAIParamRejection reports the 400 Chat Completions answers for a reasoning_effort the model
// does not take: gpt-3.5, gpt-4*, chatgpt-* and gpt-5-chat* reject the parameter, the o-series
// and gpt-5 before gpt-5.1 reject "none"; other names accept every value.
func openAIParamRejection(body []byte) (msg, param, code string, bad bool) {
	effort := gjson.GetBytes(body, "reasoning_effort")
	if !effort.Exists() {
		return "", "", "", false
	}
	model := gjson.GetBytes(body, "model").String()
	has := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(model, p) {
				return true
			}
		}
		return false
	}
	switch {
	case has("gpt-3.5", "gpt-4", "chatgpt-", "gpt-5-chat"):
		return "Unsupported parameter: 'reasoning_effort' is not supported with this model.", "reasoning_effort", "unsupported_parameter", true
	case effort.String() == "none" && has("o1", "o3", "o4", "gpt-5") && !has("gpt-5."):
		return "Unsupported value: 'reasoning_effort' does not support 'none' with this model. Supported values are: 'minimal', 'low', 'medium', and 'high'.",
			"reasoning_effort", "unsupported_value", true
	}
	return "", "", "", false
}

// cutWriter passes on the first left bytes of a response body, then flushes them and drops
// the connection (Reply.Cut) — with stall set, only once stall is closed (Reply.Stall).
type cutWriter struct {
	http.ResponseWriter
	left  int
	stall <-chan struct{}
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if len(p) < c.left {
		c.left -= len(p)
		return c.ResponseWriter.Write(p)
	}
	_, _ = c.ResponseWriter.Write(p[:c.left])
	c.Flush()
	if c.stall != nil {
		<-c.stall
	}
	panic(http.ErrAbortHandler) // net/http closes the connection without the response's end
}

// Flush sends what was written so far.
func (c *cutWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) writeError(w http.ResponseWriter, f wire.Format, rep Reply) {
	typ := rep.ErrorType
	if typ == "" {
		typ = "api_error"
	}
	if f == wire.OpenAI || f == wire.Responses {
		writeJSON(w, rep.Status, fmt.Sprintf(`{"error":{"message":%s,"type":%s,"param":null,"code":null}}`, jsonString(rep.ErrorMessage), jsonString(typ)))
		return
	}
	writeJSON(w, rep.Status, fmt.Sprintf(`{"type":"error","error":{"type":%s,"message":%s},"request_id":%s}`, jsonString(typ), jsonString(rep.ErrorMessage), jsonString(s.nextID("req_"))))
}
