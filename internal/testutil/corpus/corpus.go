// Package corpus locates the shared agent-session corpus (../shared/corpus next to the
// repository) for tests and benchmarks. The corpus is never copied into the repository:
// tests that need it skip with a message when it is absent.
package corpus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/needs"
)

// EnvDir names an environment variable that overrides the corpus directory (the folder that
// holds MANIFEST.md and raw/).
const EnvDir = "CONDENSE_CORPUS"

// Dir returns the corpus directory, or "" when it cannot be found. It honours EnvDir, then
// looks for shared/corpus beside the repository root (the directory holding go.mod).
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		if st, err := os.Stat(filepath.Join(d, "raw")); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack")); err == nil { // the repository root, not a tools module
				c := filepath.Join(filepath.Dir(dir), "shared", "corpus")
				if st, err := os.Stat(filepath.Join(c, "raw")); err == nil && st.IsDir() {
					return c
				}
				return ""
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}

// Require returns the corpus directory or skips the test with a message when it is absent.
func Require(tb testing.TB) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		needs.Missing(tb, "agent-session corpus not found (expected ../shared/corpus beside the repository, or $%s)", EnvDir)
	}
	return d
}

// Files returns the sorted paths of every raw corpus file, skipping the test when the corpus
// is absent.
func Files(tb testing.TB) []string {
	tb.Helper()
	d := Require(tb)
	entries, err := os.ReadDir(filepath.Join(d, "raw"))
	if err != nil {
		tb.Fatalf("read corpus: %v", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, filepath.Join(d, "raw", e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// File returns the path of one raw corpus file by name, skipping the test when the corpus or
// the file is absent.
func File(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(Require(tb), "raw", name)
	if _, err := os.Stat(p); err != nil {
		needs.Missing(tb, "corpus file %s not found", name)
	}
	return p
}

// ClaudeCodeMessages returns the user and assistant "message" objects (with a role and
// content) of the Claude Code JSONL transcript at path, in file order.
func ClaudeCodeMessages(tb testing.TB, path string) []json.RawMessage {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var msgs []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var rec struct {
			Type    string          `json:"type"`
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || (rec.Type != "user" && rec.Type != "assistant") || len(rec.Message) == 0 {
			continue
		}
		var probe struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(rec.Message, &probe) == nil && probe.Role != "" && len(probe.Content) > 0 {
			msgs = append(msgs, rec.Message)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return msgs
}

// AnthropicRequest builds an Anthropic request body (a fixed model, system block and
// metadata) around message objects.
func AnthropicRequest(msgs []json.RawMessage) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"system":[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}}],"messages":[`)
	for i, m := range msgs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(m)
	}
	buf.WriteString(`],"stream":true,"metadata":{"user_id":"u1"}}`)
	return buf.Bytes()
}

// TwoMBAnthropicRequest concatenates the messages of the Claude Code corpus files (in name
// order) until the request reaches 2 MB: a deterministic, realistic ~2 MB request.
func TwoMBAnthropicRequest(tb testing.TB) []byte {
	tb.Helper()
	var msgs []json.RawMessage
	size := 0
	for _, p := range Files(tb) {
		base := filepath.Base(p)
		if !strings.HasPrefix(base, "ccspot_") && !strings.HasPrefix(base, "cccodemie_") {
			continue
		}
		for _, m := range ClaudeCodeMessages(tb, p) {
			msgs = append(msgs, m)
			if size += len(m) + 1; size >= 2<<20 {
				return AnthropicRequest(msgs)
			}
		}
	}
	tb.Fatal("Claude Code corpus smaller than 2 MB")
	return nil
}

// TrajectoryChatRequest returns the "messages" of the mini-SWE-agent trajectory file name
// as a Chat Completions request body (model gpt-4o).
func TrajectoryChatRequest(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(File(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		tb.Fatal(err)
	}
	return append(append([]byte(`{"model":"gpt-4o","messages":`), doc["messages"]...), '}')
}
