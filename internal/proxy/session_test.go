package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// sessionID is identify's session id and source.
func sessionID(f wire.Format, h http.Header, body []byte) (string, SessionSource) {
	id := identify(f, h, body)
	return id.sid, id.src
}

// TestBodyFieldsAreANamespace: Anthropic metadata.user_id and OpenAI user / prompt_cache_key
// name an end user (or a shared prompt), not a conversation: two conversations of one user
// get different sessions, two users with the same system prompt and first message too, and
// one conversation keeps its session as it grows. The header names a session exactly.
func TestBodyFieldsAreANamespace(t *testing.T) {
	h := http.Header{}
	conv := func(field, first string, more ...string) []byte {
		msgs := `{"role":"user","content":"` + first + `"}`
		for _, m := range more {
			msgs += `,` + m
		}
		return []byte(`{` + field + `"system":"sys","messages":[` + msgs + `]}`)
	}
	done, thanks := `{"role":"assistant","content":"done"}`, `{"role":"user","content":"thanks"}`
	a1, src := sessionID(wire.Anthropic, h, conv(`"metadata":{"user_id":"u1"},`, "fix the build", done, thanks))
	a2, _ := sessionID(wire.Anthropic, h, conv(`"metadata":{"user_id":"u1"},`, "fix the build", done, thanks, `{"role":"assistant","content":"np"}`, `{"role":"user","content":"more"}`))
	b1, _ := sessionID(wire.Anthropic, h, conv(`"metadata":{"user_id":"u1"},`, "write the docs", done, thanks))
	c1, _ := sessionID(wire.Anthropic, h, conv(`"metadata":{"user_id":"u2"},`, "fix the build", done, thanks))
	if src != SourceMetadata || a1 != a2 || a1 == b1 || a1 == c1 || !strings.HasPrefix(a1, "u1:") || store.ValidateSessionID(a1) != nil {
		t.Fatalf("anthropic: %s (%s) %s %s %s", a1, src, a2, b1, c1)
	}
	oconv := func(field, first string) []byte {
		return []byte(`{` + field + `"messages":[{"role":"system","content":"sys"},{"role":"user","content":"` + first + `"}]}`)
	}
	for _, field := range []string{`"user":"u",`, `"prompt_cache_key":"pk",`} {
		x, src := sessionID(wire.OpenAI, h, oconv(field, "fix the build"))
		y, _ := sessionID(wire.OpenAI, h, oconv(field, "write the docs"))
		if x == y || src == SourceDerived || store.ValidateSessionID(x) != nil {
			t.Fatalf("openai %s: %s (%s) %s", field, x, src, y)
		}
	}
	if x, _ := sessionID(wire.OpenAI, h, oconv(`"user":"u","prompt_cache_key":"pk",`, "go")); !strings.HasPrefix(x, "pk:") {
		t.Fatalf("prompt_cache_key is the namespace before user: %s", x)
	}
	h.Set(HeaderSession, "exact")
	if id, src := sessionID(wire.Anthropic, h, conv(`"metadata":{"user_id":"u1"},`, "fix the build")); id != "exact" || src != SourceHeader {
		t.Fatal(id, src)
	}
}

// TestOneUserTwoConversations: two conversations of one user (same metadata.user_id, no
// header) keep apart — the hidden exchange of one is still re-inserted after the other stored
// its own.
func TestOneUserTwoConversations(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	c := r.anthropic("", aoption.WithJSONSet("metadata.user_id", "alice"))
	start := func(first string) []anthropic.MessageParam {
		r.up.Enqueue(upstreamfake.Reply{Text: "Let me look.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_" + first[:4], Name: "bash", Input: `{"cmd":"cat"}`}}},
			upstreamfake.Reply{Text: "Read it."})
		msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(first))}
		m := aTurn(t, c, msgs, false)
		msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_"+first[:4], bigOutput(first[:4], 60), false)))
		m = aTurn(t, c, msgs, false)
		return append(msgs, m.ToParam())
	}
	// A query mixed with a client call: the query is hidden and its exchange stored.
	hide := func(msgs []anthropic.MessageParam, id string) []anthropic.MessageParam {
		r.up.Enqueue(upstreamfake.Reply{Text: "Checking.", ToolCalls: []upstreamfake.ToolCall{{ID: "toolu_own" + id, Name: "bash", Input: `{"cmd":"ls"}`},
			{ID: "toolu_q" + id, Name: pruner.QueryToolName, Input: `{"toolCallIds":["t1"]}`}}})
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock("and now?")))
		m := aTurn(t, c, msgs, false)
		return append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_own"+id, "x", false)))
	}
	a := hide(start("alpha conversation"), "a")
	hide(start("bravo conversation"), "b")
	r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
	aTurn(t, c, a, false)
	if rec, _ := lastModelRequest(t, r.up, wire.Anthropic); !strings.Contains(string(rec.Body), "toolu_qa") {
		t.Fatalf("conversation alpha lost its hidden exchange to conversation bravo: %s", rec.Body)
	}
	sessions, err := r.st.List(context.Background())
	if err != nil || len(sessions) != 2 {
		t.Fatalf("%d sessions, want 2: %v", len(sessions), err)
	}
}

// TestLastValueStatsAreSet: the session counters that hold a last value (message count, token
// estimate, request time, context requests) are set, not incremented from the snapshot the
// request loaded: two concurrent requests of one session leave one of their values, not the
// sum of both.
func TestLastValueStatsAreSet(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	c := r.anthropic("last-values")
	hold := make(chan struct{})
	r.up.Enqueue(upstreamfake.Reply{Text: "one", Hold: hold}, upstreamfake.Reply{Text: "two", Hold: hold})
	short := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	long := append(short, anthropic.NewAssistantMessage(anthropic.NewTextBlock("hello")), anthropic.NewUserMessage(anthropic.NewTextBlock("again")))
	done := make(chan struct{}, 2)
	for _, msgs := range [][]anthropic.MessageParam{short, long} {
		go func() {
			defer func() { done <- struct{}{} }()
			aTurn(t, c, msgs, true)
		}()
	}
	for len(r.up.Requests()) < 2 { // both loaded the same (empty) snapshot and went upstream
		time.Sleep(5 * time.Millisecond)
	}
	close(hold)
	<-done
	<-done
	r.settle() // the stats are written in the background
	snap, err := r.st.Load(context.Background(), "last-values")
	if err != nil {
		t.Fatal(err)
	}
	st := snap.Stats
	if n := st[statLastMessages]; n != 1 && n != 3 {
		t.Fatalf("%s = %d, want 1 or 3 (the last request's)", statLastMessages, n)
	}
	if n := st[statContextReqs]; n != 2 {
		t.Fatalf("%s = %d, want 2 (two requests of one context, neither lost)", statContextReqs, n)
	}
	if ms := st[statLastRequestMs]; ms > time.Now().UnixMilli() || ms < time.Now().Add(-time.Hour).UnixMilli() {
		t.Fatalf("%s = %d is not a time of this test", statLastRequestMs, ms)
	}
	if st[store.StatRequests] != 2 {
		t.Fatalf("requests = %d, want 2", st[store.StatRequests])
	}
}

// statsWriteCounter counts the store writes that carry a request's counters.
type statsWriteCounter struct {
	store.Store
	writes atomic.Int64
}

func (c *statsWriteCounter) count(ms ...map[string]int64) {
	for _, m := range ms {
		if _, ok := m[store.StatRequests]; ok {
			c.writes.Add(1)
			return
		}
		if _, ok := m[statLastTokens]; ok {
			c.writes.Add(1)
			return
		}
	}
}

func (c *statsWriteCounter) IncrStats(ctx context.Context, session string, delta map[string]int64) error {
	c.count(delta)
	return c.Store.IncrStats(ctx, session, delta)
}

func (c *statsWriteCounter) UpdateStats(ctx context.Context, session string, u store.StatsUpdate) error {
	c.count(u.Incr, u.Set, u.Max)
	return c.Store.UpdateStats(ctx, session, u)
}

// TestRequestStatsAreOneWrite: a request's counters are one store write; a request recorded
// after a later one never moves proxyLastRequestMs back; the context's request count adds up
// concurrent requests and starts over at 1 when the message count drops.
func TestRequestStatsAreOneWrite(t *testing.T) {
	cs := &statsWriteCounter{Store: store.NewMemory(0)}
	t.Cleanup(func() { _ = cs.Close() })
	r := newRig(t, nil, cs, func(o *Options) { o.Trigger = Trigger{OnDemand: true} })
	c := r.anthropic("one-write")
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	for i := 0; i < 3; i++ {
		r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
		m := aTurn(t, c, msgs, i == 1)
		msgs = append(msgs, m.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("more")))
	}
	storedRequests(t, r.st, "one-write", 3)
	r.settle()
	if n := cs.writes.Load(); n != 3 {
		t.Fatalf("3 requests made %d counter writes; want 3", n)
	}
	ctx := context.Background()
	snap, _ := r.st.Load(ctx, "one-write")
	if snap.Stats[statContextReqs] != 3 {
		t.Fatalf("%s = %d; want 3", statContextReqs, snap.Stats[statContextReqs])
	}
	body, _ := aParams(msgs[:1]).MarshalJSON()
	req, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	late := time.UnixMilli(snap.Stats[statLastRequestMs]).Add(time.Minute)
	for _, at := range []time.Time{late, late.Add(-30 * time.Second)} { // recorded out of order
		tn := &turn{f: wire.Anthropic, ep: epMessages, sid: "one-write", log: r.px.log, hdr: http.Header{},
			client: req, view: req, fwd: req, body: wire.Segments{req.Raw()}, snap: snap, at: at}
		r.px.storeStats(ctx, tn, r.px.sessionStats(tn, usage{}))
	}
	snap, _ = r.st.Load(ctx, "one-write")
	if got := snap.Stats[statLastRequestMs]; got != late.UnixMilli() {
		t.Fatalf("%s = %d; want the later request's %d", statLastRequestMs, got, late.UnixMilli())
	}
	if snap.Stats[statContextReqs] != 1 { // one message, fewer than the 5 before: starts over
		t.Fatalf("%s = %d after a compaction; want 1", statContextReqs, snap.Stats[statContextReqs])
	}
}

// TestTokenNamesItsSession: with session auth, a request whose session comes from a body
// field (metadata.user_id, OpenAI user) and whose token was issued for the bare value is the
// session of that exact id; without a token or with another session's token it is refused.
func TestTokenNamesItsSession(t *testing.T) {
	secret := []byte("policy-secret")
	r := newRig(t, nil, nil, func(o *Options) { o.SessionSecret = secret; o.Trigger = Trigger{OnDemand: true} })
	for _, tc := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"m","max_tokens":5,"metadata":{"user_id":"agent-7"},"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"gpt-4o","user":"agent-8","messages":[{"role":"user","content":"hi"}]}`},
	} {
		bare := gjson.Get(tc.body, "metadata.user_id").Str + gjson.Get(tc.body, "user").Str
		for _, tok := range []string{"", config.SessionToken(secret, "someone-else")} {
			resp, b := post(t, r.http.URL+tc.path, tc.body, map[string]string{HeaderToken: tok})
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s token %q: %d %s", bare, tok, resp.StatusCode, b)
			}
		}
		r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
		resp, b := post(t, r.http.URL+tc.path, tc.body, map[string]string{HeaderToken: config.SessionToken(secret, bare)})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s with its token: %d %s", bare, resp.StatusCode, b)
		}
		if snap := storedRequests(t, r.st, bare, 1); snap.Stats[store.StatRequests] != 1 {
			t.Fatalf("session %s: %v", bare, snap.Stats)
		}
	}
}

// storedRequests waits until the session's counters show n requests and returns its
// snapshot: a request's counters are written in the background once its handler returned,
// which can be after the client read the whole response.
func storedRequests(t *testing.T, st store.Store, sid string, n int64) *store.Snapshot {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := st.Load(context.Background(), sid)
		if err == nil && snap.Stats[store.StatRequests] >= n {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: %d requests never recorded (%v, %v)", sid, n, snap, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sessionFieldSeeds are bodies whose session fields differ in kind and placement.
var sessionFieldSeeds = []string{
	`{"system":"sys","messages":[{"role":"user","content":"go"}],"metadata":{"user_id":"u1"}}`,
	`{"messages":[{"role":"system","content":"s"},{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":[{"type":"text","text":"go"}]}],"user":"u","prompt_cache_key":"k"}`,
	`{"metadata":{"user_id":"a"},"metadata":{"user_id":"b"},"messages":[]}`,
	`{"\u0073ystem":[{"type":"text","text":"esc"}],"messages":[{"role":"assistant","content":"x"},{"role":"user","content":"y"}]}`,
	`{"system":"s","messages":[{"role":"user","content":"unterminated`,
	"{\"system\":\"\xff\",\"messages\":[]}",
	`[]`, ``, `{"user":7,"prompt_cache_key":"k"}`,
}

// identifyLenient is identify reading the body with gjson alone, as before wire.TopLevel: the
// reference the scanner's reading must match.
func identifyLenient(f wire.Format, body []byte) identity {
	return identifyBody(f, readBodyFieldsLenient(body))
}

// TestSessionFieldsScannerMatchesGjson: reading the session's members with the wire scanner
// gives the session ids, sources and namespaces gjson's reading of the whole body gave, for
// both formats, on the seeds and on large tool-using bodies with the members after messages.
func TestSessionFieldsScannerMatchesGjson(t *testing.T) {
	bodies := append([]string(nil), sessionFieldSeeds...)
	big := string(benchBody(20, 100))
	bodies = append(bodies, big, big[:len(big)-1]+`,"metadata":{"user_id":"late"},"user":"u2"}`)
	for _, b := range bodies {
		if _, err := wire.TopLevel([]byte(b), bodyFieldNames...); json.Valid([]byte(b)) && utf8.ValidString(b) && strings.HasPrefix(b, "{") && err != nil {
			t.Errorf("%.80q: the scanner refused a valid object (%v), so the gjson fallback read it", b, err)
		}
		for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI, wire.Responses} {
			if id, want := identify(f, http.Header{}, []byte(b)), identifyLenient(f, []byte(b)); id != want {
				t.Errorf("%s %.80q: %+v, want %+v", f, b, id, want)
			}
		}
	}
}

// FuzzSessionFields checks the scanner's reading of the session's members against gjson's on
// arbitrary bodies, valid or not.
func FuzzSessionFields(f *testing.F) {
	for _, s := range sessionFieldSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, fm := range []wire.Format{wire.Anthropic, wire.OpenAI, wire.Responses} {
			if id, want := identify(fm, http.Header{}, body), identifyLenient(fm, body); id != want {
				t.Fatalf("%s: %+v, want %+v", fm, id, want)
			}
		}
	})
}

// BenchmarkSessionIDFromBody is the session id of a request without X-Condense-Session: an
// 812 KB body whose metadata follows its messages, as the SDKs order them.
func BenchmarkSessionIDFromBody(b *testing.B) {
	body := benchBody(60, 150)
	body = append(body[:len(body)-1:len(body)-1], `,"metadata":{"user_id":"user-1"}}`...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if id, src := sessionID(wire.Anthropic, http.Header{}, body); src != SourceMetadata || id == "" {
			b.Fatal(id, src)
		}
	}
}

func TestSessionTokens(t *testing.T) {
	secret := []byte("policy-secret")
	r := newRig(t, nil, nil, func(o *Options) { o.SessionSecret = secret })
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	_, err := r.anthropic("alice").Messages.New(context.Background(), aParams(msgs))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.RawJSON(), "authentication_error") {
		t.Fatalf("no token: %v", err)
	}
	_, err = r.anthropic("alice", aoption.WithHeader(HeaderToken, config.SessionToken(secret, "bob"))).Messages.New(context.Background(), aParams(msgs))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("bob's token for alice: %v", err)
	}
	r.up.Enqueue(upstreamfake.Reply{Text: "hello"})
	if _, err := r.anthropic("alice", aoption.WithHeader(HeaderToken, config.SessionToken(secret, "alice"))).Messages.New(context.Background(), aParams(msgs)); err != nil {
		t.Fatal(err)
	}
	if rec, _ := r.up.Last(); rec.Header.Get(HeaderToken) != "" {
		t.Fatal("session token leaked upstream")
	}
	// admin: another session's token cannot read alice's records
	admin := adminURL(t, r)
	get := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, admin+path, nil)
		req.Header.Set(HeaderToken, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/admin/sessions/alice/records/t1", config.SessionToken(secret, "bob")); c != 401 {
		t.Fatalf("cross-session record read: %d", c)
	}
	time.Sleep(50 * time.Millisecond)
	if c := get("/admin/sessions/alice", config.SessionToken(secret, "alice")); c != 200 {
		t.Fatalf("own session: %d", c)
	}
}

// TestOpenAISessionTokenErrorIsOpenAIShaped: the proxy's own 401 for an OpenAI client looks
// like OpenAI's (type invalid_request_error, code invalid_api_key).
func TestOpenAISessionTokenErrorIsOpenAIShaped(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.SessionSecret = []byte("policy-secret") })
	_, err := r.openai("alice").Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oErr *openai.Error
	if !errors.As(err, &oErr) || oErr.StatusCode != 401 || oErr.Type != "invalid_request_error" || oErr.Code != "invalid_api_key" {
		t.Fatalf("err = %v", err)
	}
}

func TestSessionIDDerivation(t *testing.T) {
	h := http.Header{}
	a := []byte(`{"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"}]}`)
	b := []byte(`{"system":"sys","messages":[{"role":"user","content":[{"type":"text","text":"first"}]},{"role":"assistant","content":[{"type":"text","text":"x"}]},{"role":"user","content":"more"}]}`)
	c := []byte(`{"system":"another system prompt, a day later","messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"}]}`)
	ida, src := sessionID(wire.Anthropic, h, a)
	idb, _ := sessionID(wire.Anthropic, h, b)
	idc, _ := sessionID(wire.Anthropic, h, c)
	if src != SourceDerived || ida != idb || ida != idc {
		t.Fatalf("derived ids differ: %s %s %s", ida, idb, idc)
	}
	if id, src := sessionID(wire.Anthropic, h, []byte(`{"metadata":{"user_id":"u1"},"messages":[]}`)); !strings.HasPrefix(id, "u1:") || src != SourceMetadata {
		t.Fatal(id, src)
	}
	if id, _ := sessionID(wire.OpenAI, h, []byte(`{"prompt_cache_key":"pk","messages":[]}`)); !strings.HasPrefix(id, "pk:") {
		t.Fatal(id)
	}
	if id, _ := sessionID(wire.OpenAI, h, []byte(`{"user":"u","prompt_cache_key":"pk","messages":[]}`)); !strings.HasPrefix(id, "pk:") {
		t.Fatal(id)
	}
	h.Set(HeaderSession, "hdr")
	if id, _ := sessionID(wire.OpenAI, h, []byte(`{"user":"u"}`)); id != "hdr" {
		t.Fatal(id)
	}
}
