package pruner

import (
	"errors"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

func TestUnknownFieldsPassThrough(t *testing.T) {
	x := newTx(wire.Anthropic).user("a").turn("c1", "read", `{"path":"a"}`, big("A", 2000)).asst("", "ok")
	// unknown block type and unknown members on a kept and on a stubbed block
	x.msgs[2]["content"].([]any)[0].(map[string]any)["x_vendor"] = map[string]any{"k": 1}
	x.msgs = append(x.msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "x_future_block", "payload": []any{1, 2, 3}},
		map[string]any{"type": "text", "text": "next"},
	}})
	body := strings.Replace(string(x.body()), `"max_tokens":1024`, `"max_tokens":1024,"x_top":{"a":[1,2]},"metadata":{"user_id":"u"}`, 1)
	req, err := wire.Parse(wire.Anthropic, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	st := flush(t, req, NewState(), stubPolicy())
	res := Render(req, st, stubPolicy())
	if res.Unchanged || res.Stats.Stubbed != 1 {
		t.Fatalf("%+v", res.Stats)
	}
	out := string(res.Body)
	for _, s := range []string{`"x_top":{"a":[1,2]}`, `"metadata":{"user_id":"u"}`, `{"payload":[1,2,3],"type":"x_future_block"}`, `"x_vendor":{"k":1}`} {
		if !strings.Contains(out, s) {
			t.Fatalf("lost %s in %s", s, out)
		}
	}
}

func TestOrphanSweepMovesCacheMarker(t *testing.T) {
	nonEmpty := flush(t, newTx(wire.OpenAI).user("x").turn("z9", "read", `{}`, big("Q", 2000)).asst("", "ok").user("y").req(t), NewState(), stubPolicy())
	x := newTx(wire.Anthropic).user("a").asst("", "", tcall{"c1", "read", `{}`})
	x.msgs = append(x.msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "c1", "content": "x"},
		map[string]any{"type": "tool_result", "tool_use_id": "ghost", "content": "y", "cache_control": map[string]any{"type": "ephemeral"}},
	}})
	req := x.req(t)
	res := Render(req, nonEmpty, stubPolicy())
	if res.Stats.Swept != 1 || strings.Count(string(res.Body), "cache_control") != 1 || res.Stats.CacheMarkersMoved != 1 {
		t.Fatalf("%+v %s", res.Stats, res.Body)
	}
	if wire.Validate(res.Request) != nil {
		t.Fatal(wire.Validate(res.Request))
	}
}

func TestRenderBody(t *testing.T) {
	x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, big("A", 2000)).asst("", "ok").user("b")
	body := x.body()
	res, err := RenderBody(wire.OpenAI, body, NewState(), stubPolicy())
	if err != nil || !res.Unchanged || &res.Body[0] != &body[0] {
		t.Fatal("empty state must forward the body untouched")
	}
	st := flush(t, x.req(t), NewState(), stubPolicy())
	res, err = RenderBody(wire.OpenAI, body, st, stubPolicy())
	if err != nil || res.Unchanged || res.Stats.Stubbed != 1 {
		t.Fatal(err)
	}
	var se *wire.SyntaxError
	if _, err := RenderBody(wire.OpenAI, []byte(`{"messages":[`), st, stubPolicy()); !errors.As(err, &se) {
		t.Fatalf("want a syntax error, got %v", err)
	}
}
