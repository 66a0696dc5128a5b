package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/strategies"
	"github.com/condense-dev/condense/internal/transcripts"
)

// replayFlags are the flags of `condense replay`.
type replayFlags struct {
	strategies    string
	jsonOut       bool
	htmlFile      string
	markdownFile  string
	pricesFile    string
	breakpoints   string
	provider      string
	strict        bool
	charsPerToken float64
	perSession    bool
	progress      string
	maskWindow    int
	llmModel      string
	clear         strategies.ClearToolUses
	clearExclude  []string
	condense      condenseFlags
}

func init() {
	cmd, _ := replayCmd()
	rootCmd.AddCommand(cmd)
}

// replayCmd builds `condense replay` and the flag values it parses into.
func replayCmd() (*cobra.Command, *replayFlags) {
	f := &replayFlags{clear: strategies.DefaultClearToolUses()}
	cmd := &cobra.Command{
		Use:   "replay FILE|DIR...",
		Short: "Replay recorded agent sessions through pruning strategies and compare their cost",
		Long: `Replay reads recorded coding-agent sessions (` + transcripts.FormatList() + `;
directories file by file; malformed records are skipped, --strict fails instead) or request
logs (JSONL of request bodies or ` + "`condense import`" + ` envelopes) and sends every request, in
order, through each strategy (none, condense, condense-llm, reference, clear-tool-uses,
observation-mask); it validates each rewritten request, checks what the agent later used of
earlier tool output (kept, recoverable, lost: docs/fidelity.md) and bills it with the
prompt-cache cost model, recovery rounds included.

The condense strategy takes its engine policy and flush trigger from --policy, else --config,
and every flag given explicitly beats the file; the summarizer comes from --config only.

Docs: ` + docsURL + `replay.md`,
		Example: `  condense replay ~/.claude/projects/myrepo/
  condense replay session.jsonl --html report.html
  condense replay ../shared/corpus/raw --markdown docs/benchmarks/corpus.md --json > corpus.json`,
		Args: positional("FILE|DIR..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd, args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.strategies, "strategies", strings.Join(strategyNames, ","), "comma-separated strategies; the first is the baseline")
	fl.BoolVar(&f.jsonOut, "json", false, "write the full report (with per-request series) as JSON to standard output instead of the table")
	fl.StringVar(&f.htmlFile, "html", "", "write an HTML report with inline SVG charts to `FILE`")
	fl.StringVar(&f.markdownFile, "markdown", "", "write a Markdown report to `FILE`")
	fl.StringVar(&f.pricesFile, "prices", "", "price table `FILE` in the internal/cost/prices.yaml format (default: the embedded table)")
	fl.StringVar(&f.breakpoints, "cache-breakpoints", "auto", "auto (the request's cache_control, else pi/Claude Code's placement) or client (only the request's own)")
	fl.StringVar(&f.provider, "provider", "", "request form for sessions: anthropic|openai|responses (default: each session's native form)")
	fl.BoolVar(&f.strict, "strict", false, "fail on a session's first malformed record instead of skipping it")
	fl.Float64Var(&f.charsPerToken, "chars-per-token", 4, "ASCII characters per token of the estimator")
	fl.BoolVar(&f.perSession, "per-session", false, "print one table per session before the totals")
	fl.StringVar(&f.progress, "progress", "auto", "progress bar on standard error: auto (when a terminal), always, never")
	fl.IntVar(&f.maskWindow, "mask-window", 10, "observation-mask: tool outputs kept")
	fl.StringVar(&f.llmModel, "llm-model", strategies.DefaultLLMModel, "condense-llm: the summarizer `MODEL` its calls are billed at (a model the price table lacks is priced by family, with a warning)")
	fl.IntVar(&f.clear.Trigger, "clear-trigger", f.clear.Trigger, "clear-tool-uses: input-token trigger")
	fl.IntVar(&f.clear.Keep, "clear-keep", f.clear.Keep, "clear-tool-uses: tool uses kept")
	fl.IntVar(&f.clear.ClearAtLeast, "clear-at-least", 0, "clear-tool-uses: minimum tokens cleared per activation")
	fl.StringSliceVar(&f.clearExclude, "clear-exclude", nil, "clear-tool-uses: tool names never cleared")
	fl.BoolVar(&f.clear.ClearToolInputs, "clear-inputs", false, "clear-tool-uses: also clear tool inputs")
	addCondenseFlags(fl, &f.condense)
	return cmd, f
}

// strategyNames lists the strategies in report order.
var strategyNames = []string{"none", "condense", "condense-llm", "reference", "clear-tool-uses", "observation-mask"}

// buildStrategies turns --strategies into strategies; fl tells which flags were given
// explicitly, warn receives settings that are read but not simulated.
func buildStrategies(fl *pflag.FlagSet, f *replayFlags, prices *cost.Prices, est cost.Estimator, warn io.Writer) ([]replay.Strategy, error) {
	var out []replay.Strategy
	seen := map[string]bool{}
	for _, name := range strings.Split(f.strategies, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		switch name {
		case "none":
			out = append(out, strategies.None{})
		case "clear-tool-uses":
			c := f.clear
			c.ExcludeTools = f.clearExclude
			out = append(out, c)
		case "observation-mask":
			out = append(out, strategies.ObservationMask{Window: f.maskWindow})
		case "condense", "condense-llm":
			o, warnings, err := condenseOptions(fl, &f.condense, prices)
			if err != nil {
				return nil, err
			}
			if name == "condense-llm" {
				o.Name = name
				o.Summarizer = strategies.ModeledLLM{Model: f.llmModel, Estimator: est, Prices: prices}
			} else {
				for _, w := range warnings {
					fmt.Fprintln(warn, "condense replay:", w)
				}
			}
			s, err := strategies.NewCondense(o)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		case "reference":
			out = append(out, strategies.Reference())
		default:
			return nil, fmt.Errorf("--strategies: unknown strategy %q (want %s)", name, strings.Join(strategyNames, ", "))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--strategies: none given")
	}
	return out, nil
}

// replayFiles expands the arguments into files: directories contribute their regular files
// (recursively, sorted), an opencode storage directory its session files, files themselves.
func replayFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if sessions := transcripts.OpencodeSessionFiles(p); sessions != nil {
					found = append(found, sessions...)
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") && !strings.HasSuffix(d.Name(), ".md") && !strings.HasSuffix(d.Name(), ".py") {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

func runReplay(cmd *cobra.Command, args []string, f *replayFlags) error {
	// The arguments parsed: from here on an error is about the replay, not the usage.
	cmd.SilenceUsage = true
	var prices *cost.Prices
	if f.pricesFile != "" {
		var err error
		if prices, err = cost.LoadPrices(f.pricesFile); err != nil {
			return err
		}
	}
	if f.charsPerToken <= 0 {
		return fmt.Errorf("--chars-per-token must be positive")
	}
	est := cost.CharEstimator{CharsPerToken: f.charsPerToken}
	strats, err := buildStrategies(cmd.Flags(), f, prices, est, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	opts := replay.Options{Strategies: strats, Prices: prices, Estimator: est}
	switch f.breakpoints {
	case "auto":
		opts.Breakpoints = cost.BreakpointsAuto
	case "client":
		opts.Breakpoints = cost.BreakpointsClient
	default:
		return fmt.Errorf("--cache-breakpoints %q: want auto or client", f.breakpoints)
	}
	prov := transcripts.Provider(f.provider)
	if err := checkProvider(prov); err != nil {
		return err
	}
	files, err := replayFiles(args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return errors.New("no files to replay")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()

	// Open every file first: the progress bar needs the request count.
	stderr := cmd.ErrOrStderr()
	var trs []replay.Transcript
	var reports []replay.SessionReport
	total := 0
	for _, p := range files {
		var skipped []*transcripts.ParseError
		t, err := replay.OpenWith(p, replay.OpenOptions{Provider: prov, Strict: f.strict,
			Skipped: func(pe *transcripts.ParseError) { skipped = append(skipped, pe) }})
		reportSkipped(stderr, p, skipped)
		if err != nil {
			reports = append(reports, replay.SessionReport{File: filepath.Base(p), Error: err.Error()})
			continue
		}
		trs = append(trs, t)
		total += t.Len() * len(strats)
	}
	var bar *progressbar.ProgressBar
	show := f.progress == "always"
	if f.progress == "auto" {
		if fd, ok := stderr.(*os.File); ok && term.IsTerminal(int(fd.Fd())) {
			show = true
		}
	} else if f.progress != "always" && f.progress != "never" {
		return fmt.Errorf("--progress %q: want auto, always or never", f.progress)
	}
	if show {
		bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("replaying"),
			progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish())
		opts.Progress = func() { _ = bar.Add(1) }
	}
	for _, t := range trs {
		if bar != nil {
			bar.Describe(t.Name())
		}
		rep, err := replay.Run(ctx, t, opts)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rep.File, rep.Error = t.Name(), err.Error()
		}
		reports = append(reports, rep)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	sort.SliceStable(reports, func(i, j int) bool { return reports[i].File < reports[j].File })
	report := replay.NewReport(reports)
	if len(report.Totals) == 0 {
		// Every file failed: name them all, and print no empty table.
		_ = notReplayed(stderr, report, len(files))
		return fmt.Errorf("none of the %s could be replayed", plural(len(files), "file"))
	}
	out := cmd.OutOrStdout()
	if f.jsonOut {
		err = replay.WriteJSON(out, report)
		for _, w := range report.Warnings {
			fmt.Fprintln(stderr, "condense replay: warning:", w)
		}
	} else {
		err = replay.WriteTable(out, report, f.perSession)
	}
	if err != nil {
		return err
	}
	if f.htmlFile != "" {
		if err := writeFileWith(f.htmlFile, func(w io.Writer) error { return replay.WriteHTML(w, report, "condense replay") }); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "condense replay: wrote the HTML report to", f.htmlFile)
	}
	if f.markdownFile != "" {
		if err := writeFileWith(f.markdownFile, func(w io.Writer) error {
			return replay.WriteMarkdown(w, report, "Replay of the agent-session corpus")
		}); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "condense replay: wrote the Markdown report to", f.markdownFile)
	}
	return notReplayed(stderr, report, len(files))
}

// plural writes "1 file", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// notReplayed names on w every file the report could not replay, with its error, and returns
// an error when there was one: the table's totals leave such files out, so they must not
// pass unnoticed (or with exit status 0).
func notReplayed(w io.Writer, report *replay.Report, files int) error {
	n := 0
	for _, s := range report.Sessions {
		if s.Error != "" {
			fmt.Fprintf(w, "not replayed: %s: %s\n", s.File, s.Error)
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("%d of %s could not be replayed", n, plural(files, "file"))
	}
	return nil
}

// writeFileWith writes a file atomically (temporary file + rename).
func writeFileWith(path string, write func(io.Writer) error) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
