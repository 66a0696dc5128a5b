package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/condense-dev/condense/internal/store"
)

// storeCmd inspects and maintains a session store: list sessions, show one, fetch a blob,
// delete a session, follow change notifications.
func storeCmd() *cobra.Command {
	var storeURL string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Inspect and maintain the session store (ls, show, blob, rm, watch)",
		Long: `Inspect and maintain a session store. --store takes the forms of store.Open:
redis://host:6379, rediss://…, redis+sentinel://sentinel:26379?master_name=NAME,
redis+cluster://node:6379?addr=node2:6379, bolt:PATH (bolt: = the default file), memory:.
The default is $CONDENSE_STORE, else bolt:. ls, show, blob and watch only read: they never
create a database or refresh a session's last-seen time.

Docs: ` + docsURL + `store.md`,
		// A parent command accepts any arguments unless told otherwise: a mistyped
		// subcommand must be an error (exit status 1), not the help text and status 0.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", "", "store URL (default $CONDENSE_STORE, else bolt:)")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 30*time.Second, "deadline for each command")
	// storeAt is the store --store names: the flag, else $CONDENSE_STORE, else bolt:.
	storeAt := func() string {
		for _, u := range []string{storeURL, os.Getenv("CONDENSE_STORE")} {
			if u != "" {
				return u
			}
		}
		return "bolt:"
	}
	// using wraps a subcommand body: it opens the store with open under the --timeout
	// deadline, runs body with that deadline's context, then releases the deadline and closes
	// the store.
	using := func(open func(context.Context, string) (store.Store, error),
		body func(ctx context.Context, cmd *cobra.Command, args []string, s store.Store) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			u := storeAt()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			s, err := open(ctx, u)
			if err != nil {
				return fmt.Errorf("open store %s: %w", store.Describe(u), err)
			}
			defer s.Close()
			return body(ctx, cmd, args, s)
		}
	}
	reading := func(body func(ctx context.Context, cmd *cobra.Command, args []string, s store.Store) error) func(*cobra.Command, []string) error {
		return using(store.OpenReadOnly, body)
	}
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List sessions with last-seen time, version, state size, counters and diagnostics",
		Args:  positional(),
		RunE: reading(func(ctx context.Context, cmd *cobra.Command, _ []string, s store.Store) error {
			infos, err := s.List(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(infos)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SESSION\tLAST SEEN\tVERSION\tSTATE BYTES\tREQUESTS\tDIAGNOSTICS")
			for _, in := range infos {
				var diags int64
				for _, n := range in.DiagnosticCounts {
					diags += n
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", in.Session, in.LastSeen.UTC().Format(time.RFC3339),
					in.Version, in.StateBytes, in.Stats[store.StatRequests], diags)
			}
			return w.Flush()
		}),
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	show := &cobra.Command{
		Use:   "show SESSION",
		Short: "Print one session's snapshot as JSON (state included when it is valid JSON, else its size)",
		Args:  positional("SESSION"),
		RunE: reading(func(ctx context.Context, cmd *cobra.Command, args []string, s store.Store) error {
			snap, err := s.Load(ctx, args[0])
			if err != nil {
				return err
			}
			if snap.Version == 0 && snap.LastSeen.IsZero() {
				return fmt.Errorf("%w: session %q in %s", store.ErrNotFound, args[0], store.Describe(storeAt()))
			}
			out := map[string]any{
				"session": snap.Session, "version": snap.Version, "lastSeen": snap.LastSeen,
				"stats": snap.Stats, "diagnostics": snap.Diagnostics, "diagnosticCounts": snap.DiagnosticCounts,
				"lease": snap.Lease, "stateBytes": len(snap.State),
			}
			if json.Valid(snap.State) {
				out["state"] = json.RawMessage(snap.State)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}),
	}
	blob := &cobra.Command{
		Use:   "blob SESSION KEY",
		Short: "Write one blob (decompressed) to stdout",
		Args:  positional("SESSION", "KEY"),
		RunE: reading(func(ctx context.Context, cmd *cobra.Command, args []string, s store.Store) error {
			b, err := s.GetBlob(ctx, args[0], args[1])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		}),
	}
	rm := &cobra.Command{
		Use:   "rm SESSION...",
		Short: "Delete sessions and everything they own",
		Args:  positional("SESSION..."),
		RunE: using(store.Open, func(ctx context.Context, cmd *cobra.Command, args []string, s store.Store) error {
			for _, id := range args {
				if err := s.Delete(ctx, id); err != nil {
					return fmt.Errorf("delete %q: %w", id, err)
				}
			}
			return nil
		}),
	}
	watch := &cobra.Command{
		Use:   "watch",
		Short: "Print change notifications (one JSON object per line) until interrupted",
		Args:  positional(),
		// Watch runs until interrupted: it follows cmd.Context(), not the --timeout deadline.
		RunE: reading(func(_ context.Context, cmd *cobra.Command, _ []string, s store.Store) error {
			events, err := s.Watch(cmd.Context())
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for ev := range events {
				if err := enc.Encode(ev); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	cmd.AddCommand(ls, show, blob, rm, watch)
	return cmd
}

func init() { rootCmd.AddCommand(storeCmd()) }
