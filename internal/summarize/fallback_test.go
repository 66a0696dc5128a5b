package summarize

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

type fbRig struct {
	primary, session *upstreamfake.Server
	fb               *Fallback
	now              time.Time
	mu               sync.Mutex
	events           []Event
}

func newFBRig(t *testing.T, idle time.Duration) *fbRig {
	t.Helper()
	r := &fbRig{primary: upstreamfake.Start(), session: upstreamfake.Start(), now: time.Unix(1_800_000_000, 0)}
	t.Cleanup(r.primary.Close)
	t.Cleanup(r.session.Close)
	l, err := NewLLM(LLMOptions{Endpoint: Endpoint{Format: wire.Anthropic, BaseURL: r.primary.URL, Model: "summ-model", APIKey: "k"},
		Thinking: ThinkingOff, IdleTimeout: idle, TotalTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.fb = NewFallback(l)
	r.fb.Control.Now = func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now }
	r.fb.OnEvent = func(e Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }
	return r
}

func (r *fbRig) advance(d time.Duration) { r.mu.Lock(); r.now = r.now.Add(d); r.mu.Unlock() }

func (r *fbRig) req() *Request {
	q := batchReq("b")
	q.Session = &Endpoint{Format: wire.OpenAI, BaseURL: r.session.URL + "/v1", Model: "session-model", APIKey: "client-key"}
	return q
}

func (r *fbRig) takeEvents() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

func (r *fbRig) counts() (int, int) { return len(r.primary.Requests()), len(r.session.Requests()) }

var overloaded = upstreamfake.Reply{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded"}

func TestFallbackEnterStickyProbeRecover(t *testing.T) {
	r := newFBRig(t, time.Second)
	ctx := context.Background()
	r.primary.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply { return overloaded })
	r.session.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Text: "- [[1:bash]] from session"}
	})

	// 1. primary fails, the session model rescues: one enter event.
	res, err := r.fb.Summarize(ctx, r.req())
	if err != nil || !res.Fallback || res.Text != "- [[1:bash]] from session" || res.Model != "openai/session-model" {
		t.Fatalf("res %+v err %v", res, err)
	}
	if ev := r.takeEvents(); len(ev) != 1 || ev[0].Kind != EventEnter || ev[0].Primary != "anthropic/summ-model" || ev[0].Fallback != "openai/session-model" {
		t.Fatalf("events %+v", ev)
	}
	if p, s := r.counts(); p != 1 || s != 1 {
		t.Fatalf("requests primary %d session %d", p, s)
	}
	// The fallback call carried the session's own credentials and the OpenAI shape.
	last, _ := r.session.Last()
	if last.Header.Get("Authorization") != "Bearer client-key" || last.Path != "/v1/chat/completions" {
		t.Fatalf("fallback request %s %v", last.Path, last.Header)
	}

	// 2. sticky: before the cooldown, requests go straight to the session model, silently.
	for i := 0; i < 3; i++ {
		r.advance(time.Minute)
		if res, err := r.fb.Summarize(ctx, r.req()); err != nil || !res.Fallback {
			t.Fatalf("res %+v err %v", res, err)
		}
	}
	if p, s := r.counts(); p != 1 || s != 4 {
		t.Fatalf("requests primary %d session %d", p, s)
	}
	if ev := r.takeEvents(); len(ev) != 0 {
		t.Fatalf("events %+v", ev)
	}

	// 3. after the cooldown, concurrent requests elect exactly one probe; it fails and is
	// rescued silently (still in fallback).
	r.advance(DefaultProbeCooldown)
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := r.fb.Summarize(ctx, r.req()); err != nil || !res.Fallback {
				t.Errorf("res %+v err %v", res, err)
			}
		}()
	}
	wg.Wait()
	if p, _ := r.counts(); p != 2 {
		t.Fatalf("primary probed %d times, want exactly once", p-1)
	}
	if ev := r.takeEvents(); len(ev) != 0 || !r.fb.Control.InFallback() {
		t.Fatalf("events %+v infallback %v", ev, r.fb.Control.InFallback())
	}

	// 4. primary healthy again: the next probe recovers.
	r.primary.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Text: "- [[1:bash]] from primary"}
	})
	r.advance(DefaultProbeCooldown)
	res, err = r.fb.Summarize(ctx, r.req())
	if err != nil || res.Fallback || res.Text != "- [[1:bash]] from primary" {
		t.Fatalf("res %+v err %v", res, err)
	}
	if ev := r.takeEvents(); len(ev) != 1 || ev[0].Kind != EventRecover || r.fb.Control.InFallback() {
		t.Fatalf("events %+v", ev)
	}
	_, s0 := r.counts()
	if _, err := r.fb.Summarize(ctx, r.req()); err != nil {
		t.Fatal(err)
	}
	if _, s := r.counts(); s != s0 {
		t.Fatal("after recovery the session model was called")
	}
}

func TestFallbackBothDownOwesWarning(t *testing.T) {
	r := newFBRig(t, time.Second)
	ctx := context.Background()
	r.primary.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply { return overloaded })
	r.session.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply {
		return upstreamfake.Reply{Status: 500, ErrorType: "server_error", ErrorMessage: "boom"}
	})
	_, err := r.fb.Summarize(ctx, r.req())
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTransient || e.Model != "openai/session-model" || e.Status != 500 {
		t.Fatalf("err %v", err)
	}
	if ev := r.takeEvents(); len(ev) != 0 || !r.fb.Control.InFallback() {
		t.Fatalf("both down: events %+v, want silent entry", ev)
	}
	// Fallback-only failures do not push out the next probe: 9 minutes later the session
	// model fails again, 1 minute after that the primary is probed.
	r.advance(9 * time.Minute)
	if _, err := r.fb.Summarize(ctx, r.req()); err == nil {
		t.Fatal("want failure")
	}
	p0, _ := r.counts()
	r.session.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply { return upstreamfake.Reply{Text: "- ok"} })
	r.advance(time.Minute)
	if res, err := r.fb.Summarize(ctx, r.req()); err != nil || !res.Fallback {
		t.Fatalf("res %+v err %v", res, err) // probe fails, session rescues
	}
	if p, _ := r.counts(); p != p0+1 {
		t.Fatalf("primary not probed after cooldown (%d→%d)", p0, p)
	}
	// The owed enter warning is emitted with that first fallback success, once.
	if ev := r.takeEvents(); len(ev) != 1 || ev[0].Kind != EventEnter {
		t.Fatalf("events %+v", ev)
	}
	if _, err := r.fb.Summarize(ctx, r.req()); err != nil {
		t.Fatal(err)
	}
	if ev := r.takeEvents(); len(ev) != 0 {
		t.Fatalf("events %+v", ev)
	}
}

func TestFallbackNonFailoverErrors(t *testing.T) {
	r := newFBRig(t, time.Second)
	ctx := context.Background()
	// Auth failures do not fail over.
	r.primary.Enqueue(upstreamfake.Reply{Status: 401, ErrorType: "authentication_error", ErrorMessage: "bad key"})
	if _, err := r.fb.Summarize(ctx, r.req()); !errors.Is(err, ErrAuth) {
		t.Fatalf("err %v", err)
	}
	// Unusable results do not fail over.
	r.primary.Enqueue(upstreamfake.Reply{Text: "   "})
	if _, err := r.fb.Summarize(ctx, r.req()); !errors.Is(err, ErrUnusable) {
		t.Fatalf("err %v", err)
	}
	if _, s := r.counts(); s != 0 || r.fb.Control.InFallback() {
		t.Fatalf("session model called %d times", s)
	}
	// Without a session endpoint there is a single attempt.
	r.primary.Enqueue(overloaded)
	if _, err := r.fb.Summarize(ctx, batchReq("b")); !errors.Is(err, ErrTransient) || r.fb.Control.InFallback() {
		t.Fatalf("err %v", err)
	}
	// A session endpoint equal to the primary is not a fallback.
	q := batchReq("b")
	q.Session = &Endpoint{Format: wire.Anthropic, BaseURL: r.primary.URL + "/", Model: "summ-model"}
	r.primary.Enqueue(overloaded)
	if _, err := r.fb.Summarize(ctx, q); !errors.Is(err, ErrTransient) || r.fb.Control.InFallback() {
		t.Fatalf("err %v", err)
	}
}

func TestFallbackUnusableProbeDoesNotRecover(t *testing.T) {
	r := newFBRig(t, time.Second)
	ctx := context.Background()
	r.primary.Enqueue(overloaded)
	r.session.SetResponder(func(upstreamfake.Recorded) upstreamfake.Reply { return upstreamfake.Reply{Text: "- fb"} })
	if _, err := r.fb.Summarize(ctx, r.req()); err != nil {
		t.Fatal(err)
	}
	r.advance(DefaultProbeCooldown)
	r.primary.Enqueue(upstreamfake.Reply{Text: ""})
	if _, err := r.fb.Summarize(ctx, r.req()); !errors.Is(err, ErrUnusable) {
		t.Fatalf("err %v", err)
	}
	if !r.fb.Control.InFallback() {
		t.Fatal("an unusable probe recovered")
	}
	r.fb.Control.Reset()
	if r.fb.Control.InFallback() {
		t.Fatal("reset")
	}
}

func TestFallbackRescuesIdleTimeout(t *testing.T) {
	r := newFBRig(t, 100*time.Millisecond)
	r.primary.Enqueue(upstreamfake.Reply{Text: "x", Delay: 400 * time.Millisecond})
	r.session.Enqueue(upstreamfake.Reply{Text: "- rescued"})
	res, err := r.fb.Summarize(context.Background(), r.req())
	if err != nil || res.Text != "- rescued" {
		t.Fatalf("res %+v err %v", res, err)
	}
	if ev := r.takeEvents(); len(ev) != 1 || ev[0].Kind != EventEnter {
		t.Fatalf("events %+v", ev)
	}
}

func TestSessionModelSummarizer(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	tmpl, _ := NewLLM(LLMOptions{Endpoint: Endpoint{Format: wire.Anthropic, BaseURL: "http://unused", Model: "x"}, Thinking: ThinkingLow})
	s := &SessionModel{Template: tmpl}
	// No session endpoint: extractive.
	res, err := s.Summarize(context.Background(), batchReq("b"))
	if err != nil || res.Model != ExtractiveModel {
		t.Fatalf("res %+v err %v", res, err)
	}
	q := batchReq("b")
	q.Session = &Endpoint{Format: wire.Anthropic, BaseURL: up.URL, Model: "claude-haiku-4-5", APIKey: "client"}
	up.Enqueue(upstreamfake.Reply{Text: "- [[1:bash]] s"})
	res, err = s.Summarize(context.Background(), q)
	if err != nil || res.Model != "anthropic/claude-haiku-4-5" {
		t.Fatalf("res %+v err %v", res, err)
	}
	last, _ := up.Last()
	if got := fmt.Sprint(last.Header.Get("x-api-key")); got != "client" {
		t.Fatalf("key %q", got)
	}
}

// TestFallbackOnRejectedRequest checks the failover of requests the provider rejects as
// invalid (HTTP 400/404/422): the session's own model is tried, since a rejection by the
// summarizer model (an unknown model id, a parameter or prompt size it does not take) says
// nothing of another model; the result is KindRejected only when the session model rejects
// the request too, and a transient failure of either stays transient (worth a retry).
func TestFallbackOnRejectedRequest(t *testing.T) {
	notFound := upstreamfake.Reply{Status: 404, ErrorType: "not_found_error", ErrorMessage: "model: summ-model"}
	invalid := upstreamfake.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "bad request"}
	rescue := upstreamfake.Reply{Text: "- [[1:bash]] from session"}
	for _, c := range []struct {
		name             string
		primary, session upstreamfake.Reply
		want             error // nil: rescued by the session model
	}{
		{"unknown summarizer model", notFound, rescue, nil},
		{"both rejected", invalid, invalid, ErrRejected},
		{"primary overloaded, session rejected", overloaded, invalid, ErrTransient},
		{"primary rejected, session overloaded", notFound, overloaded, ErrTransient},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newFBRig(t, time.Second)
			r.primary.Enqueue(c.primary)
			r.session.Enqueue(c.session)
			res, err := r.fb.Summarize(context.Background(), r.req())
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("err %v, want %v", err, c.want)
				}
				return
			}
			if err != nil || !res.Fallback || !r.fb.Control.InFallback() {
				t.Fatalf("res %+v err %v", res, err)
			}
			if ev := r.takeEvents(); len(ev) != 1 || ev[0].Kind != EventEnter {
				t.Fatalf("events %+v", ev)
			}
		})
	}
}

// TestFallbackToResponsesSessionModel: a request of a Responses session falls back, while the
// configured model fails, to the session's model in the Responses API, with the configured
// OpenAI key when the session endpoint carries none.
func TestFallbackToResponsesSessionModel(t *testing.T) {
	up := upstreamfake.Start()
	defer up.Close()
	primary := newLLM(t, wire.OpenAI, up.URL, ThinkingOff, time.Second, 5*time.Second)
	fb := NewFallback(primary)
	up.Enqueue(upstreamfake.Reply{Status: 500, ErrorType: "server_error", ErrorMessage: "down"},
		upstreamfake.Reply{Text: "- [[1:bash]] listed by the session model"})
	req := batchReq("b")
	req.Session = &Endpoint{Format: wire.Responses, BaseURL: up.URL + "/v1", Model: "gpt-5.2-codex"}
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
