package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// usd formats a dollar amount.
func usd(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("$%.0f", v)
	case v >= 1:
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.4f", v)
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

// diagSummary lists diagnostic counts as "kind×n, ...".
func diagSummary(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

var tableHeader = []string{"strategy", "cost", "vs " + "baseline", "input", "cache read", "cache write", "summarizer", "peak ctx", "busts", "invalid", "diagnostics"}

func row(s StrategyReport) []string {
	return []string{s.Name, usd(s.Cost), pct(s.Savings), tok(s.Usage.Input), tok(s.Usage.CacheRead), tok(s.Usage.CacheWrite()),
		usd(s.SummarizerCost), tok(s.PeakContext), fmt.Sprint(s.CacheBusts), fmt.Sprint(s.Invalid), diagSummary(s.DiagnosticCounts)}
}

// WriteTable writes the totals (and, when perSession, each session) as aligned text tables.
func WriteTable(w io.Writer, r *Report, perSession bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := append([]string{}, tableHeader...)
	hdr[2] = "vs " + r.Baseline
	write := func(rows []StrategyReport) {
		fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
		for _, s := range rows {
			fmt.Fprintln(tw, strings.Join(row(s), "\t")+"\t")
		}
	}
	if perSession {
		for _, s := range r.Sessions {
			if s.Error != "" {
				fmt.Fprintf(tw, "%s: error: %s\n\n", s.File, s.Error)
				continue
			}
			fmt.Fprintf(tw, "%s (%s, %s, %d requests, %s)\n", s.File, s.Format, s.Provider, s.Requests, strings.Join(s.Models, ", "))
			write(s.Strategies)
			fmt.Fprintln(tw)
		}
	}
	n, reqs := 0, 0
	for _, s := range r.Sessions {
		if s.Error == "" {
			n++
			reqs += s.Requests
		}
	}
	fmt.Fprintf(tw, "TOTAL: %d sessions, %d requests (cost = agent input side + summarizer calls)\n", n, reqs)
	write(r.Totals)
	return tw.Flush()
}

// WriteMarkdown writes the report as Markdown: totals, then one table per session.
func WriteMarkdown(w io.Writer, r *Report, title string) error {
	var b strings.Builder
	hdr := append([]string{}, tableHeader...)
	hdr[2] = "vs " + r.Baseline
	table := func(rows []StrategyReport) {
		b.WriteString("| " + strings.Join(hdr, " | ") + " |\n|")
		for i := range hdr {
			if i == 0 || i == len(hdr)-1 {
				b.WriteString("---|")
			} else {
				b.WriteString("---:|")
			}
		}
		b.WriteString("\n")
		for _, s := range rows {
			cells := row(s)
			cells[0] = "`" + cells[0] + "`"
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	n, reqs := 0, 0
	var errs []string
	for _, s := range r.Sessions {
		if s.Error != "" {
			errs = append(errs, fmt.Sprintf("- `%s`: %s", s.File, s.Error))
			continue
		}
		n++
		reqs += s.Requests
	}
	fmt.Fprintf(&b, "%d sessions, %d requests. Cost is the agent's input side (uncached input, cache reads and writes under the "+
		"prompt-cache model of [docs/cost-model.md](../cost-model.md)) plus summarizer calls; the agent's own output "+
		"tokens are the same for every strategy and left out. \"vs %s\" is the cost change against that strategy "+
		"(negative = cheaper). busts = requests that broke a live cached prefix; invalid = rewritten requests a provider "+
		"would reject.\n\n## Whole corpus\n\n", n, reqs, r.Baseline)
	table(r.Totals)
	if len(errs) > 0 {
		b.WriteString("\nNot replayed:\n\n" + strings.Join(errs, "\n") + "\n")
	}
	b.WriteString("\n## Per session\n")
	for _, s := range r.Sessions {
		if s.Error != "" {
			continue
		}
		fmt.Fprintf(&b, "\n### `%s`\n\n%s, %s requests, %d requests, models: %s; agent output %s tokens (%s, same for all).\n\n",
			s.File, s.Format, s.Provider, s.Requests, strings.Join(s.Models, ", "), tok(s.OutputTokens), usd(s.OutputCost))
		table(s.Strategies)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
