package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/store"
)

func runStore(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := storeCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.ExecuteContext(context.Background())
	return out.String(), err
}

func TestStoreCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := store.OpenBolt(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Commit(ctx, "sess:{1}", 0, []byte(`{"pruned":["toolu_1"]}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.IncrStats(ctx, "sess:{1}", map[string]int64{store.StatRequests: 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDiagnostics(ctx, "sess:{1}", []store.Diagnostic{{Kind: "resolve-failed", Key: "fp:1"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(ctx, "sess:{1}", "orig/toolu_1", []byte("original tool output")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "other", 0, []byte{0xff, 0x00}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	url := "bolt:" + path

	out, err := runStore(t, "ls", "--store", url)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SESSION") || !strings.HasPrefix(lines[2], "sess:{1}") ||
		!strings.Contains(lines[2], " 4 ") {
		t.Fatalf("ls output:\n%s", out)
	}

	out, err = runStore(t, "show", "--store", url, "sess:{1}")
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Version          uint64           `json:"version"`
		State            json.RawMessage  `json:"state"`
		Stats            map[string]int64 `json:"stats"`
		DiagnosticCounts map[string]int64 `json:"diagnosticCounts"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("show is not JSON: %v\n%s", err, out)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, shown.State)
	if shown.Version != 1 || compact.String() != `{"pruned":["toolu_1"]}` || shown.Stats["requests"] != 4 || shown.DiagnosticCounts["resolve-failed"] != 1 {
		t.Fatalf("show = %+v", shown)
	}
	if out, err = runStore(t, "show", "--store", url, "other"); err != nil || strings.Contains(out, `"state"`) || !strings.Contains(out, `"stateBytes": 2`) {
		t.Fatalf("show of a binary state = %s, %v", out, err)
	}

	if out, err = runStore(t, "blob", "--store", url, "sess:{1}", "orig/toolu_1"); err != nil || out != "original tool output" {
		t.Fatalf("blob = %q, %v", out, err)
	}
	if _, err = runStore(t, "blob", "--store", url, "sess:{1}", "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing blob = %v", err)
	}
	if _, err = runStore(t, "show", "--store", url, "bad\nid"); !errors.Is(err, store.ErrInvalidSession) {
		t.Fatalf("bad id = %v", err)
	}

	if _, err = runStore(t, "rm", "--store", url, "sess:{1}"); err != nil {
		t.Fatal(err)
	}
	out, err = runStore(t, "ls", "--store", url, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var infos []store.SessionInfo
	if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 1 || infos[0].Session != "other" {
		t.Fatalf("ls --json after rm = %s, %v", out, err)
	}
}

// TestStoreUnknownSubcommand: under the real root command, a mistyped subcommand is an
// error (exit status 1), while the bare command still prints its help. (Run alone, storeCmd
// would be a root, which cobra already checks; as a subcommand it accepted anything.)
func TestStoreUnknownSubcommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		rootCmd.SetOut(&out)
		rootCmd.SetErr(&out)
		rootCmd.SetArgs(args)
		defer rootCmd.SetArgs(nil)
		err := rootCmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	if _, err := run("store", "lss"); err == nil || !strings.Contains(err.Error(), `unknown command "lss"`) {
		t.Fatalf("store lss: err = %v", err)
	}
	out, err := run("store")
	if err != nil || !strings.Contains(out, "Available Commands") {
		t.Fatalf("store: err = %v, output:\n%s", err, out)
	}
}
