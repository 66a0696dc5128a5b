//go:build loadtest

package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/testutil/redistest"
)

// proxyProc is a `condense proxy` process (and, in jobs mode, a `condense pruner` process)
// started by the load test.
type proxyProc struct {
	url   string // proxy base URL
	pprof string // pprof address ("" unless CONDENSE_LOAD_PROFILE is set)
	dir   string // config, logs and profiles
	// profiling is set with CONDENSE_LOAD_PROFILE: pprof is served, profiles and a per-request
	// CSV are written to dir.
	profiling bool
	procs     []*exec.Cmd
	once      sync.Once
	// started is when the proxy process was started (its runtime's clock starts about then:
	// gctrace times are since then).
	started time.Time
	// pid is the proxy process's.
	pid int
}

// buildCondense builds cmd/condense (or returns CONDENSE_LOAD_BIN).
func buildCondense(t *testing.T) string {
	if b := os.Getenv("CONDENSE_LOAD_BIN"); b != "" {
		return b
	}
	return goBuild(t, "./cmd/condense", "condense")
}

// goBuild builds the repository's package pkg into a temporary binary called name.
func goBuild(t *testing.T, pkg, name string) string {
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startProxyProcess starts `condense proxy` against the fake upstream with the production
// defaults (memory store and in-process extractive flushes, or a real redis-server and a
// `condense pruner` worker when the model's summarizer is "jobs"). CONDENSE_LOAD_CONFIG adds
// members to the configuration document (`"engine":{"trigger":{"mode":"on-demand"}}`);
// CONDENSE_LOAD_PROXY_ENV
// adds environment variables to both processes ("GOGC=200 GODEBUG=gctrace=1"); with
// CONDENSE_LOAD_PROFILE=DIR the proxy serves pprof and its logs and profiles go to DIR.
func startProxyProcess(t *testing.T, m loadModel, upstream string) *proxyProc {
	if m.floor != "" {
		return startFloorProxy(t, m, upstream)
	}
	bin := buildCondense(t)
	p := &proxyProc{dir: os.Getenv("CONDENSE_LOAD_PROFILE")}
	profiling := p.dir != ""
	p.profiling = profiling
	if !profiling {
		p.dir = t.TempDir()
	} else if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	storeURL, extra := "memory:", ""
	if m.summarizer == "jobs" {
		storeURL, extra = redistest.Start(t, nil).URL(), `,"summarizer":{"mode":"jobs"}`
	}
	if more := os.Getenv("CONDENSE_LOAD_CONFIG"); more != "" {
		extra += "," + more
	}
	cfg := fmt.Sprintf(`{"apiVersion":"condense.dev/config/v1","kind":"ProxyConfig","listen":{"proxy":"127.0.0.1:0","metrics":"","health":""},`+
		`"upstreams":{"anthropic":%q,"openai":%q},"store":{"url":%q}%s}`, upstream, upstream+"/v1", storeURL, extra)
	cfgPath := filepath.Join(p.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"proxy", "--config", cfgPath}
	if profiling {
		args = append(args, "--pprof", "127.0.0.1:0")
	}
	addrs := p.start(t, bin, "proxy", args...)
	want := map[string]bool{"proxy": true, "pprof": profiling}
	deadline := time.After(time.Minute)
	for want["proxy"] || want["pprof"] {
		select {
		case a := <-addrs:
			if want[a[0]] {
				want[a[0]] = false
				if a[0] == "proxy" {
					p.url = "http://" + a[1]
				} else {
					p.pprof = "http://" + a[1]
				}
			}
		case <-deadline:
			p.stop()
			t.Fatalf("condense proxy did not start; see %s", filepath.Join(p.dir, "proxy.log"))
		}
	}
	if m.summarizer == "jobs" {
		p.start(t, bin, "pruner", "pruner", "--config", cfgPath)
	}
	return p
}

// startFloorProxy starts hack/floorproxy (mode m.floor) in front of the fake upstream, in
// place of condense, so a run measures what a forwarding-only second hop adds.
func startFloorProxy(t *testing.T, m loadModel, upstream string) *proxyProc {
	p := &proxyProc{dir: t.TempDir()}
	addrs := p.start(t, goBuild(t, "./hack/floorproxy", "floorproxy"), "proxy", "-upstream", upstream, "-mode", m.floor)
	select {
	case a := <-addrs:
		p.url = "http://" + a[1]
	case <-time.After(time.Minute):
		p.stop()
		t.Fatalf("floorproxy did not start; see %s", filepath.Join(p.dir, "proxy.log"))
	}
	return p
}

// start runs bin with args, copies its stderr to DIR/name.log and sends the (what, addr) of
// every "listening" log line.
func (p *proxyProc) start(t *testing.T, bin, name string, args ...string) <-chan [2]string {
	logf, err := os.Create(filepath.Join(p.dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), strings.Fields(os.Getenv("CONDENSE_LOAD_PROXY_ENV"))...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if name == "proxy" {
		p.started = time.Now()
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.procs = append(p.procs, cmd)
	if name == "proxy" {
		p.pid = cmd.Process.Pid
	}
	addrs := make(chan [2]string, 4)
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logf.Write(append(line, '\n'))
			if gjson.GetBytes(line, "msg").Str == "listening" {
				select {
				case addrs <- [2]string{gjson.GetBytes(line, "what").Str, gjson.GetBytes(line, "addr").Str}:
				default:
				}
			}
		}
		_, _ = io.Copy(logf, stderr)
	}()
	return addrs
}

// stop sends SIGTERM to every process (newest first), waits up to 30s each, then kills.
func (p *proxyProc) stop() {
	p.once.Do(func() {
		for i := len(p.procs) - 1; i >= 0; i-- {
			cmd := p.procs[i]
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
	})
}

// profile starts, when CONDENSE_LOAD_PROFILE is set, a CPU profile of the proxy over the
// middle of the run (CONDENSE_LOAD_PROFILE_SECONDS, default 30, after 1/4 of the ramp) and
// returns a function that waits for it and saves the heap profile too.
func (p *proxyProc) profile(t *testing.T, m loadModel) func() {
	if p.pprof == "" {
		return nil
	}
	secs := envInt("CONDENSE_LOAD_PROFILE_SECONDS", 30)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(m.ramp / 4)
		p.fetch(t, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), "cpu.pprof")
	}()
	return func() {
		wg.Wait()
		p.fetch(t, "/debug/pprof/heap", "heap.pprof")
		t.Logf("profiles and logs in %s", p.dir)
	}
}

func (p *proxyProc) fetch(t *testing.T, path, file string) {
	resp, err := http.Get(p.pprof + path)
	if err != nil {
		t.Logf("pprof %s: %v", path, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(p.dir, file))
	if err != nil {
		t.Logf("pprof %s: %v", path, err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// promSample is one scrape of the proxy's /metrics: "name{labels}" → value.
type promSample map[string]float64

func (p *proxyProc) scrape(t *testing.T) promSample {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	s := promSample{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			s[line[:i]] = v
		}
	}
	// Page faults are not among the process metrics: read them from /proc (Linux).
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid)); err == nil {
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 (state): minflt is field 10, majflt 12
			if len(f) > 10 {
				s["proc_minflt"], _ = strconv.ParseFloat(f[7], 64)
				s["proc_majflt"], _ = strconv.ParseFloat(f[9], 64)
			}
		}
	}
	return s
}

// cpuTicks returns the process's CPU time (user + system) in clock ticks, from /proc.
func (p *proxyProc) cpuTicks() (int64, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3: utime is field 14, stime 15
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, true
}

// waitIdle waits until the proxy process has used under 2 % of a CPU over each of two
// consecutive windows of length win (at most max), and returns how long it waited.
func (p *proxyProc) waitIdle(win, max time.Duration) time.Duration {
	t0 := time.Now()
	prev, ok := p.cpuTicks()
	if !ok {
		return 0
	}
	quiet := 0
	for quiet < 2 && time.Since(t0) < max {
		time.Sleep(win)
		cur, _ := p.cpuTicks()
		// Clock ticks are 10 ms (USER_HZ 100): 2 % of win.
		if float64(cur-prev)*10e6 < 0.02*float64(win) {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
	}
	return time.Since(t0)
}

// sum adds the values of every series whose key starts with prefix.
func (s promSample) sum(prefix string) float64 {
	total := 0.0
	for k, v := range s {
		if strings.HasPrefix(k, prefix) {
			total += v
		}
	}
	return total
}

// promSummary reports what the proxy process measured itself between two scrapes: its CPU
// time, garbage collections, flushes and the condense_added_latency_seconds histogram.
func promSummary(before, after promSample, n int) string {
	d := func(k string) float64 { return after[k] - before[k] }
	var b strings.Builder
	cpu := d("process_cpu_seconds_total")
	fmt.Fprintf(&b, "Proxy process: %.1f s CPU (%.2f ms per proxied request), %.0f GCs, max RSS %.0f MB, %.0f minor page faults (%.0f per proxied request), %.0f major; flushes by outcome:",
		cpu, 1000*cpu/math.Max(1, float64(n)), d("go_gc_duration_seconds_count"), after["process_resident_memory_bytes"]/1e6,
		d("proc_minflt"), d("proc_minflt")/math.Max(1, float64(n)), d("proc_majflt"))
	var outcomes []string
	for k := range after {
		if strings.HasPrefix(k, "condense_flushes_total{") {
			outcomes = append(outcomes, k)
		}
	}
	sort.Strings(outcomes)
	for _, k := range outcomes {
		fmt.Fprintf(&b, " %s %.0f", strings.TrimSuffix(strings.TrimPrefix(k, "condense_flushes_total{"), "}"), d(k))
	}
	fmt.Fprintf(&b, "; parse cache at the end %.0f sessions, %.0f MB (heap in use %.0f MB)", after["condense_parse_cache_sessions"],
		after["condense_parse_cache_bytes"]/1e6, after["go_memstats_heap_inuse_bytes"]/1e6)
	if in := d(`condense_request_bytes_total{stage="before"}`); in > 0 {
		fmt.Fprintf(&b, "; forwarded %.0f of %.0f MB received (%.1f %%)", d(`condense_request_bytes_total{stage="after"}`)/1e6, in/1e6,
			100*d(`condense_request_bytes_total{stage="after"}`)/in)
	}
	bs := buckets(before, after, `condense_added_latency_seconds_bucket{endpoint="messages",le="`)
	if len(bs) == 0 || bs[len(bs)-1].cum == 0 {
		return b.String() + "\n"
	}
	total := bs[len(bs)-1].cum
	fmt.Fprintf(&b, ".\n\n`condense_added_latency_seconds` (the proxy's own time before a request goes upstream: read, parse, load, render), %.0f requests:", total)
	for _, q := range []float64{.5, .9, .99, .999} {
		for _, x := range bs {
			if x.cum >= q*total {
				fmt.Fprintf(&b, " p%g ≤ %g ms;", 100*q, 1000*x.le)
				break
			}
		}
	}
	for _, x := range bs {
		if x.le >= .001 && x.le <= .025 {
			fmt.Fprintf(&b, " %.2f%% ≤ %g ms;", 100*x.cum/total, 1000*x.le)
		}
	}
	out := strings.TrimSuffix(b.String(), ";") + ".\n\n"
	// The same time by phase (condense_request_phase_seconds).
	out += "| phase | mean ms | > 1 ms | > 5 ms |\n|---|---:|---:|---:|\n"
	for _, ph := range phaseNames {
		pre := `condense_request_phase_seconds_`
		cnt := d(pre + `count{phase="` + ph + `"}`)
		pb := buckets(before, after, pre+`bucket{phase="`+ph+`",le="`)
		if cnt == 0 || len(pb) == 0 {
			continue
		}
		out += fmt.Sprintf("| %s | %.3f | %.2f%% | %.2f%% |\n", ph, 1000*d(pre+`sum{phase="`+ph+`"}`)/cnt, over(pb, cnt, .001), over(pb, cnt, .005))
	}
	// The relay's own time after the provider's last byte (condense_response_finish_seconds).
	if cnt := d("condense_response_finish_seconds_count"); cnt > 0 {
		fb := buckets(before, after, `condense_response_finish_seconds_bucket{le="`)
		out += fmt.Sprintf("| *after the provider's last byte* (`condense_response_finish_seconds`) | %.3f | %.2f%% | %.2f%% |\n",
			1000*d("condense_response_finish_seconds_sum")/cnt, over(fb, cnt, .001), over(fb, cnt, .005))
	}
	return out
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	le  float64
	cum float64
}

// over returns the share (%) of a histogram's cnt samples above the bucket bound le.
func over(bs []bucket, cnt, le float64) float64 {
	for _, x := range bs {
		if x.le == le {
			return 100 * (cnt - x.cum) / cnt
		}
	}
	return math.NaN()
}

// buckets returns the histogram buckets whose keys start with prefix (up to the le value),
// as counted between two scrapes, in order.
func buckets(before, after promSample, prefix string) []bucket {
	var bs []bucket
	for k := range after {
		if strings.HasPrefix(k, prefix) {
			le, err := strconv.ParseFloat(strings.TrimSuffix(k[len(prefix):], `"}`), 64)
			if err == nil {
				bs = append(bs, bucket{le, after[k] - before[k]})
			}
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	return bs
}
