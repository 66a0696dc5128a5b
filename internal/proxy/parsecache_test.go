package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// growingBody returns an Anthropic request body with n user/assistant message pairs.
func growingBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-test","max_tokens":64,"messages":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"question %d %s"},{"role":"assistant","content":"answer %d"}`, i, strings.Repeat("x", 100), i)
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
	c := newParseCache(2*len(body) + len(body)/2)
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
	huge := newParseCache(len(body) - 1)
	r, _ := huge.parse(wire.Anthropic, "a", body)
	huge.put(wire.Anthropic, "a", r)
	if n, _ := huge.len(); n != 0 {
		t.Fatal("a request larger than the whole budget was remembered")
	}
	off := newParseCache(-1)
	r, _ = off.parse(wire.Anthropic, "a", body)
	off.put(wire.Anthropic, "a", r)
	if n, _ := off.len(); n != 0 {
		t.Fatal("a disabled cache remembered a request")
	}
}
