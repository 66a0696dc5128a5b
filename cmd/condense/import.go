package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

// progressMinBytes is the input size from which `condense import` shows a progress bar (when
// stderr is a terminal).
const progressMinBytes = 1 << 20

func init() {
	rootCmd.AddCommand(importCmd())
}

// importCmd builds `condense import`.
func importCmd() *cobra.Command {
	var format, out, provider string
	var strict bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Rebuild the LLM requests an agent sent from a recorded session file",
		Long: `Import reads one recorded coding-agent session (formats: ` + transcripts.FormatList() + `)
and writes the sequence of requests the agent sent, one JSON envelope per line:

  {"provider":"anthropic","index":0,"context":0,"line":5,"time":"…","model":"…","usage":{…},"body":{…}}

The body is the request body, embedded verbatim. Malformed records are skipped and named on
standard error; --strict fails on the first instead.

Docs: ` + docsURL + `formats.md`,
		Args: positional("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := transcripts.Options{Format: transcripts.Format(format), Strict: strict}
			return runImport(cmd, args[0], o, transcripts.Provider(provider), out)
		},
	}
	cmd.Flags().StringVar(&format, "format", "auto", "session format: auto, "+transcripts.FormatList())
	cmd.Flags().StringVar(&out, "out", "-", "output file, or - for standard output")
	cmd.Flags().StringVar(&provider, "provider", "", "request form: anthropic|openai|responses (default: the source's native form)")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on the first malformed record instead of skipping it")
	return cmd
}

// runImport imports path and writes its request envelopes.
func runImport(cmd *cobra.Command, path string, o transcripts.Options, provider transcripts.Provider, out string) error {
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	if err := checkProvider(provider); err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	s, err := transcripts.ImportFileWith(path, o)
	if err != nil {
		return err
	}
	reportSkipped(cmd.ErrOrStderr(), path, s.Warnings)
	if provider == "" {
		provider = s.Native
	}
	if s.Contexts(provider) == 0 {
		return fmt.Errorf("%s: %w: %s sessions are available as %v", path, transcripts.ErrProvider, s.Format, s.Providers())
	}

	var w io.Writer = cmd.OutOrStdout()
	var f *os.File
	if out != "-" && out != "" {
		f, err = os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
		if err != nil {
			return err
		}
		defer func() {
			if f != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)

	var bar *progressbar.ProgressBar
	if st.Size() >= progressMinBytes && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions(s.Len(),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("import "+filepath.Base(path)),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("req"),
			progressbar.OptionShowIts(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	var progress func(done, total int)
	if bar != nil {
		progress = func(int, int) { _ = bar.Add(1) }
	}
	if err := transcripts.WriteEnvelopes(bw, s, provider, progress); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if f != nil {
		if err := f.Chmod(0o644); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(f.Name(), out); err != nil {
			return err
		}
		f = nil
	}
	return nil
}

// checkFormat rejects a --format value that names no format.
func checkFormat(f transcripts.Format) error {
	if f == "" || f == transcripts.FormatAuto {
		return nil
	}
	for _, g := range transcripts.Formats {
		if f == g {
			return nil
		}
	}
	return fmt.Errorf("--format %q: want auto, %s", f, transcripts.FormatList())
}

// checkProvider rejects a --provider value that names no request form (a wire format).
func checkProvider(p transcripts.Provider) error {
	if p == "" {
		return nil
	}
	if _, err := wire.ParseFormat(string(p)); err != nil {
		return fmt.Errorf("--provider: %w", err)
	}
	return nil
}
