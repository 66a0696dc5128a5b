package flush

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestQueueOnRedisCluster runs the queue and a worker against a real three-master Redis
// Cluster: the job keys share one hash tag, so the enqueue and retry scripts and the
// transactions are single-slot.
func TestQueueOnRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, prefix, err := RedisFromURL(c.URL() + "&prefix=cl")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if prefix != "cl" {
		t.Fatalf("prefix %q", prefix)
	}
	st, err := store.Open(ctx, c.URL()+"&prefix=cl")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	up := upstreamfake.Start()
	defer up.Close()
	up.Enqueue(upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}) // one retry
	up.SetResponder(labelResponder)
	l, err := summarize.NewLLM(summarize.LLMOptions{Endpoint: summarize.Endpoint{Format: wire.Anthropic, BaseURL: up.URL, Model: "m", APIKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	q := NewQueue(rdb, prefix)
	w := &Worker{Queue: q, Orch: &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: l, Log: quiet},
		Block: 50 * time.Millisecond, BackoffBase: 50 * time.Millisecond, Log: quiet}
	run(t, w)
	j := job("cluster-session", "c", 1)
	if _, err := q.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	st2 := waitState(t, q, j, 20*time.Second)
	if st2.State != StateDone || st2.Attempt != 1 || st2.Result.Version != 1 {
		t.Fatalf("status %+v", st2)
	}
	if dup, err := q.Enqueue(ctx, job("cluster-session", "c", 1)); err != nil || !dup {
		t.Fatalf("dup %v err %v", dup, err)
	}
}

func TestRedisFromURL(t *testing.T) {
	for _, bad := range []string{"memory:", "bolt:/tmp/x", "redis+mesh://h:1", "::"} {
		if _, _, err := RedisFromURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	rdb, prefix, err := RedisFromURL("redis://127.0.0.1:1/2?ttl=1h&prefix=p&dial_timeout=1s")
	if err != nil || prefix != "p" {
		t.Fatalf("prefix %q err %v", prefix, err)
	}
	rdb.Close()
}

func TestFromConfigSelection(t *testing.T) {
	cases := map[string]string{"": "summarize.Extractive", "extractive": "summarize.Extractive",
		"default": "*summarize.SessionModel", "claude-haiku-4-5": "*summarize.Fallback"}
	for model, want := range cases {
		cfg := config.Default()
		cfg.Summarizer.Model = model
		s, err := summarize.FromConfig(cfg, summarize.Options{})
		if err != nil {
			t.Fatalf("%q: %v", model, err)
		}
		if got := strings.TrimPrefix(typeName(s), "github.com/condense-dev/condense/internal/"); got != want {
			t.Errorf("%q: %s want %s", model, got, want)
		}
	}
	cfg := config.Default()
	cfg.Summarizer.Model = "m"
	cfg.Summarizer.APIKeyEnv = "CONDENSE_SURELY_UNSET_VARIABLE"
	if _, err := summarize.FromConfig(cfg, summarize.Options{}); !strings.Contains(err.Error(), "CONDENSE_SURELY_UNSET_VARIABLE") {
		t.Fatalf("err %v", err)
	}
}
