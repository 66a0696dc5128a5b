// Command condense is the single condense binary: pruning proxy, pruner worker, operator
// manager, session importer and replay harness are its subcommands.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/buildinfo"
)

// rootCmd is the top-level command; every subcommand file adds itself in an init function.
var rootCmd = &cobra.Command{
	Use:           "condense",
	Short:         "Context-pruning infrastructure for LLM coding agents",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), buildinfo.String())
		},
	})
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "condense:", err)
		os.Exit(1)
	}
}
