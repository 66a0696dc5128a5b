// Command condense is the single condense binary: pruning proxy, pruner worker, operator
// manager, session importer and replay harness are its subcommands.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/buildinfo"
	"github.com/condense-dev/condense/internal/store"
)

// rootCmd is the top-level command; every subcommand file adds itself in an init function.
var rootCmd = &cobra.Command{
	Use:   "condense",
	Short: "Context-pruning infrastructure for LLM coding agents",
	Long: `condense sits between LLM coding agents and their provider and keeps the history they re-send
cheap without losing it: summarized tool results become short stubs, failed calls lose their
arguments, closed tool chains are range-compressed, and every original stays recoverable.

Start with 'condense replay DIR' on recorded agent sessions to see what it saves.

Docs: ` + docsURL + `README.md`,
	SilenceUsage:  true,
	SilenceErrors: true,
	// Runnable, so that its arguments are checked: an unknown command is an error.
	RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
}

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  positional(),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), buildinfo.String())
		},
	})
}

// execute runs root with args: argument and flag errors carry the command's usage, and
// go-redis's own log lines are dropped unless a command routes them to its logger.
func execute(ctx context.Context, root *cobra.Command, args []string) error {
	withUsageErrors(root)
	store.LogRedisTo(nil)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

func main() {
	if err := execute(context.Background(), rootCmd, os.Args[1:]); err != nil {
		report(os.Stderr, err)
		os.Exit(1)
	}
}
