package summarize

import (
	"context"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestFallbackToResponsesSessionModel: a request of a Responses session falls back, while the
// configured model fails, to the session's model in the Responses API, with the configured
// OpenAI key when the session endpoint carries none.
func TestFallbackToResponsesSessionModel(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	primary := newLLM(t, OpenAI, up.URL, ThinkingOff, time.Second, 5*time.Second)
	fb := NewFallback(primary)
	up.Enqueue(upstreamfake.Reply{Status: 500, ErrorType: "server_error", ErrorMessage: "down"},
		upstreamfake.Reply{Text: "- [[1:bash]] listed by the session model"})
	req := batchReq("b")
	req.Session = &Endpoint{Format: Responses, BaseURL: up.URL + "/v1", Model: "gpt-5.2-codex"}
	res, err := fb.Summarize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Fallback || res.Text != "- [[1:bash]] listed by the session model" || res.Model != "responses/gpt-5.2-codex" {
		t.Fatalf("result %+v", res)
	}
	r, _ := up.Last()
	if r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer sk-test" || gjson.GetBytes(r.Body, "model").String() != "gpt-5.2-codex" {
		t.Fatalf("fallback call %s %v %s", r.Path, r.Header, r.Body)
	}
}
