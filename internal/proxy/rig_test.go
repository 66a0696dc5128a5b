package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// rig is one proxy in front of the fake upstream, with a real store and an in-process
// flusher running the real engine and the extractive summarizer.
type rig struct {
	up    *upstreamfake.Server
	st    store.Store
	px    *Server
	http  *httptest.Server
	inpro *flush.InProcess
	// handlers counts the requests in the proxy's handler (see settle).
	handlers sync.WaitGroup
}

// settle waits until every request the proxy received has returned from its handler and the
// background work those handlers started (session counters, flush submits) has finished. A
// client has its response before the handler returns, so px.bg.Wait() alone could start
// before the handler registered that work (and race with its WaitGroup.Add).
func (r *rig) settle() {
	r.handlers.Wait()
	r.px.bg.Wait()
}

// settleFlush settles r and waits until the session's last flush has ended and the work its
// end started has finished.
func (r *rig) settleFlush(sid string) {
	r.handlers.Wait()
	settleFlush(r.px, sid)
	r.px.bg.Wait()
}

func testPolicy() pruner.Policy {
	p := pruner.DefaultPolicy()
	p.MinBatchChars = 100
	return p
}

func newRig(t *testing.T, up *upstreamfake.Server, st store.Store, mod func(*Options)) *rig {
	t.Helper()
	r := &rig{up: up, st: st}
	if r.up == nil {
		r.up = upstreamfake.Start()
		t.Cleanup(r.up.Close)
	}
	if r.st == nil {
		r.st = store.NewMemory(0)
		t.Cleanup(func() { _ = r.st.Close() })
	}
	r.inpro = &flush.InProcess{Orch: &flush.Orchestrator{Store: r.st, Planner: flush.EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	opt := Options{
		AnthropicBaseURL:  r.up.URL,
		OpenAIBaseURL:     r.up.URL + "/v1",
		Store:             r.st,
		Policy:            testPolicy(),
		Flusher:           r.inpro,
		FlushWaitTimeout:  10 * time.Second,
		MaxRecoveryRounds: 3,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if os.Getenv("CONDENSE_TEST_LOG") != "" {
		opt.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if mod != nil {
		mod(&opt)
	}
	px, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	r.px = px
	r.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.handlers.Add(1)
		defer r.handlers.Done()
		px.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		r.http.Close()
		_ = px.Close()
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.inpro.Close(c)
	})
	return r
}

func (r *rig) anthropic(session string, extra ...aoption.RequestOption) *anthropic.Client {
	opts := append([]aoption.RequestOption{aoption.WithBaseURL(r.http.URL), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0)}, extra...)
	if session != "" {
		opts = append(opts, aoption.WithHeader(HeaderSession, session))
	}
	c := anthropic.NewClient(opts...)
	return &c
}

func (r *rig) openai(session string, extra ...ooption.RequestOption) *openai.Client {
	opts := append([]ooption.RequestOption{ooption.WithBaseURL(r.http.URL + "/v1/"), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0)}, extra...)
	if session != "" {
		opts = append(opts, ooption.WithHeader(HeaderSession, session))
	}
	c := openai.NewClient(opts...)
	return &c
}

// bigOutput is a multi-line tool output large enough to be summarized.
func bigOutput(tag string, lines int) string {
	var b strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&b, "%s line %03d: some build output that the model read once and does not need verbatim again\n", tag, i)
	}
	return b.String()
}

var bashTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "bash", Description: anthropic.String("run a shell command"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"cmd": map[string]any{"type": "string"}}}}}

// oTools is the tool an OpenAI test agent offers (a request without tools is a side request).
var oTools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "bash",
	Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}})}

func aParams(msgs []anthropic.MessageParam) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-test", MaxTokens: 1024, System: []anthropic.TextBlockParam{{Text: "You are a coding agent."}},
		Tools: []anthropic.ToolUnionParam{bashTool}, Messages: msgs}
}

// aTurn sends one non-streaming or streaming Anthropic request and returns the message.
func aTurn(t *testing.T, c *anthropic.Client, msgs []anthropic.MessageParam, stream bool) *anthropic.Message {
	t.Helper()
	if !stream {
		m, err := c.Messages.New(context.Background(), aParams(msgs))
		if err != nil {
			t.Fatalf("messages.new: %v", err)
		}
		return m
	}
	st := c.Messages.NewStreaming(context.Background(), aParams(msgs))
	var m anthropic.Message
	for st.Next() {
		if err := m.Accumulate(st.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return &m
}

// oTurn sends one non-streaming or streaming OpenAI request and returns the completion (a
// streamed one accumulated as the SDK does).
func oTurn(t *testing.T, c *openai.Client, p openai.ChatCompletionNewParams, stream bool) openai.ChatCompletion {
	t.Helper()
	if !stream {
		cc, err := c.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatalf("chat.completions.new: %v", err)
		}
		return *cc
	}
	st := c.Chat.Completions.NewStreaming(context.Background(), p)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc.ChatCompletion
}

// lastModelRequest returns the last recorded request to a model endpoint, parsed and checked
// for provider validity.
func lastModelRequest(t *testing.T, up *upstreamfake.Server, f wire.Format) (upstreamfake.Recorded, *wire.Request) {
	t.Helper()
	reqs := up.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Format != upstreamfake.Other && !strings.HasSuffix(reqs[i].Path, "count_tokens") {
			return reqs[i], mustValid(t, f, reqs[i].Body)
		}
	}
	t.Fatal("no model request recorded")
	return upstreamfake.Recorded{}, nil
}

func mustValid(t *testing.T, f wire.Format, body []byte) *wire.Request {
	t.Helper()
	req, err := wire.Parse(f, body)
	if err != nil {
		t.Fatalf("upstream received an unparsable body: %v", err)
	}
	if err := wire.Validate(req); err != nil {
		t.Fatalf("upstream received an invalid request: %v\n%s", err, body)
	}
	return req
}

// messagesPrefix returns the raw messages array without its closing bracket.
func messagesPrefix(body []byte) string {
	raw := gjson.GetBytes(body, "messages").Raw
	return strings.TrimSuffix(strings.TrimSpace(raw), "]")
}
