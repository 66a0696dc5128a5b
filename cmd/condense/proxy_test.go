package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestServePprof starts the opt-in profiler listener, finds its address in the log line and
// fetches the profile index and the command line from it.
func TestServePprof(t *testing.T) {
	var logs bytes.Buffer
	closePprof, err := servePprof("127.0.0.1:0", slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closePprof()
	line := logs.Bytes()
	if gjson.GetBytes(line, "what").Str != "pprof" {
		t.Fatalf("log line %s", line)
	}
	base := "http://" + gjson.GetBytes(line, "addr").Str
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/cmdline": ".test"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d %.200s", path, resp.StatusCode, body)
		}
	}
	if _, err := servePprof("256.0.0.1:0", slog.New(slog.NewJSONHandler(io.Discard, nil))); err == nil {
		t.Fatal("servePprof on a bad address succeeded")
	}
}
