package flush

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// transcript builds an Anthropic Messages request: one user task, n tool turns with large
// results, a final text answer and the next user prompt.
func transcript(tag string, n int) []byte {
	msgs := []any{map[string]any{"role": "user", "content": "task " + tag}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("toolu_%s_%d", tag, i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "bash",
				"input": map[string]any{"command": fmt.Sprintf("step %d", i)}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
				"content": fmt.Sprintf("output %s %d\n", tag, i) + strings.Repeat("line of output\n", 200) + "error: something failed"}}})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "done " + tag}}},
		map[string]any{"role": "user", "content": "next"})
	b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": msgs})
	return b
}

// labelResponder answers summarizer calls with one labelled bullet per serialized call.
func labelResponder(r upstreamfake.Recorded) upstreamfake.Reply {
	prompt := gjson.GetBytes(r.Body, "messages.0.content").String()
	_, calls := summarize.ParseBatchPrompt(prompt)
	var lines []string
	for _, c := range calls {
		lines = append(lines, fmt.Sprintf("- [[%d:%s]] ran %s", c.Label, c.Tool, c.Tool))
	}
	if len(lines) == 0 {
		lines = []string{"- fused"}
	}
	return upstreamfake.Reply{Text: strings.Join(lines, "\n"), Usage: upstreamfake.Usage{InputTokens: 1000, OutputTokens: 20}}
}

type rig struct {
	t     *testing.T
	st    store.Store
	rdb   *redis.Client
	redis *redistest.Server
	up    *upstreamfake.Server
	llm   *summarize.LLM
	pol   pruner.Policy
}

func newRig(t *testing.T, backend string) *rig {
	t.Helper()
	r := &rig{t: t, up: upstreamfake.Start(), pol: testPolicy()}
	t.Cleanup(r.up.Close)
	r.up.SetResponder(labelResponder)
	ctx := context.Background()
	switch backend {
	case "memory":
		r.st = store.NewMemory(0)
	case "redis":
		r.redis = redistest.Start(t, nil)
		r.rdb = redis.NewClient(&redis.Options{Addr: r.redis.Addr})
		t.Cleanup(func() { r.rdb.Close() })
		s, err := store.NewRedisStore(ctx, redis.NewClient(&redis.Options{Addr: r.redis.Addr}), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		r.st = s
	default:
		t.Fatalf("backend %q", backend)
	}
	t.Cleanup(func() { r.st.Close() })
	l, err := summarize.NewLLM(summarize.LLMOptions{Endpoint: summarize.Endpoint{Format: wire.Anthropic, BaseURL: r.up.URL, Model: "claude-haiku-4-5", APIKey: "k"},
		Thinking: summarize.ThinkingOff, IdleTimeout: 5 * time.Second, TotalTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.llm = l
	return r
}

func (r *rig) orch(owner string, s summarize.Summarizer) *Orchestrator {
	if s == nil {
		s = r.llm
	}
	return &Orchestrator{Store: r.st, Planner: EnginePlanner{Policy: r.pol}, Summarizer: s, Owner: owner,
		LeaseTTL: 5 * time.Second, Parallelism: 4, Log: quiet}
}

func (r *rig) state(session string) (*pruner.State, uint64) {
	r.t.Helper()
	snap, err := r.st.Load(context.Background(), session)
	if err != nil {
		r.t.Fatal(err)
	}
	st := pruner.NewState()
	if err := st.UnmarshalBinary(snap.State); err != nil {
		r.t.Fatal(err)
	}
	return st, snap.Version
}

func (r *rig) stats(session string) map[string]int64 {
	snap, err := r.st.Load(context.Background(), session)
	if err != nil {
		r.t.Fatal(err)
	}
	return snap.Stats
}

func job(session, tag string, n int) *Job {
	return &Job{Queued: Queued{Session: session, Format: wire.Anthropic, Body: transcript(tag, n), Trigger: "agent-message"}}
}

func defaultConfigWithModel(model string) *config.Config {
	c := config.Default()
	c.Summarizer.Model = model
	return c
}

// testPolicy is the default policy without chain compression (predictable batch counts).
func testPolicy() pruner.Policy {
	p := pruner.DefaultPolicy()
	p.Chain.Enabled = false
	return p
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
