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
)

// progressMinBytes is the input size from which `condense import` shows a progress bar (when
// stderr is a terminal).
const progressMinBytes = 1 << 20

func init() {
	var format, out, provider string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Rebuild the LLM requests an agent sent from a recorded session file",
		Long: `Import reads one recorded coding-agent session (pi session JSONL, Claude Code JSONL,
Codex rollout JSONL, SWE-agent .traj, mini-SWE-agent .traj.json) and writes the sequence of
requests the agent sent, one JSON envelope per line:

  {"provider":"anthropic","index":0,"context":0,"line":5,"time":"…","model":"…","usage":{…},"body":{…}}

The body is the request body, embedded verbatim.

Docs: ` + docsURL + `formats.md`,
		Args: positional("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(cmd, args[0], transcripts.Format(format), transcripts.Provider(provider), out)
		},
	}
	cmd.Flags().StringVar(&format, "format", "auto", "session format: auto|pi|claude-code|codex|swe-agent|mini-swe-agent")
	cmd.Flags().StringVar(&out, "out", "-", "output file, or - for standard output")
	cmd.Flags().StringVar(&provider, "provider", "", "request form: anthropic|openai (default: the source's native form)")
	rootCmd.AddCommand(cmd)
}

// runImport imports path and writes its request envelopes.
func runImport(cmd *cobra.Command, path string, format transcripts.Format, provider transcripts.Provider, out string) error {
	switch format {
	case transcripts.FormatAuto, transcripts.FormatPi, transcripts.FormatClaudeCode, transcripts.FormatCodex,
		transcripts.FormatSWEAgent, transcripts.FormatMiniSWEAgent:
	default:
		return fmt.Errorf("--format %q: want auto, pi, claude-code, codex, swe-agent or mini-swe-agent", format)
	}
	if provider != "" && provider != transcripts.Anthropic && provider != transcripts.OpenAI {
		return fmt.Errorf("--provider %q: want anthropic or openai", provider)
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	s, err := transcripts.ImportFile(path, format)
	if err != nil {
		return err
	}
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
