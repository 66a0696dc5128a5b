package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/logbuf"
)

// runCondense runs the real command tree as main does and returns its standard output, its
// standard error and what main would print for the error.
func runCondense(t *testing.T, ctx context.Context, args ...string) (stdout, stderr, printed string, err error) {
	t.Helper()
	resetFlags(t, rootCmd)
	var out, errOut logbuf.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errOut)
	defer rootCmd.SetOut(nil)
	defer rootCmd.SetErr(nil)
	defer rootCmd.SetArgs(nil)
	err = execute(ctx, rootCmd, args)
	if err != nil {
		var p bytes.Buffer
		report(&p, err)
		printed = p.String()
	}
	return out.String(), errOut.String(), printed, err
}

// resetFlags sets every flag of the tree back to its default and unset, as in a new process
// (cobra keeps the values of the previous Execute, --help included).
func resetFlags(t *testing.T, root *cobra.Command) {
	t.Helper()
	walk(root, func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				var err error
				if sv, ok := f.Value.(pflag.SliceValue); ok {
					err = sv.Replace(nil)
				} else {
					err = f.Value.Set(f.DefValue)
				}
				if err != nil {
					t.Fatalf("reset --%s of %s: %v", f.Name, c.CommandPath(), err)
				}
				f.Changed = false
			})
		}
	})
}

// walk visits every command of the tree under c.
func walk(c *cobra.Command, visit func(*cobra.Command)) {
	visit(c)
	for _, sub := range c.Commands() {
		walk(sub, visit)
	}
}

// TestHelpTexts walks the command tree: a Long text has at most 12 lines and ends with a link
// to a docs page that exists; every subcommand of the root that does something has one; a
// --help page has at most 30 lines (replay's 23 flags alone take 24: it is the exception).
// cobra's own help and completion commands are left out.
func TestHelpTexts(t *testing.T) {
	withUsageErrors(rootCmd)
	rootCmd.InitDefaultHelpCmd()
	rootCmd.InitDefaultCompletionCmd()
	walk(rootCmd, func(c *cobra.Command) {
		name := c.CommandPath()
		if name == "condense help" || strings.HasPrefix(name, "condense completion") {
			return
		}
		if c.Long == "" {
			if c.Parent() == rootCmd && c.Name() != "version" {
				t.Errorf("%s has no Long text", name)
			}
		} else {
			lines := strings.Split(strings.TrimRight(c.Long, "\n"), "\n")
			if len(lines) > 12 {
				t.Errorf("%s: Long text of %d lines, want at most 12", name, len(lines))
			}
			last := lines[len(lines)-1]
			page, ok := strings.CutPrefix(last, "Docs: "+docsURL)
			if !ok {
				t.Errorf("%s: Long text does not end with a docs link: %q", name, last)
			} else if _, err := os.Stat(filepath.Join("..", "..", "docs", page)); err != nil {
				t.Errorf("%s: links docs/%s: %v", name, page, err)
			}
		}
		out, _, _, err := runCondense(t, context.Background(), append(strings.Fields(name)[1:], "--help")...)
		if err != nil {
			t.Fatalf("%s --help: %v", name, err)
		}
		n := strings.Count(strings.TrimRight(out, "\n"), "\n") + 1
		if n > 30 && name != "condense replay" {
			t.Errorf("%s --help is %d lines, want at most 30", name, n)
		}
		if name == "condense proxy" && !strings.Contains(out, "--health-listen") {
			t.Errorf("condense proxy --help lists no --health-listen:\n%s", out)
		}
	})
}

// TestUsageErrors: an argument or flag a command does not take is reported with the command's
// name and usage line, for every command.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string // first line of what main prints
		use  string // the usage line printed after it
	}{
		{[]string{"replay"}, "condense replay: missing FILE|DIR...", "condense replay FILE|DIR... [flags]"},
		{[]string{"import"}, "condense import: missing FILE", "condense import FILE [flags]"},
		{[]string{"import", "a", "b"}, `condense import: unexpected argument "b"`, "condense import FILE [flags]"},
		{[]string{"store", "show"}, "condense store show: missing SESSION", "condense store show SESSION [flags]"},
		{[]string{"store", "blob", "s"}, "condense store blob: missing KEY", "condense store blob SESSION KEY [flags]"},
		{[]string{"store", "rm"}, "condense store rm: missing SESSION...", "condense store rm SESSION... [flags]"},
		{[]string{"store", "ls", "x"}, `condense store ls: unexpected argument "x"`, "condense store ls [flags]"},
		{[]string{"store", "lss"}, `condense store: unknown command "lss" for "condense store"`, "condense store [flags]"},
		{[]string{"nosuch"}, `condense: unknown command "nosuch" for "condense"`, "condense [flags]"},
		{[]string{"version", "x"}, `condense version: unexpected argument "x"`, "condense version [flags]"},
		{[]string{"proxy", "x"}, `condense proxy: unexpected argument "x"`, "condense proxy [--config FILE] [flags]"},
		{[]string{"proxy", "--lisen", ":1"}, "condense proxy: unknown flag: --lisen", "condense proxy [--config FILE] [flags]"},
		{[]string{"pruner"}, "condense pruner: --config is required", "condense pruner --config FILE [flags]"},
		{[]string{"manager", "x"}, `condense manager: unexpected argument "x"`, "condense manager [flags]"},
	}
	for _, tc := range cases {
		_, _, printed, err := runCondense(t, context.Background(), tc.args...)
		var ue *usageError
		lines := strings.Split(printed, "\n")
		if !errors.As(err, &ue) || len(lines) < 3 || lines[0] != tc.want || lines[1] != "Usage: "+tc.use ||
			!strings.HasPrefix(lines[2], "Run '") {
			t.Errorf("condense %s printed:\n%s(err %v)", strings.Join(tc.args, " "), printed, err)
		}
	}
	// Every command names itself when given a flag it does not take.
	walk(rootCmd, func(c *cobra.Command) {
		args := append(strings.Fields(c.CommandPath())[1:], "--no-such-flag")
		_, _, printed, err := runCondense(t, context.Background(), args...)
		if !strings.HasPrefix(printed, c.CommandPath()+": unknown flag: --no-such-flag\nUsage: "+c.UseLine()+"\n") {
			t.Errorf("%s --no-such-flag printed:\n%s(err %v)", c.CommandPath(), printed, err)
		}
	})
}

// TestFlagErrorsNamedByFlag: an invalid value given by a flag is reported under the flag, not
// under the configuration field it overrides; one from the file keeps the file and line.
func TestFlagErrorsNamedByFlag(t *testing.T) {
	_, _, printed, err := runCondense(t, context.Background(), "proxy", "--listen", "nonsense")
	if err == nil || printed != "condense: --listen: must be host:port, e.g. \":8080\" (got \"nonsense\")\n" {
		t.Fatalf("proxy --listen nonsense printed %q (err %v)", printed, err)
	}
	cfg := writeTemp(t, "pruner.yaml", "apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+
		"\nstore: {url: \"redis://127.0.0.1:1\"}\nsummarizer: {mode: jobs}\n")
	_, _, printed, _ = runCondense(t, context.Background(), "pruner", "--config", cfg, "--metrics-listen", "9090", "--health-listen", "")
	if printed != "condense: --metrics-listen: must be host:port, e.g. \":8080\" (got \"9090\")\n" {
		t.Fatalf("pruner --metrics-listen 9090 printed %q", printed)
	}
	bad := writeTemp(t, "proxy.yaml", "apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\nlisten:\n  helth: \":1\"\n")
	_, _, printed, _ = runCondense(t, context.Background(), "proxy", "--config", bad)
	if !strings.HasPrefix(printed, "condense: config "+bad+": line 4: listen.helth: unknown field (known here: proxy, metrics, health") {
		t.Fatalf("proxy --config with a typo printed %q", printed)
	}
}

// TestStoreShowMissingSession: showing a session the store does not hold fails with "not
// found", and no command that only reads creates a database where there was none.
func TestStoreShowMissingSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := store.OpenBolt(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(context.Background(), "there", 0, []byte("{}"), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, _, printed, err := runCondense(t, context.Background(), "store", "show", "--store", "bolt:"+path, "nosuch")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(printed, `not found: session "nosuch"`) {
		t.Fatalf("store show nosuch: %v, printed %q", err, printed)
	}

	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("CONDENSE_STORE", "")
	for _, args := range [][]string{{"ls"}, {"show", "s"}, {"blob", "s", "k"}, {"watch"}} {
		_, _, printed, err := runCondense(t, context.Background(), append([]string{"store"}, args...)...)
		if !errors.Is(err, store.ErrNotFound) || !strings.Contains(printed, "does not exist") {
			t.Errorf("store %v on no database: %v, printed %q", args, err, printed)
		}
		if entries, _ := os.ReadDir(state); len(entries) != 0 {
			t.Fatalf("store %v created %s", args, filepath.Join(state, entries[0].Name()))
		}
	}
}

// captureFD2 runs f with the process's file descriptor 2 (standard error, where go-redis's
// default logger writes) redirected, and returns what was written to it.
func captureFD2(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup2(int(w.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r)
		done <- b.String()
	}()
	f()
	_ = syscall.Dup2(saved, 2)
	_ = syscall.Close(saved)
	w.Close()
	out := <-done
	r.Close()
	return out
}

// TestStoreErrorHasNoLibraryLine: a store command on an unreachable Redis prints its error
// and nothing else; go-redis's own line about the failed dial does not reach standard error.
func TestStoreErrorHasNoLibraryLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	var printed string
	stray := captureFD2(t, func() {
		_, _, printed, err = runCondense(t, context.Background(), "store", "ls", "--store", "redis://"+dead, "--timeout", "3s")
	})
	if !errors.Is(err, store.ErrUnavailable) || !strings.HasPrefix(printed, "condense: open store redis://"+dead+": ") {
		t.Fatalf("store ls on a dead Redis: %v, printed %q", err, printed)
	}
	if stray != "" {
		t.Fatalf("stray lines on standard error: %q", stray)
	}
}

// TestProxyStartAndStopLines runs `condense proxy` until SIGTERM: it logs one start line with
// its listen addresses and store, and on the signal a stopping line and a stopped line with
// how long it drained and what was under way.
func TestProxyStartAndStopLines(t *testing.T) {
	resetFlags(t, rootCmd)
	var errOut logbuf.Buffer
	rootCmd.SetErr(&errOut)
	defer rootCmd.SetErr(nil)
	defer rootCmd.SetArgs(nil)
	done := make(chan error, 1)
	go func() {
		done <- execute(context.Background(), rootCmd, []string{"proxy", "--listen", "127.0.0.1:0",
			"--health-listen", "127.0.0.1:0", "--metrics-listen", "", "--store", "memory:"})
	}()
	line := func(msg string) gjson.Result {
		if lines := errOut.Lines(msg); len(lines) > 0 {
			return lines[0]
		}
		return gjson.Result{}
	}
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(errOut.String(), `"msg":"listening"`) < 2 {
		select {
		case err := <-done:
			t.Fatalf("proxy ended: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy not listening:\n%s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := line("starting")
	if start.Get("proxy").Str != "127.0.0.1:0" || start.Get("health").Str != "127.0.0.1:0" || start.Get("metrics").Str != "" ||
		start.Get("store").Str != "memory:" || start.Get("summarizer").Str != "in-proxy" {
		t.Fatalf("start line %s", start.Raw)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("proxy after SIGTERM: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("proxy did not stop after SIGTERM")
	}
	if l := line("stopping: draining"); l.Get("signal").Str != "terminated" {
		t.Fatalf("no stopping line:\n%s", errOut.String())
	}
	l := line("stopped")
	if l.Get("drainMs").Type != gjson.Number {
		t.Fatalf("no stopped line with drainMs:\n%s", errOut.String())
	}
	for _, k := range []string{"requests", "background", "flushes"} { // what it drained: nothing was under way
		if v := l.Get(k); v.Type != gjson.Number || v.Int() != 0 {
			t.Fatalf("stopped line %s: %s = %s, want 0", l.Raw, k, v.Raw)
		}
	}
	if !l.Get("complete").Bool() {
		t.Fatalf("stopped line %s: the drain must be complete", l.Raw)
	}
}
