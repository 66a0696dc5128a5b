package replay_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
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

// TestHTMLRendersInChromium writes the HTML report of two sessions and three strategies, loads
// it in headless Chromium, and checks the DOM Chromium built (every strategy in the totals
// table and in every chart legend, one polyline per strategy per chart) and that the
// screenshot is not blank.
func TestHTMLRendersInChromium(t *testing.T) {
	bin := chromium(t)
	strats := []replay.Strategy{strategies.None{}, strategies.ObservationMask{Window: 0}, strategies.ClearToolUses{Trigger: 100, Keep: 0}}
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
	for _, st := range strats {
		name := st.Name()
		// Totals table row, bar, and one polyline per chart (2 sessions × 2 charts).
		if n := strings.Count(dom, `<tr class="strategy"><td>`+name+`</td>`); n != 1 {
			t.Errorf("totals row for %s: %d", name, n)
		}
		if n := strings.Count(dom, `class="series" data-strategy="`+name+`"`); n != 4 {
			t.Errorf("polylines for %s: %d, want 4", name, n)
		}
		if n := strings.Count(dom, `class="legend"`); n != 4*len(strats) {
			t.Errorf("legend entries: %d", n)
		}
		if !strings.Contains(dom, `class="bar" data-strategy="`+name+`"`) {
			t.Errorf("no cost bar for %s", name)
		}
	}
	if n := len(regexp.MustCompile(`<svg[^>]*class="chart"`).FindAllString(dom, -1)); n != 4 {
		t.Errorf("line charts in DOM: %d, want 4", n)
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
	// Count strongly coloured pixels (the strategy colours are saturated; text is grey/black).
	colored := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			mx, mn := max(r, g, bl), min(r, g, bl)
			if mx-mn > 0x6000 {
				colored++
			}
		}
	}
	if colored < 200 {
		t.Fatalf("screenshot %v has only %d coloured pixels: charts not drawn", b, colored)
	}
}
