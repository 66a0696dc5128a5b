package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// ErrNothingReplayed is returned by the table and Markdown writers for a report without a
// single replayed session: there is nothing to tabulate.
var ErrNothingReplayed = errors.New("replay: no session could be replayed")

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// usd formats a dollar amount with two decimals ("<$0.01" below a cent, but not zero).
func usd(v float64) string {
	if v > 0 && v < 0.005 {
		return "<$0.01"
	}
	return fmt.Sprintf("$%.2f", v)
}

// tok formats a token count with thousands separators.
func tok(n int64) string {
	s := fmt.Sprintf("%d", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// pct formats a savings fraction as a cost change ("-42.0%" = 42% cheaper).
func pct(v float64) string {
	if math.Abs(v) < 0.0005 {
		return "0.0%"
	}
	return fmt.Sprintf("%+.1f%%", -v*100)
}

// share formats n out of total as a percentage ("-" when total is 0).
func share(n, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

// plural writes "1 session", "2 sessions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return tok(int64(n)) + " " + noun + "s"
}

// diagSummary lists diagnostic counts as "kind×n, ...".
func diagSummary(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diagnosticMeaning explains the diagnostic kinds a report can show.
var diagnosticMeaning = map[string]string{
	"flush":                  "a flush committed (at a final reply of the agent)",
	"flush-deferred":         "a due flush the cache-aware policy postponed (not yet worth its cache rewrite)",
	"flush-mid-run":          "a flush committed inside a long agent run",
	"flush-mid-run-deferred": "a mid-run flush the cache-aware policy postponed",
	"unresolved-range":       "a compressed chain whose boundaries no longer resolved; left uncompressed",
	"range-id-mismatch":      "a compressed chain whose tool calls changed; left uncompressed",
	"orphan-sweep":           "tool results without their call were removed",
	"backfill-empty":         "an uncovered chain had nothing to compress",
	"render-fallback":        "a render that would have been invalid; the request went out unpruned",
	"summarizer-error":       "a summarizer call failed; its batch stayed verbatim",
	"clear-below-minimum":    "clear-tool-uses skipped an activation below --clear-at-least",
	"strategy-error":         "the strategy failed on a request; the original was billed",
	"invalid-request":        "a rewritten request a provider would reject",
	"unbillable-request":     "a rewrite that could not be read; the original was billed",
}

// diagnosticLegend explains the kinds present in rows, one "kind: meaning" per entry.
func diagnosticLegend(rows []StrategyReport) []string {
	seen := map[string]bool{}
	for _, s := range rows {
		for k := range s.DiagnosticCounts {
			seen[k] = true
		}
	}
	kinds := sortedKeys(seen)
	out := make([]string, len(kinds))
	for i, k := range kinds {
		m := diagnosticMeaning[k]
		if m == "" {
			m = "see docs/replay.md"
		}
		out[i] = k + ": " + m
	}
	return out
}

// table is one table of a report: a header and rows of cells. The first left columns and,
// when last is set, the last column are text (left-aligned); the others are numbers.
type table struct {
	header []string
	rows   [][]string
	left   int
	last   bool
}

// costTable is a report's cost table: the charged cost, its change against the baseline, the
// median per-session change (whole runs only), the recovery charge and the billing detail.
func costTable(rows []StrategyReport, dist []Distribution, baseline string) table {
	t := table{header: []string{"strategy", "cost", "vs " + baseline}, left: 1, last: true}
	if dist != nil {
		t.header = append(t.header, "median session")
	}
	t.header = append(t.header, "recovery", "summarizer", "input", "cache read", "cache write", "peak ctx", "busts", "invalid", "diagnostics")
	for i, s := range rows {
		r := []string{s.Name, usd(s.Cost), pct(s.Savings)}
		if dist != nil {
			m := "-"
			if i < len(dist) && dist[i].Sessions > 0 {
				m = pct(dist[i].Median)
			}
			r = append(r, m)
		}
		r = append(r, usd(s.RecoveryCost), usd(s.SummarizerCost), tok(s.Usage.Input), tok(s.Usage.CacheRead), tok(s.Usage.CacheWrite()),
			tok(s.PeakContext), fmt.Sprint(s.CacheBusts), fmt.Sprint(s.Invalid), diagSummary(s.DiagnosticCounts))
		t.rows = append(t.rows, r)
	}
	return t
}

// fidelityTable is a report's fidelity table: the uses of earlier tool output by outcome,
// the requests that needed an extra round, and the cost without the recovery charges.
func fidelityTable(rows []StrategyReport, baseline string) table {
	t := table{header: []string{"strategy", "uses", "kept", "recoverable", "lost", "extra requests", "cost uncharged", "vs " + baseline}, left: 1}
	for _, s := range rows {
		f := s.Fidelity
		t.rows = append(t.rows, []string{s.Name, tok(int64(f.Uses)), share(f.Kept, f.Uses), share(f.Recoverable, f.Uses), share(f.Lost, f.Uses),
			fmt.Sprintf("%d (%s)", s.RecoveryRounds, share(s.RecoveryRounds, s.Requests)), usd(s.CostUncharged), pct(s.SavingsUncharged)})
	}
	return t
}

// distributionTable is the per-session cost change of each strategy: median, middle half,
// best and worst session, and how many sessions it made cheaper.
func distributionTable(dist []Distribution) table {
	t := table{header: []string{"strategy", "median", "middle half", "best", "worst", "cheaper in"}, left: 1}
	for _, d := range dist {
		if d.Sessions == 0 {
			t.rows = append(t.rows, []string{d.Name, "-", "-", "-", "-", "-"})
			continue
		}
		t.rows = append(t.rows, []string{d.Name, pct(d.Median), pct(d.P75) + " to " + pct(d.P25), pct(d.Max), pct(d.Min),
			fmt.Sprintf("%d of %d", d.Cheaper, d.Sessions)})
	}
	return t
}

// writeText writes t aligned with spaces, no trailing space on any line.
func (t table) writeText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range append([][]string{t.header}, t.rows...) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// writeMarkdown writes t as a Markdown table, the strategy names as code.
func (t table) writeMarkdown(b *strings.Builder) {
	b.WriteString("| " + strings.Join(t.header, " | ") + " |\n|")
	for i := range t.header {
		if i < t.left || (t.last && i == len(t.header)-1) {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		cells := append([]string{}, r...)
		cells[0] = "`" + cells[0] + "`"
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
}

// replayed counts the sessions and requests replayed without error.
func replayed(r *Report) (sessions, requests int) {
	for _, s := range r.Sessions {
		if s.Error == "" {
			sessions++
			requests += s.Requests
		}
	}
	return sessions, requests
}

const (
	costNote = "cost = the agent's input side (uncached input, prompt-cache reads and writes) + summarizer calls + recovery rounds; " +
		"\"vs %s\" = cost change against it (negative = cheaper); median session = the median of the per-session changes"
	fidelityNote = "uses = salient tokens (paths, identifiers, code and error lines, ...) the agent wrote that it had read only in earlier tool output; " +
		"kept = still visible in the request; recoverable = only in an original context_tree_query returns; lost = gone. " +
		"A request with a use not kept is charged an extra request (extra requests); docs/fidelity.md"
)

// WriteTable writes the totals (and, when perSession, each session first) as aligned text
// tables: cost, what the agent used from earlier tool output, and the per-session spread;
// then what the diagnostics mean and the report's warnings.
func WriteTable(w io.Writer, r *Report, perSession bool) error {
	n, reqs := replayed(r)
	if n == 0 {
		return ErrNothingReplayed
	}
	if perSession {
		for _, s := range r.Sessions {
			if s.Error != "" {
				fmt.Fprintf(w, "%s: error: %s\n\n", s.File, s.Error)
				continue
			}
			fmt.Fprintf(w, "%s (%s, %s, %s, %s)\n", s.File, s.Format, s.Provider, plural(s.Requests, "request"), strings.Join(s.Models, ", "))
			costTable(s.Strategies, nil, r.Baseline).writeText(w)
			fmt.Fprintln(w)
			fidelityTable(s.Strategies, r.Baseline).writeText(w)
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "TOTAL: %s, %s\n", plural(n, "session"), plural(reqs, "request"))
	costTable(r.Totals, r.PerSession, r.Baseline).writeText(w)
	fmt.Fprintf(w, "\nWhat the agent used from earlier tool output:\n")
	fidelityTable(r.Totals, r.Baseline).writeText(w)
	fmt.Fprintf(w, "\nCost change per session vs %s (%s):\n", r.Baseline, plural(n, "session"))
	distributionTable(r.PerSession).writeText(w)
	fmt.Fprintf(w, "\n"+costNote+".\n", r.Baseline)
	fmt.Fprintln(w, fidelityNote+".")
	if legend := diagnosticLegend(r.Totals); len(legend) > 0 {
		fmt.Fprintln(w, "diagnostics:")
		for _, l := range legend {
			fmt.Fprintln(w, "  "+l)
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintln(w, "warning: "+warn)
	}
	return nil
}

// WriteMarkdown writes the report as Markdown: totals, then one table per session.
func WriteMarkdown(w io.Writer, r *Report, title string) error {
	n, reqs := replayed(r)
	if n == 0 {
		return ErrNothingReplayed
	}
	var b strings.Builder
	var errs []string
	for _, s := range r.Sessions {
		if s.Error != "" {
			errs = append(errs, fmt.Sprintf("- `%s`: %s", s.File, s.Error))
		}
	}
	fmt.Fprintf(&b, "# %s\n\nGenerated by `condense replay` (`make bench-corpus` for the shared corpus); see [docs/replay.md](../replay.md).\n\n", title)
	fmt.Fprintf(&b, "%s, %s. Cost is the agent's input side (uncached input, cache reads and writes under the "+
		"prompt-cache model of [docs/cost-model.md](../cost-model.md)) plus summarizer calls plus the recovery rounds the "+
		"fidelity measure charges ([docs/fidelity.md](../fidelity.md)); the agent's own output tokens are the same for every "+
		"strategy and left out. \"vs %s\" is the cost change against that strategy (negative = cheaper); \"median session\" "+
		"is the median of the per-session changes. busts = requests that broke a live cached prefix; invalid = rewritten "+
		"requests a provider would reject.\n\n## Whole corpus\n\n", plural(n, "session"), plural(reqs, "request"), r.Baseline)
	costTable(r.Totals, r.PerSession, r.Baseline).writeMarkdown(&b)
	b.WriteString("\n### What the agent used from earlier tool output\n\nuses = salient tokens (paths, identifiers, code and " +
		"error lines, ...) the agent wrote that it had read only in earlier tool output; kept = still visible in the request " +
		"the strategy sent; recoverable = only in a pruned original that `context_tree_query` returns; lost = removed for good. " +
		"Each request with a use not kept is charged one extra request (extra requests: count and share of all requests).\n\n")
	fidelityTable(r.Totals, r.Baseline).writeMarkdown(&b)
	fmt.Fprintf(&b, "\n### Cost change per session vs %s\n\nOver %s with a baseline cost; middle half = 25th to 75th percentile.\n\n",
		r.Baseline, plural(distSessions(r.PerSession), "session"))
	distributionTable(r.PerSession).writeMarkdown(&b)
	if legend := diagnosticLegend(r.Totals); len(legend) > 0 {
		b.WriteString("\nDiagnostics:\n\n")
		for _, l := range legend {
			k, m, _ := strings.Cut(l, ": ")
			fmt.Fprintf(&b, "- `%s`: %s\n", k, m)
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "\n**Warning**: %s.\n", warn)
	}
	if len(errs) > 0 {
		b.WriteString("\nNot replayed:\n\n" + strings.Join(errs, "\n") + "\n")
	}
	b.WriteString("\n## Per session\n")
	for _, s := range r.Sessions {
		if s.Error != "" {
			continue
		}
		fmt.Fprintf(&b, "\n### `%s`\n\n%s, %s requests, %s, models: %s; agent output %s tokens (%s, same for all).\n\n",
			s.File, s.Format, s.Provider, plural(s.Requests, "request"), strings.Join(s.Models, ", "), tok(s.OutputTokens), usd(s.OutputCost))
		costTable(s.Strategies, nil, r.Baseline).writeMarkdown(&b)
		b.WriteString("\n")
		fidelityTable(s.Strategies, r.Baseline).writeMarkdown(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func distSessions(d []Distribution) int {
	if len(d) == 0 {
		return 0
	}
	return d[0].Sessions
}
