package replay

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// palette colours strategies by position.
var palette = []string{"#6b7280", "#16a34a", "#2563eb", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#db2777"}

func color(i int) string { return palette[i%len(palette)] }

// chart is one inline SVG line chart.
type chart struct {
	Title  string
	Unit   string
	Series []chartSeries
}

type chartSeries struct {
	Name   string
	Color  string
	Values []float64
}

const (
	chartW, chartH          = 640.0, 260.0
	padL, padR, padT, padB  = 70.0, 10.0, 28.0, 30.0
	plotW, plotH            = chartW - padL - padR, chartH - padT - padB
	legendRowH, legendColW  = 16.0, 150.0
	legendCols              = 4
	legendTop               = chartH + 4
	maxPointsPerSeriesInSVG = 600
	axisLabelSmall          = "font-size:11px"
	titleStyle              = "font-size:13px;font-weight:600"
	gridStroke              = "#e5e7eb"
	axisStroke              = "#9ca3af"
)

func fmtAxis(v float64, unit string) string {
	if unit == "$" {
		return usd(v)
	}
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// svg renders the chart as a standalone inline <svg> element.
func (c chart) svg() template.HTML {
	maxY, maxN := 0.0, 0
	for _, s := range c.Series {
		for _, v := range s.Values {
			maxY = math.Max(maxY, v)
		}
		if len(s.Values) > maxN {
			maxN = len(s.Values)
		}
	}
	if maxY <= 0 {
		maxY = 1
	}
	rows := (len(c.Series) + legendCols - 1) / legendCols
	h := legendTop + float64(rows)*legendRowH + 4
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`,
		chartW, h, chartW, h, template.HTMLEscapeString(c.Title))
	fmt.Fprintf(&b, `<text x="%.0f" y="16" style="%s">%s</text>`, padL, titleStyle, template.HTMLEscapeString(c.Title))
	for i := 0; i <= 4; i++ {
		y := padT + plotH - plotH*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="%s"/>`, padL, y, padL+plotW, y, gridStroke)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" style="%s">%s</text>`, padL-6, y+4, axisLabelSmall,
			template.HTMLEscapeString(fmtAxis(maxY*float64(i)/4, c.Unit)))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s"/>`, padL, padT+plotH, padL+plotW, padT+plotH, axisStroke)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" style="%s">request (1–%d)</text>`, padL+plotW/2, padT+plotH+20, axisLabelSmall, maxN)
	for _, s := range c.Series {
		if len(s.Values) == 0 {
			continue
		}
		var pts strings.Builder
		step := 1
		if len(s.Values) > maxPointsPerSeriesInSVG {
			step = (len(s.Values) + maxPointsPerSeriesInSVG - 1) / maxPointsPerSeriesInSVG
		}
		for i := 0; i < len(s.Values); i += step {
			x := padL
			if maxN > 1 {
				x += plotW * float64(i) / float64(maxN-1)
			}
			y := padT + plotH - plotH*s.Values[i]/maxY
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
		}
		last := len(s.Values) - 1
		if last%step != 0 {
			x := padL + plotW*float64(last)/math.Max(1, float64(maxN-1))
			fmt.Fprintf(&pts, "%.1f,%.1f", x, padT+plotH-plotH*s.Values[last]/maxY)
		}
		fmt.Fprintf(&b, `<polyline class="series" data-strategy="%s" fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`,
			template.HTMLEscapeString(s.Name), s.Color, strings.TrimSpace(pts.String()))
	}
	for i, s := range c.Series {
		x := padL + float64(i%legendCols)*legendColW
		y := legendTop + float64(i/legendCols)*legendRowH + 10
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="4" fill="%s"/>`, x, y-5, s.Color)
		fmt.Fprintf(&b, `<text class="legend" x="%.0f" y="%.0f" style="%s">%s</text>`, x+16, y, axisLabelSmall, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every interpolated string above is escaped
}

type htmlSession struct {
	SessionReport
	Rows   [][]string
	Charts []template.HTML
}

type htmlPage struct {
	Title    string
	Header   []string
	Totals   [][]string
	Bars     template.HTML
	Sessions []htmlSession
	Errors   []SessionReport
	Baseline string
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
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart bars" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="total cost per strategy">`,
		labelW+barW+120, h, labelW+barW+120, h)
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

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#111827;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 16px}th,td{padding:3px 8px;border-bottom:1px solid #e5e7eb;text-align:right;font-size:13px}
th{background:#f9fafb}td:first-child,th:first-child,td:last-child,th:last-child{text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{background:#fff;border:1px solid #e5e7eb;border-radius:4px}
h2{margin-top:32px}h3{margin-top:28px;font-size:16px}.meta{color:#4b5563;font-size:13px}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="meta">Cost = the agent's input side (uncached input, prompt-cache reads and writes) plus summarizer calls. "vs {{.Baseline}}" is the change against that strategy; busts are requests that broke a live cached prefix; invalid counts rewritten requests a provider would reject.</p>
<h2>All sessions</h2>
{{.Bars}}
<table id="totals"><thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Totals}}<tr class="strategy">{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{range .Errors}}<p class="meta">Not replayed: {{.File}}: {{.Error}}</p>{{end}}
{{range .Sessions}}<section class="session">
<h3>{{.File}}</h3>
<p class="meta">{{.Format}}, {{.Provider}} requests, {{.Requests}} requests, models: {{range $i, $m := .Models}}{{if $i}}, {{end}}{{$m}}{{end}}</p>
<table><thead><tr>{{range $.Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
</section>
{{end}}</body></html>
`))

// WriteHTML writes a self-contained HTML page: the totals table and a cost bar chart, then per
// session a table and two inline SVG charts (context size per request, cumulative cost per
// request), one line per strategy.
func WriteHTML(w io.Writer, r *Report, title string) error {
	hdr := append([]string{}, tableHeader...)
	hdr[2] = "vs " + r.Baseline
	page := htmlPage{Title: title, Header: hdr, Bars: barChart(r.Totals), Baseline: r.Baseline}
	for _, s := range r.Totals {
		page.Totals = append(page.Totals, row(s))
	}
	for _, s := range r.Sessions {
		if s.Error != "" {
			page.Errors = append(page.Errors, s)
			continue
		}
		hs := htmlSession{SessionReport: s}
		ctxChart := chart{Title: "Context size per request (tokens)", Unit: "tokens"}
		costChart := chart{Title: "Cumulative cost per request (USD)", Unit: "$"}
		for i, st := range s.Strategies {
			hs.Rows = append(hs.Rows, row(st))
			cs := chartSeries{Name: st.Name, Color: color(i)}
			ks := chartSeries{Name: st.Name, Color: color(i)}
			for _, p := range st.Series {
				cs.Values = append(cs.Values, float64(p.Context))
				ks.Values = append(ks.Values, p.Cost)
			}
			ctxChart.Series = append(ctxChart.Series, cs)
			costChart.Series = append(costChart.Series, ks)
		}
		hs.Charts = []template.HTML{ctxChart.svg(), costChart.svg()}
		page.Sessions = append(page.Sessions, hs)
	}
	return pageTmpl.Execute(w, page)
}
