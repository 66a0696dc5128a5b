package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/strategies"
	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// writeTemp writes content to a file in a test directory and returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// proxyConfig is a ProxyConfig document with the given engine block (YAML flow mapping).
func proxyConfig(engine string) string {
	return "apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nengine: " + engine + "\n"
}

// resolveCondense parses args as `condense replay` flags and returns the condense strategy's
// options and warnings as the command would build them.
func resolveCondense(t *testing.T, args ...string) (strategies.CondenseOptions, []string, error) {
	t.Helper()
	cmd, f := replayCmd()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return condenseOptions(cmd.Flags(), &f.condense, nil)
}

// knobs are the trigger fields of CondenseOptions.
type knobs struct {
	CacheAware, MidRun              bool
	GraceTurns, Horizon, MaxHorizon int
}

func knobsOf(o strategies.CondenseOptions) knobs {
	return knobs{o.CacheAware, o.MidRun, o.GraceTurns, o.Horizon, o.MaxHorizon}
}

func mustResolve(t *testing.T, args ...string) strategies.CondenseOptions {
	t.Helper()
	o, _, err := resolveCondense(t, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return o
}

// TestReplayConfigTriggerKnobs: the trigger knobs of the --config file (and of a --policy
// file) apply to the condense strategy exactly as the same flags do, and a flag given
// explicitly beats the file, knob by knob.
func TestReplayConfigTriggerKnobs(t *testing.T) {
	defaults := knobs{true, true, strategies.DefaultGraceTurns, strategies.DefaultHorizon, strategies.DefaultMaxHorizon}
	if got := knobsOf(mustResolve(t)); got != defaults {
		t.Fatalf("no flags: %+v, want %+v", got, defaults)
	}
	cfg := writeTemp(t, "proxy.yaml", proxyConfig(`{batchingMode: agent-message, chainCompression: {rollingWindow: 1},
  trigger: {cacheAware: true, midRun: false, midRunGraceTurns: 5, horizon: 12, maxHorizon: 40}}`))
	fromFile := mustResolve(t, "--config", cfg)
	fromFlags := mustResolve(t, "--no-mid-run", "--grace-turns", "5", "--horizon", "12", "--max-horizon", "40")
	want := knobs{true, false, 5, 12, 40}
	if got := knobsOf(fromFile); got != want || knobsOf(fromFlags) != want {
		t.Fatalf("--config: %+v, same flags: %+v, want %+v", got, knobsOf(fromFlags), want)
	}
	// The engine block is the policy (batching and rolling window included).
	if fromFile.Policy == nil || fromFile.Policy.BatchingMode != pruner.BatchAgentMessage || fromFile.Policy.Chain.RollingWindow != 1 {
		t.Fatalf("--config policy = %+v", fromFile.Policy)
	}

	// Explicit flags beat the file, one knob at a time; the others keep the file's value.
	for _, tc := range []struct {
		args []string
		want knobs
	}{
		{[]string{"--no-mid-run=false"}, knobs{true, true, 5, 12, 40}},
		{[]string{"--no-cache-aware"}, knobs{false, false, 5, 12, 40}},
		{[]string{"--grace-turns", "2"}, knobs{true, false, 2, 12, 40}},
		{[]string{"--horizon", "3"}, knobs{true, false, 5, 3, 40}},
		{[]string{"--max-horizon", "64"}, knobs{true, false, 5, 12, 64}},
		// Given explicitly with its default value, a flag still wins.
		{[]string{"--horizon", "8"}, knobs{true, false, 5, 8, 40}},
	} {
		args := append([]string{"--config", cfg}, tc.args...)
		if got := knobsOf(mustResolve(t, args...)); got != tc.want {
			t.Errorf("%v: %+v, want %+v", args, got, tc.want)
		}
	}

	// cacheAware: false in the file turns mid-run off too, as --no-cache-aware does.
	plain := writeTemp(t, "plain.yaml", proxyConfig(`{trigger: {cacheAware: false}}`))
	if got, want := knobsOf(mustResolve(t, "--config", plain)), knobsOf(mustResolve(t, "--no-cache-aware")); got != want {
		t.Fatalf("cacheAware: false = %+v, --no-cache-aware = %+v", got, want)
	}
	if got := knobsOf(mustResolve(t, "--config", plain, "--no-cache-aware=false")); got != defaults {
		t.Fatalf("--no-cache-aware=false over the file = %+v, want %+v", got, defaults)
	}

	// --policy supplies the engine block, trigger included, whatever --config says; a
	// PruningPolicy's spec.trigger and a bare spec's trigger are read alike.
	pp := writeTemp(t, "policy.yaml", `apiVersion: condense.dev/v1alpha1
kind: PruningPolicy
metadata: {name: p}
spec:
  chainCompression: {rollingWindow: 2}
  trigger: {horizon: 4, maxHorizon: 6}
`)
	bare := writeTemp(t, "bare.json", `{"chainCompression":{"rollingWindow":2},"trigger":{"horizon":4,"maxHorizon":6}}`)
	for _, p := range []string{pp, bare} {
		o := mustResolve(t, "--config", cfg, "--policy", p)
		if got, want := knobsOf(o), (knobs{true, true, strategies.DefaultGraceTurns, 4, 6}); got != want || o.Policy.Chain.RollingWindow != 2 {
			t.Errorf("--policy %s: %+v (rolling window %d), want %+v", filepath.Base(p), got, o.Policy.Chain.RollingWindow, want)
		}
	}
}

// TestReplayTriggerFileErrors: invalid or unknown trigger settings are typed errors naming
// the file; settings the replay cannot simulate are warnings.
func TestReplayTriggerFileErrors(t *testing.T) {
	var ve *config.ValidationError
	cfg := writeTemp(t, "bad.yaml", proxyConfig(`{trigger: {horizon: 0}}`))
	if _, _, err := resolveCondense(t, "--config", cfg); !errors.As(err, &ve) || !strings.Contains(err.Error(), "engine.trigger.horizon") {
		t.Fatalf("--config horizon 0: %v", err)
	}
	bad := writeTemp(t, "bad.json", `{"trigger":{"horizon":9,"maxHorizon":4}}`)
	_, _, err := resolveCondense(t, "--policy", bad)
	var te *triggerFileError
	if !errors.As(err, &te) || te.Path != bad || !errors.As(err, &ve) || !strings.Contains(err.Error(), "engine.trigger.maxHorizon") {
		t.Fatalf("--policy maxHorizon < horizon: %v", err)
	}
	typo := writeTemp(t, "typo.json", `{"trigger":{"horizn":9}}`)
	if _, _, err := resolveCondense(t, "--policy", typo); !errors.As(err, &te) || !strings.Contains(err.Error(), "horizn") {
		t.Fatalf("--policy unknown trigger field: %v", err)
	}
	odd := writeTemp(t, "odd.json", `{"trigger":{"mode":"on-demand","autoBudgetThreshold":0.8,"budgetTurnDelta":0.2}}`)
	_, warnings, err := resolveCondense(t, "--policy", odd)
	if err != nil || len(warnings) != 3 || !strings.Contains(warnings[0], "trigger.mode on-demand") ||
		!strings.Contains(warnings[1], "autoBudgetThreshold 0.8") || !strings.Contains(warnings[2], "budgetTurnDelta 0.2") {
		t.Fatalf("warnings = %q, %v", warnings, err)
	}
}

// runReplayJSON runs `condense replay --json` and returns the condense strategy's totals and
// standard error.
func runReplayJSON(t *testing.T, args ...string) (replay.StrategyReport, string) {
	t.Helper()
	cmd, _ := replayCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"--json", "--progress", "never", "--strategies", "condense"}, args...))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("replay %v: %v", args, err)
	}
	var rep replay.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Totals) != 1 {
		t.Fatalf("replay %v: %v\n%s", args, err, out.String())
	}
	return rep.Totals[0], errOut.String()
}

// TestReplayConfigChangesResult replays a real Claude Code session: the --config file's
// trigger knobs change the condense result exactly as the same flags do, and an explicit
// flag beats the file.
func TestReplayConfigChangesResult(t *testing.T) {
	session := corpus.File(t, "cccodemie_session-196820da.jsonl")
	cfg := writeTemp(t, "proxy.yaml", proxyConfig(`{trigger: {midRun: false, midRunGraceTurns: 5, horizon: 1, maxHorizon: 1}}`))

	def, _ := runReplayJSON(t, session)
	fromFile, _ := runReplayJSON(t, session, "--config", cfg)
	fromFlags, _ := runReplayJSON(t, session, "--no-mid-run", "--grace-turns", "5", "--horizon", "1", "--max-horizon", "1")
	if !reflect.DeepEqual(fromFile, fromFlags) {
		t.Fatalf("--config and the same flags differ:\nfile:  %+v\nflags: %+v", fromFile, fromFlags)
	}
	if reflect.DeepEqual(fromFile, def) {
		t.Fatalf("the --config knobs did not change the result: %+v", def)
	}
	if fromFile.DiagnosticCounts["flush-mid-run"]+fromFile.DiagnosticCounts["flush-mid-run-deferred"] != 0 {
		t.Fatalf("midRun: false in the file, yet mid-run flushes were weighed: %v", fromFile.DiagnosticCounts)
	}

	overridden, _ := runReplayJSON(t, session, "--config", cfg, "--no-mid-run=false")
	flagsOnly, _ := runReplayJSON(t, session, "--grace-turns", "5", "--horizon", "1", "--max-horizon", "1")
	if !reflect.DeepEqual(overridden, flagsOnly) {
		t.Fatalf("--no-mid-run=false over the file differs from the flags alone:\nfile+flag: %+v\nflags:     %+v", overridden, flagsOnly)
	}
	if reflect.DeepEqual(overridden, fromFile) {
		t.Fatalf("the explicit --no-mid-run=false did not beat the file")
	}

	odd := writeTemp(t, "odd.yaml", proxyConfig(`{trigger: {mode: on-demand}}`))
	if _, stderr := runReplayJSON(t, session, "--config", odd); !strings.Contains(stderr, "trigger.mode on-demand is not simulated") {
		t.Fatalf("no warning on standard error: %q", stderr)
	}
}

// execReplay runs `condense replay` with args and returns its standard output and error.
func execReplay(t *testing.T, args ...string) (stdout, stderr *bytes.Buffer, err error) {
	t.Helper()
	cmd, _ := replayCmd()
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetArgs(args)
	return stdout, stderr, cmd.ExecuteContext(context.Background())
}

// TestReplayNamesUnreadableFiles: a directory with one good request log and one broken file
// replays the good one, names the broken one with its error on standard error (the table's
// totals leave it out) and ends with an error, so the command exits with status 1.
func TestReplayNamesUnreadableFiles(t *testing.T) {
	dir := t.TempDir()
	good := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "a-good.jsonl"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b-broken.jsonl"), []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := execReplay(t, "--progress", "never", dir)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 files could not be replayed") {
		t.Fatalf("error = %v", err)
	}
	if !strings.Contains(errOut.String(), "not replayed: b-broken.jsonl: ") {
		t.Fatalf("standard error does not name the broken file: %q", errOut.String())
	}
	if !strings.Contains(out.String(), "TOTAL: 1 session, 1 request") {
		t.Fatalf("the good file was not replayed:\n%s", out.String())
	}
}

// TestReplayAllFilesFail: when no file can be replayed, the command names every one on
// standard error and fails, and prints no (empty) table.
func TestReplayAllFilesFail(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.jsonl", "b.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{not json\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := execReplay(t, "--progress", "never", dir)
	if err == nil || !strings.Contains(err.Error(), "none of the 2 files could be replayed") {
		t.Fatalf("error = %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a table was printed:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "not replayed: a.jsonl: ") || !strings.Contains(errOut.String(), "not replayed: b.jsonl: ") {
		t.Fatalf("standard error does not name both files: %q", errOut.String())
	}
}

// TestReplayReportsWhereItWrote: --html and --markdown say on standard error where they wrote,
// and the default strategies include condense-llm, billed at --llm-model.
func TestReplayReportsWhereItWrote(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log.jsonl")
	if err := os.WriteFile(log, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	html, md := filepath.Join(dir, "out", "r.html"), filepath.Join(dir, "r.md")
	out, errOut, err := execReplay(t, "--progress", "never", "--html", html, "--markdown", md, "--llm-model", "gpt-5-mini", log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wrote the HTML report to " + html, "wrote the Markdown report to " + md} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("standard error lacks %q: %q", want, errOut.String())
		}
	}
	for _, p := range []string{html, md} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	if !strings.Contains(out.String(), "condense-llm") {
		t.Errorf("the table lacks condense-llm:\n%s", out.String())
	}
}
