package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/condense-dev/condense/internal/wire"
)

// growingBody returns an Anthropic request body with n user/assistant message pairs.
func growingBody(n int) []byte { return growingBodyOf(n, 100) }

// growingBodyOf is growingBody with pad bytes of text in each question.
func growingBodyOf(n, pad int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-test","max_tokens":64,"messages":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"question %d %s"},{"role":"assistant","content":"answer %d"}`, i, strings.Repeat("x", pad), i)
	}
	b.WriteString(`,{"role":"user","content":"next"}]}`)
	return []byte(b.String())
}

func TestParseCacheReusesThePreviousRequest(t *testing.T) {
	c := newParseCache(1 << 20)
	first, err := c.parse(wire.Anthropic, "s1", growingBody(10))
	if err != nil {
		t.Fatal(err)
	}
	if first.ReusedMessages() != 0 {
		t.Fatalf("first request reused %d messages", first.ReusedMessages())
	}
	c.put(wire.Anthropic, "s1", first)
	body := growingBody(11)
	second, err := c.parse(wire.Anthropic, "s1", body)
	if err != nil {
		t.Fatal(err)
	}
	if second.ReusedMessages() != 20 {
		t.Fatalf("second request reused %d messages, want the 20 unchanged ones", second.ReusedMessages())
	}
	cold, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(second.Bytes(), cold.Bytes()) || len(second.Messages) != len(cold.Messages) {
		t.Fatal("a reusing parse differs from a cold parse")
	}
	// Another session, or another format, never reuses s1's request.
	other, err := c.parse(wire.Anthropic, "s2", body)
	if err != nil {
		t.Fatal(err)
	}
	if other.ReusedMessages() != 0 {
		t.Fatal("session s2 reused session s1's parse")
	}
	if _, err := c.parse(wire.Anthropic, "s1", []byte(`{"messages":[`)); err == nil {
		t.Fatal("malformed body parsed with a remembered previous request")
	}
}

func TestParseCacheEvictsLeastRecentlyUsedWithinBudget(t *testing.T) {
	body := growingBody(5)
	one, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	w := one.RetainedBytes() // what each session's request keeps alive
	c := newParseCache(2*w + w/2)
	for _, sid := range []string{"a", "b", "c"} {
		r, err := c.parse(wire.Anthropic, sid, body)
		if err != nil {
			t.Fatal(err)
		}
		c.put(wire.Anthropic, sid, r)
		if sid == "b" {
			c.get(wire.Anthropic, "a") // a is now more recent than b
		}
	}
	n, size := c.len()
	if n != 2 || size > c.max {
		t.Fatalf("cache holds %d sessions, %d bytes; want 2 within %d", n, size, c.max)
	}
	if c.get(wire.Anthropic, "b") != nil || c.get(wire.Anthropic, "a") == nil || c.get(wire.Anthropic, "c") == nil {
		t.Fatal("the least recently used session was not the one evicted")
	}
	// A session's request over the whole budget is not remembered, and its earlier one is
	// forgotten.
	small, err := wire.Parse(wire.Anthropic, growingBody(1))
	if err != nil {
		t.Fatal(err)
	}
	big, err := wire.ParseReusing(wire.Anthropic, body, small)
	if err != nil {
		t.Fatal(err)
	}
	huge := newParseCache(big.RetainedBytes() - 1)
	huge.put(wire.Anthropic, "a", small)
	if n, _ := huge.len(); n != 1 {
		t.Fatal("a request within the budget was not remembered")
	}
	huge.put(wire.Anthropic, "a", big)
	if n, size := huge.len(); n != 0 || size != 0 {
		t.Fatalf("after a request larger than the whole budget the cache holds %d sessions, %d bytes; want none", n, size)
	}
	off := newParseCache(-1)
	r, _ := off.parse(wire.Anthropic, "a", body)
	off.put(wire.Anthropic, "a", r)
	if n, _ := off.len(); n != 0 {
		t.Fatal("a disabled cache remembered a request")
	}
}

// TestParseCacheCountsSharedMemory: a session's next request shares the messages of the
// request parsed whole before it, and so keeps that body alive as well as its own; the
// budget counts both.
func TestParseCacheCountsSharedMemory(t *testing.T) {
	c := newParseCache(64 << 20)
	// Large messages, so that the bodies outweigh the parses' own small allocations.
	first, second := growingBodyOf(5, 20000), growingBodyOf(6, 20000)
	for _, body := range [][]byte{first, second} {
		r, err := c.parse(wire.Anthropic, "s", body)
		if err != nil {
			t.Fatal(err)
		}
		c.put(wire.Anthropic, "s", r)
	}
	r := c.get(wire.Anthropic, "s")
	if r.ReusedMessages() == 0 {
		t.Fatal("the second request shared nothing with the first")
	}
	n, size := c.len()
	if n != 1 || size != r.RetainedBytes() {
		t.Fatalf("cache holds %d sessions, %d bytes; want 1 of %d bytes", n, size, r.RetainedBytes())
	}
	if size < len(first)+len(second) {
		t.Fatalf("cache counts %d bytes, less than the two bodies the request keeps alive (%d + %d)", size, len(first), len(second))
	}
}

// TestParseCacheGauges: the proxy exports what its parse cache holds, and a request an SDK
// sent is remembered with the memory it keeps alive (at least its body).
func TestParseCacheGauges(t *testing.T) {
	r := newRig(t, nil, nil, nil)
	c := r.anthropic("sess-gauges")
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("list the files " + strings.Repeat("x", 4000)))}
	aTurn(t, c, msgs, false)
	r.settle()
	gauges := map[string]float64{}
	families, err := r.px.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "condense_parse_cache_") {
			gauges[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	sessions, size := r.px.parses.len()
	if gauges["condense_parse_cache_sessions"] != 1 || sessions != 1 {
		t.Fatalf("condense_parse_cache_sessions = %v (cache: %d), want 1", gauges["condense_parse_cache_sessions"], sessions)
	}
	if gauges["condense_parse_cache_bytes"] != float64(size) || size < 4000 {
		t.Fatalf("condense_parse_cache_bytes = %v, cache %d bytes; want the cache's size, more than the 4000-byte message", gauges["condense_parse_cache_bytes"], size)
	}
}
