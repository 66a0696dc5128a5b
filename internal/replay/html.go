package replay

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// palette colours strategies by position; dashes and markers tell them apart where lines
// overlap (and without colour).
var (
	palette = []string{"#6b7280", "#16a34a", "#2563eb", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#db2777"}
	dashes  = []string{"", "7 3", "2 3", "9 3 2 3", "4 4", "1 4", "12 4", "6 2 2 2"}
	markers = []string{"circle", "square", "triangle", "diamond", "cross", "down", "plus", "bar"}
)

func color(i int) string { return palette[i%len(palette)] }

// chart is one inline SVG line chart.
type chart struct {
	Title  string
	Unit   string
	Series []chartSeries
}

type chartSeries struct {
	Name   string
	Index  int // the strategy's position: its colour, dash and marker
	Values []float64
}

const (
	chartW, chartH          = 560.0, 250.0
	padL, padR, padT, padB  = 64.0, 12.0, 28.0, 30.0
	plotW, plotH            = chartW - padL - padR, chartH - padT - padB
	legendRowH, legendColW  = 18.0, 240.0
	legendCols              = 2
	legendTop               = chartH + 2
	maxPointsPerSeriesInSVG = 600
	markersPerSeries        = 8
	axisLabelSmall          = "font-size:11px"
	titleStyle              = "font-size:13px;font-weight:600"
	gridStroke              = "#e5e7eb"
	axisStroke              = "#9ca3af"
)

// niceTicks returns 3 to 6 round tick values from 0 covering max: a step of 1, 2 or 5 times
// a power of ten, and the decimals that step needs.
func niceTicks(max float64) (ticks []float64, decimals int) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		max = 1
	}
	raw := max / 4
	exp := math.Floor(math.Log10(raw))
	base := math.Pow(10, exp)
	step := base
	for _, m := range []float64{1, 2, 5, 10} {
		if m*base >= raw {
			step = m * base
			break
		}
	}
	if step >= 10*base { // the step is the next power of ten
		exp++
	}
	decimals = int(math.Max(0, -exp))
	for i := 0; ; i++ {
		v := float64(i) * step
		ticks = append(ticks, v)
		if v >= max-step*1e-9 {
			return ticks, decimals
		}
	}
}

// fmtAxis formats a tick value v of an axis whose ticks are step apart.
func fmtAxis(v, step float64, decimals int, unit string) string {
	if v == 0 && unit != "$" {
		return "0"
	}
	if unit == "$" {
		return fmt.Sprintf("$%.*f", decimals, v)
	}
	switch {
	case step >= 1e6 || v >= 1e6 && step >= 1e5:
		return trimZeros(fmt.Sprintf("%.*f", max(0, decimals-6), v/1e6)) + "M"
	case step >= 1e3:
		return trimZeros(fmt.Sprintf("%.*f", max(0, decimals-3), v/1e3)) + "k"
	}
	return fmt.Sprintf("%.*f", decimals, v)
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// marker draws marker shape i at (x, y).
func marker(b *strings.Builder, i int, x, y float64, c string) {
	const r = 3.5
	switch markers[i%len(markers)] {
	case "circle":
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`, x, y, r, c)
	case "square":
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x-r, y-r, 2*r, 2*r, c)
	case "triangle":
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r-1, x+r+1, y+r, x-r-1, y+r, c)
	case "down":
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y+r+1, x+r+1, y-r, x-r-1, y-r, c)
	case "diamond":
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>`, x, y-r-1, x+r+1, y, x, y+r+1, x-r-1, y, c)
	case "cross":
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2"/>`, x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r, c)
	case "plus":
		fmt.Fprintf(b, `<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2"/>`, x-r, y, x+r, y, x, y-r, x, y+r, c)
	default:
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x-1.5, y-r-1, 3.0, 2*r+2, c)
	}
}

// sameValues reports whether two series are equal point for point (to 1e-9 relative).
func sameValues(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(a[i])) {
			return false
		}
	}
	return true
}

// svg renders the chart as a standalone inline <svg>: round ticks, one line per strategy with
// its colour, dash and staggered markers; a series equal to an earlier one is drawn once, its
// legend entry saying "same as" the other.
func (c chart) svg() template.HTML {
	maxY, maxN := 0.0, 0
	for _, s := range c.Series {
		for _, v := range s.Values {
			maxY = math.Max(maxY, v)
		}
		maxN = max(maxN, len(s.Values))
	}
	ticks, dec := niceTicks(maxY)
	top := ticks[len(ticks)-1]
	step := ticks[1] - ticks[0]
	same := make([]int, len(c.Series))
	for i := range c.Series {
		same[i] = -1
		for j := 0; j < i; j++ {
			if same[j] < 0 && len(c.Series[i].Values) > 0 && sameValues(c.Series[i].Values, c.Series[j].Values) {
				same[i] = j
				break
			}
		}
	}
	rows := (len(c.Series) + legendCols - 1) / legendCols
	h := legendTop + float64(rows)*legendRowH + 6
	xOf := func(i int) float64 {
		if maxN <= 1 {
			return padL
		}
		return padL + plotW*float64(i)/float64(maxN-1)
	}
	yOf := func(v float64) float64 { return padT + plotH - plotH*v/top }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`,
		chartW, h, template.HTMLEscapeString(c.Title))
	fmt.Fprintf(&b, `<text x="%.0f" y="16" style="%s">%s</text>`, padL, titleStyle, template.HTMLEscapeString(c.Title))
	for _, v := range ticks {
		y := yOf(v)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="%s"/>`, padL, y, padL+plotW, y, gridStroke)
		fmt.Fprintf(&b, `<text class="tick" x="%.0f" y="%.1f" text-anchor="end" style="%s">%s</text>`, padL-6, y+4, axisLabelSmall,
			template.HTMLEscapeString(fmtAxis(v, step, dec, c.Unit)))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s"/>`, padL, padT+plotH, padL+plotW, padT+plotH, axisStroke)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" style="%s">request (1–%d)</text>`, padL+plotW/2, padT+plotH+20, axisLabelSmall, maxN)
	for k, s := range c.Series {
		if len(s.Values) == 0 || same[k] >= 0 {
			continue
		}
		var pts strings.Builder
		stride := 1
		if len(s.Values) > maxPointsPerSeriesInSVG {
			stride = (len(s.Values) + maxPointsPerSeriesInSVG - 1) / maxPointsPerSeriesInSVG
		}
		for i := 0; i < len(s.Values); i += stride {
			fmt.Fprintf(&pts, "%.1f,%.1f ", xOf(i), yOf(s.Values[i]))
		}
		if last := len(s.Values) - 1; last%stride != 0 {
			fmt.Fprintf(&pts, "%.1f,%.1f", xOf(last), yOf(s.Values[last]))
		}
		dash := ""
		if d := dashes[s.Index%len(dashes)]; d != "" {
			dash = ` stroke-dasharray="` + d + `"`
		}
		fmt.Fprintf(&b, `<polyline class="series" data-strategy="%s" fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`,
			template.HTMLEscapeString(s.Name), color(s.Index), dash, strings.TrimSpace(pts.String()))
		// Markers at evenly spaced points, each series shifted by its index.
		fmt.Fprintf(&b, `<g class="markers" data-strategy="%s">`, template.HTMLEscapeString(s.Name))
		n := len(s.Values)
		for m := 0; m < markersPerSeries && n > 1; m++ {
			pos := (float64(m) + (float64(s.Index%len(markers))+0.5)/float64(len(markers))) / markersPerSeries
			i := min(n-1, int(pos*float64(n-1)+0.5))
			marker(&b, s.Index, xOf(i), yOf(s.Values[i]), color(s.Index))
		}
		if n == 1 {
			marker(&b, s.Index, xOf(0), yOf(s.Values[0]), color(s.Index))
		}
		b.WriteString(`</g>`)
	}
	for i, s := range c.Series {
		x := padL + float64(i%legendCols)*legendColW
		y := legendTop + float64(i/legendCols)*legendRowH + 12
		dash := ""
		if d := dashes[s.Index%len(dashes)]; d != "" {
			dash = ` stroke-dasharray="` + d + `"`
		}
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="1.8"%s/>`, x, y-4, x+26, y-4, color(s.Index), dash)
		marker(&b, s.Index, x+13, y-4, color(s.Index))
		label := s.Name
		if j := same[i]; j >= 0 {
			label += " (same as " + c.Series[j].Name + ")"
		}
		fmt.Fprintf(&b, `<text class="legend" x="%.0f" y="%.0f" style="%s">%s</text>`, x+32, y, axisLabelSmall, template.HTMLEscapeString(label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every interpolated string above is escaped
}

// barChart renders total cost per strategy as horizontal bars.
func barChart(rows []StrategyReport) template.HTML {
	maxC := 0.0
	for _, s := range rows {
		maxC = math.Max(maxC, s.Cost)
	}
	if maxC <= 0 {
		maxC = 1
	}
	const rowH, labelW, barW = 26.0, 150.0, 380.0
	h := rowH*float64(len(rows)) + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart bars" viewBox="0 0 %.0f %.0f" role="img" aria-label="total cost per strategy">`,
		labelW+barW+130, h)
	for i, s := range rows {
		y := 4 + float64(i)*rowH
		w := barW * s.Cost / maxC
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" style="font-size:12px">%s</text>`, labelW-8, y+15, template.HTMLEscapeString(s.Name))
		fmt.Fprintf(&b, `<rect class="bar" data-strategy="%s" x="%.0f" y="%.0f" width="%.1f" height="18" fill="%s"/>`,
			template.HTMLEscapeString(s.Name), labelW, y+2, math.Max(w, 1), color(i))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" style="font-size:12px">%s (%s)</text>`, labelW+math.Max(w, 1)+6, y+15,
			template.HTMLEscapeString(usd(s.Cost)), template.HTMLEscapeString(pct(s.Savings)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// spreadChart renders the per-session cost change of every strategy: one row per strategy,
// a dot per session, the middle half as a band and the median as a bar.
func spreadChart(dist []Distribution) template.HTML {
	lo, hi := 0.0, 0.0
	for _, d := range dist {
		for _, s := range d.Savings {
			lo, hi = math.Min(lo, -s), math.Max(hi, -s)
		}
	}
	// Round the cost-change axis out to whole 10 % steps (50 % when it spans more than 150 %).
	step := 0.1
	if hi-lo > 1.5 {
		step = 0.5
	}
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	if hi-lo < step {
		hi = lo + step
	}
	const rowH, labelW, axisW, top = 26.0, 150.0, 420.0, 22.0
	h := top + rowH*float64(len(dist)) + 26
	xOf := func(v float64) float64 { return labelW + axisW*(v-lo)/(hi-lo) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart spread" viewBox="0 0 %.0f %.0f" role="img" aria-label="cost change per session">`,
		labelW+axisW+20, h)
	for v := lo; v <= hi+step/2; v += step {
		x := xOf(v)
		label := fmt.Sprintf("%+.0f%%", v*100)
		if math.Abs(v) < step/100 {
			label = "0%"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s"/>`, x, top-6, x, h-22, gridStroke)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.0f" text-anchor="middle" style="%s">%s</text>`, x, h-8, axisLabelSmall, label)
	}
	zero := xOf(0)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s" stroke-width="1.5"/>`, zero, top-6, zero, h-22, axisStroke)
	for i, d := range dist {
		y := top + float64(i)*rowH + rowH/2
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" style="font-size:12px">%s</text>`, labelW-8, y+4, template.HTMLEscapeString(d.Name))
		if d.Sessions == 0 {
			continue
		}
		fmt.Fprintf(&b, `<rect class="middle-half" x="%.1f" y="%.0f" width="%.1f" height="12" fill="%s" opacity="0.18"/>`,
			xOf(-d.P75), y-6, math.Max(1, xOf(-d.P25)-xOf(-d.P75)), color(i))
		for _, s := range d.Savings {
			fmt.Fprintf(&b, `<circle class="session" data-strategy="%s" cx="%.1f" cy="%.0f" r="3" fill="%s" opacity="0.7"/>`,
				template.HTMLEscapeString(d.Name), xOf(-s), y, color(i))
		}
		fmt.Fprintf(&b, `<rect class="median" data-strategy="%s" x="%.1f" y="%.0f" width="3" height="18" fill="#111827"/>`,
			template.HTMLEscapeString(d.Name), xOf(-d.Median)-1.5, y-9)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

type htmlTable struct {
	Header []string
	Rows   [][]string
}

func htmlOf(t table) htmlTable { return htmlTable{Header: t.header, Rows: t.rows} }

type htmlSession struct {
	SessionReport
	Cost, Fidelity htmlTable
	Charts         []template.HTML
}

type htmlPage struct {
	Title                    string
	Baseline                 string
	Sessions                 int
	Cost, Fidelity, Spread   htmlTable
	Bars, SpreadChart        template.HTML
	Legend, Warnings         []string
	Reports                  []htmlSession
	Errors                   []SessionReport
	CostNote, FidelityNote   string
	SessionNoun, RequestNoun string
}

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#111827;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 16px}th,td{padding:3px 8px;border-bottom:1px solid #e5e7eb;text-align:right;font-size:13px}
th{background:#f9fafb}td:first-child,th:first-child,.cost td:last-child,.cost th:last-child{text-align:left}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:12px;align-items:start}
.chart{background:#fff;border:1px solid #e5e7eb;border-radius:4px;width:100%;height:auto;display:block}
.bars,.spread{max-width:680px}
h2{margin-top:32px}h3{margin-top:28px;font-size:16px}.meta{color:#4b5563;font-size:13px}.warn{color:#b45309;font-size:13px}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="meta">{{.SessionNoun}}, {{.RequestNoun}}. {{.CostNote}}</p>
{{range .Warnings}}<p class="warn">Warning: {{.}}</p>{{end}}
<h2>All sessions</h2>
<div class="charts">{{.Bars}}{{.SpreadChart}}</div>
<table id="totals" class="cost"><thead><tr>{{range .Cost.Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Cost.Rows}}<tr class="strategy">{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
<h3>What the agent used from earlier tool output</h3>
<p class="meta">{{.FidelityNote}}</p>
<table id="fidelity"><thead><tr>{{range .Fidelity.Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Fidelity.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
<h3>Cost change per session vs {{.Baseline}}</h3>
<table id="spread"><thead><tr>{{range .Spread.Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Spread.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{if .Legend}}<p class="meta">Diagnostics: {{range $i, $l := .Legend}}{{if $i}}; {{end}}{{$l}}{{end}}.</p>{{end}}
{{range .Errors}}<p class="meta">Not replayed: {{.File}}: {{.Error}}</p>{{end}}
{{range .Reports}}<section class="session">
<h3>{{.File}}</h3>
<p class="meta">{{.Format}}, {{.Provider}} requests, {{.Requests}} requests, models: {{range $i, $m := .Models}}{{if $i}}, {{end}}{{$m}}{{end}}</p>
<table class="cost"><thead><tr>{{range .Cost.Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Cost.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
<table><thead><tr>{{range .Fidelity.Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Fidelity.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
</section>
{{end}}</body></html>
`))

// WriteHTML writes a self-contained HTML page: the totals (cost bars, the per-session spread,
// the cost, fidelity and spread tables), then per session its tables and two inline SVG
// charts (context size per request, cumulative cost per request), one line per strategy.
func WriteHTML(w io.Writer, r *Report, title string) error {
	n, reqs := replayed(r)
	page := htmlPage{Title: title, Baseline: r.Baseline, Sessions: n,
		Cost: htmlOf(costTable(r.Totals, r.PerSession, r.Baseline)), Fidelity: htmlOf(fidelityTable(r.Totals, r.Baseline)),
		Spread: htmlOf(distributionTable(r.PerSession)), Bars: barChart(r.Totals), SpreadChart: spreadChart(r.PerSession),
		Legend: diagnosticLegend(r.Totals), Warnings: r.Warnings,
		CostNote: fmt.Sprintf(costNote+".", r.Baseline), FidelityNote: fidelityNote + ".",
		SessionNoun: plural(n, "session"), RequestNoun: plural(reqs, "request")}
	for _, s := range r.Sessions {
		if s.Error != "" {
			page.Errors = append(page.Errors, s)
			continue
		}
		hs := htmlSession{SessionReport: s, Cost: htmlOf(costTable(s.Strategies, nil, r.Baseline)), Fidelity: htmlOf(fidelityTable(s.Strategies, r.Baseline))}
		ctxChart := chart{Title: "Context size per request (tokens)", Unit: "tokens"}
		costChart := chart{Title: "Cumulative cost per request (USD)", Unit: "$"}
		for i, st := range s.Strategies {
			cs := chartSeries{Name: st.Name, Index: i}
			ks := chartSeries{Name: st.Name, Index: i}
			for _, p := range st.Series {
				cs.Values = append(cs.Values, float64(p.Context))
				ks.Values = append(ks.Values, p.Cost)
			}
			ctxChart.Series = append(ctxChart.Series, cs)
			costChart.Series = append(costChart.Series, ks)
		}
		hs.Charts = []template.HTML{ctxChart.svg(), costChart.svg()}
		page.Reports = append(page.Reports, hs)
	}
	return pageTmpl.Execute(w, page)
}
