// Command floorproxy is `make loadtest`'s baseline proxy (docs/performance.md): it forwards each
// request to -upstream with condense's transport and relays the answer unparsed (-mode buffer: whole
// bodies; stream: httputil.ReverseProxy), logs {"msg":"listening",...} to stderr and serves /metrics.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/condense-dev/condense/internal/proxy"
)

func main() {
	upstream := flag.String("upstream", "", "upstream base URL (required)")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	mode := flag.String("mode", "buffer", "buffer (whole bodies) or stream (httputil.ReverseProxy)")
	flag.Parse()
	if err := run(*upstream, *listen, *mode); err != nil {
		fmt.Fprintln(os.Stderr, "floorproxy:", err)
		os.Exit(1)
	}
}

func run(upstream, listen, mode string) error {
	target, err := url.Parse(upstream)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return fmt.Errorf("-upstream %q is not an absolute URL", upstream)
	}
	tr := proxy.NewUpstreamTransport()

	var fwd http.Handler
	switch mode {
	case "buffer":
		fwd = &buffered{target: target, client: &http.Client{Transport: tr}}
	case "stream":
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.Transport = tr
		rp.FlushInterval = -1
		fwd = rp
	default:
		return fmt.Errorf("-mode %q: want buffer or stream", mode)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", fwd)

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]string{"msg": "listening", "what": "proxy", "addr": ln.Addr().String(), "mode": mode})
	fmt.Fprintln(os.Stderr, string(line))

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// buffered forwards a request once its whole body has been read and relays the response once
// its whole body has arrived.
type buffered struct {
	target *url.URL
	client *http.Client
}

func (b *buffered) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
	_, err := buf.ReadFrom(r.Body)
	body := buf.Bytes()
	if err != nil {
		http.Error(w, "floorproxy: read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	u := *b.target
	u.Path, u.RawQuery = b.target.JoinPath(r.URL.Path).Path, r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "floorproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := b.client.Do(out)
	if err != nil {
		http.Error(w, "floorproxy: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "floorproxy: read response: "+err.Error(), http.StatusBadGateway)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}
