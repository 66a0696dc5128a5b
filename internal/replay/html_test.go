package replay_test

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/strategies"
	"github.com/condense-dev/condense/internal/testutil/needs"
)

// chromium returns the headless Chromium binary or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	needs.Missing(t, "chromium not installed (hack/install-chromium.sh installs Debian's chromium): the HTML render check needs it")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// renamed is a strategy under another name: its lines coincide with the original's.
type renamed struct {
	replay.Strategy
	name string
}

func (r renamed) Name() string { return r.name }

// chartTicks parses the tick labels of every line chart in dom ("15k", "$0.02", "1.5M", "0").
func chartTicks(t *testing.T, dom string) [][]float64 {
	t.Helper()
	var out [][]float64
	for _, svg := range regexp.MustCompile(`(?s)<svg[^>]*class="chart"[^>]*>.*?</svg>`).FindAllString(dom, -1) {
		var ticks []float64
		for _, m := range regexp.MustCompile(`class="tick"[^>]*>([^<]*)<`).FindAllStringSubmatch(svg, -1) {
			s, mul := strings.TrimPrefix(m[1], "$"), 1.0
			switch {
			case strings.HasSuffix(s, "k"):
				s, mul = strings.TrimSuffix(s, "k"), 1e3
			case strings.HasSuffix(s, "M"):
				s, mul = strings.TrimSuffix(s, "M"), 1e6
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("tick label %q: %v", m[1], err)
			}
			ticks = append(ticks, v*mul)
		}
		out = append(out, ticks)
	}
	return out
}

// roundSteps reports whether ticks are 0, s, 2s, ... with s = 1, 2 or 5 × 10^n.
func roundSteps(ticks []float64) bool {
	if len(ticks) < 2 || ticks[0] != 0 {
		return false
	}
	s := ticks[1]
	m := s / math.Pow(10, math.Floor(math.Log10(s)+1e-9))
	if math.Abs(m-1) > 1e-6 && math.Abs(m-2) > 1e-6 && math.Abs(m-5) > 1e-6 {
		return false
	}
	for i, v := range ticks {
		if math.Abs(v-float64(i)*s) > 1e-9*math.Max(1, v) {
			return false
		}
	}
	return true
}

// TestHTMLRendersInChromium writes the HTML report of two sessions and four strategies (one
// a renamed copy of none, so its lines coincide with none's), loads it in headless Chromium,
// and checks the DOM Chromium built — every strategy in the totals table and in every chart
// legend, the copy drawn once and labelled "same as none", distinct dash patterns and
// markers for the lines drawn, round tick values — and a screenshot: the charts fill the
// right half of the page beside each other, the lower half is not blank, and every
// strategy's colour shows.
func TestHTMLRendersInChromium(t *testing.T) {
	bin := chromium(t)
	strats := []replay.Strategy{strategies.None{}, strategies.ObservationMask{Window: 0}, strategies.ClearToolUses{Trigger: 100, Keep: 0},
		renamed{strategies.None{}, "copy"}}
	var sess []replay.SessionReport
	for _, name := range []string{"first.jsonl", "second <&> .jsonl"} {
		tr := synthetic()
		tr.File = name
		rep, err := replay.Run(context.Background(), tr, replay.Options{Strategies: strats, Estimator: lenEst{}})
		if err != nil {
			t.Fatal(err)
		}
		sess = append(sess, rep)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.WriteHTML(f, replay.NewReport(sess), "Replay test"); err != nil {
		t.Fatal(err)
	}
	f.Close()

	dom := string(runChromium(t, bin, "--dump-dom", "file://"+page))
	if !strings.Contains(dom, "<h1>Replay test</h1>") || !strings.Contains(dom, "second &lt;&amp;&gt; .jsonl") {
		t.Fatalf("DOM lacks the title or the escaped session name:\n%.2000s", dom)
	}
	if n := len(regexp.MustCompile(`<svg[^>]*class="chart"`).FindAllString(dom, -1)); n != 4 {
		t.Errorf("line charts in DOM: %d, want 4", n)
	}
	if n := strings.Count(dom, `class="legend"`); n != 4*len(strats) {
		t.Errorf("legend entries: %d, want %d", n, 4*len(strats))
	}
	dashOf := map[string]string{}
	for _, st := range strats {
		name := st.Name()
		if n := strings.Count(dom, `<tr class="strategy"><td>`+name+`</td>`); n != 1 {
			t.Errorf("totals row for %s: %d", name, n)
		}
		if !strings.Contains(dom, `class="bar" data-strategy="`+name+`"`) {
			t.Errorf("no cost bar for %s", name)
		}
		lines := regexp.MustCompile(`<polyline class="series" data-strategy="`+regexp.QuoteMeta(name)+`"[^>]*>`).FindAllString(dom, -1)
		if name == "copy" {
			if len(lines) != 0 || strings.Count(dom, ">copy (same as none)<") != 4 {
				t.Errorf("the copy of none: %d lines, %d \"same as none\" legends; want 0 and 4", len(lines), strings.Count(dom, ">copy (same as none)<"))
			}
			continue
		}
		if len(lines) != 4 {
			t.Errorf("polylines for %s: %d, want 4", name, len(lines))
		}
		if n := strings.Count(dom, `<g class="markers" data-strategy="`+name+`">`); n != 4 {
			t.Errorf("marker groups for %s: %d, want 4", name, n)
		}
		if len(lines) > 0 {
			m := regexp.MustCompile(`stroke-dasharray="([^"]*)"`).FindStringSubmatch(lines[0])
			dash := "solid"
			if m != nil {
				dash = m[1]
			}
			for other, d := range dashOf {
				if d == dash {
					t.Errorf("%s and %s share the dash pattern %q", name, other, dash)
				}
			}
			dashOf[name] = dash
		}
	}
	for i, ticks := range chartTicks(t, dom) {
		if !roundSteps(ticks) {
			t.Errorf("chart %d ticks %v are not round steps", i, ticks)
		}
	}

	shot := filepath.Join(dir, "shot.png")
	runChromium(t, bin, "--window-size=1200,1600", "--screenshot="+shot, "file://"+page)
	sf, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	img, err := png.Decode(sf)
	if err != nil {
		t.Fatal(err)
	}
	// Strongly coloured pixels: the strategy colours are saturated; text is grey or black.
	b := img.Bounds()
	var lower, right int
	perColor := map[string]int{}
	palette := map[string][3]uint32{"none": {0x6b, 0x72, 0x80}, "observation-mask": {0x16, 0xa3, 0x4a}, "clear-tool-uses": {0x25, 0x63, 0xeb}, "copy": {0xdc, 0x26, 0x26}}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			for name, c := range palette {
				if absDiff(r, c[0]) < 24 && absDiff(g, c[1]) < 24 && absDiff(bl, c[2]) < 24 {
					perColor[name]++
				}
			}
			if max(r, g, bl)-min(r, g, bl) > 0x60 {
				if y >= b.Max.Y/2 {
					lower++
				}
				if x >= b.Max.X*53/100 {
					right++
				}
			}
		}
	}
	if lower < 400 {
		t.Errorf("screenshot %v: the lower half has %d coloured pixels: blank", b, lower)
	}
	if right < 400 {
		t.Errorf("screenshot %v: the right half has %d coloured pixels: the charts do not sit side by side", b, right)
	}
	for name, n := range perColor {
		if n < 40 {
			t.Errorf("%s's colour shows on %d pixels only", name, n)
		}
	}
	t.Logf("coloured pixels: lower half %d, right half %d; per strategy %v", lower, right, perColor)
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
