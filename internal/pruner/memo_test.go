package pruner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// TestSummaryBlockMemo: a memoised summary block serializes exactly like a new one, in both
// formats; a repeat returns the same block; and the memo starts over past its byte bound.
func TestSummaryBlockMemo(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		for _, text := range []string{"Summary of t1: \"quoted\"\n\ttab é \u2028", "", strings.Repeat("x", 1000)} {
			got := summaryBlock(f, text)
			want := wire.NewTextBlock(f, text)
			if !bytes.Equal(got.Raw(), want.Raw()) || got.Text != want.Text || got.Kind != want.Kind {
				t.Fatalf("%v %q: memoised block %s, new block %s", f, text, got.Raw(), want.Raw())
			}
			if again := summaryBlock(f, text); again != got {
				t.Fatalf("%v %q: a repeat built a new block", f, text)
			}
		}
	}
	if summaryBlock(wire.Anthropic, "same") == summaryBlock(wire.OpenAI, "same") {
		t.Fatal("formats share a memo entry")
	}
	big := strings.Repeat("y", summaryMemoMaxBytes/4)
	for i := range 6 {
		summaryBlock(wire.Anthropic, big+strings.Repeat("z", i))
	}
	summaryMemo.mu.Lock()
	n := summaryMemo.bytes
	summaryMemo.mu.Unlock()
	if n > summaryMemoMaxBytes {
		t.Fatalf("memo holds %d bytes, bound %d", n, summaryMemoMaxBytes)
	}
}

// TestQueryTool: the shared query tool is the schema parsed, per format, built once.
func TestQueryTool(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		q := QueryTool(f)
		if q == nil || q.Name != QueryToolName || !bytes.Equal(q.Raw(), QueryToolSchema(f)) {
			t.Fatalf("%v: QueryTool = %+v", f, q)
		}
		if QueryTool(f) != q {
			t.Fatalf("%v: QueryTool built the tool again", f)
		}
	}
	if QueryTool(0) != nil {
		t.Fatal("QueryTool of an unknown format is not nil")
	}
}
