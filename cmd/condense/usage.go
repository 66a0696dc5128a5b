package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// docsURL is where the documentation pages the --help texts link to live.
const docsURL = "https://github.com/condense-dev/condense/blob/main/docs/"

// usageError is a command line a command cannot run: arguments or flags it does not take.
// It is reported with the command's usage line.
type usageError struct {
	cmd *cobra.Command
	err error
}

// Error implements error: the command's name and what is wrong.
func (e *usageError) Error() string { return e.cmd.CommandPath() + ": " + e.err.Error() }

// Unwrap returns what is wrong.
func (e *usageError) Unwrap() error { return e.err }

// positional accepts the arguments named, in order (a last name ending in "..." takes one or
// more); with no names, no arguments.
func positional(names ...string) cobra.PositionalArgs {
	min, max := len(names), len(names)
	if min > 0 && strings.HasSuffix(names[min-1], "...") {
		max = -1
	}
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) < min:
			return fmt.Errorf("missing %s", strings.Join(names[len(args):], " "))
		case max >= 0 && len(args) > max:
			return fmt.Errorf("unexpected argument %q", args[max])
		}
		return nil
	}
}

// withUsageErrors makes every argument and flag error of root's commands a *usageError
// (once per tree; later calls do nothing). A runnable command with subcommands and no
// argument rule refuses unknown subcommands.
func withUsageErrors(root *cobra.Command) {
	const mark = "condense/usage-errors"
	if root.Annotations[mark] != "" {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[mark] = "1"
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{cmd: c, err: err} })
	var wrap func(c *cobra.Command)
	wrap = func(c *cobra.Command) {
		args := c.Args
		if args == nil && c.HasSubCommands() {
			args = cobra.NoArgs // "unknown command", not cobra's default of accepting anything
		}
		if args != nil {
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					return &usageError{cmd: c, err: err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			wrap(sub)
		}
	}
	wrap(root)
}

// report writes err as main prints it: a usage error with the command's usage line and where
// to read more, any other error after "condense: ".
func report(w io.Writer, err error) {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "%v\nUsage: %s\nRun '%s --help' for more.\n", ue, ue.cmd.UseLine(), ue.cmd.CommandPath())
		return
	}
	fmt.Fprintln(w, "condense:", err)
}
