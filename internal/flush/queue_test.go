package flush

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// queuedJSON is a job as it crosses the Redis queue, every field set: the wire form workers of
// every version read, so it must not change.
const queuedJSON = `{"session":"s1","format":"openai","body":"e30=","hash":"abc","trigger":"budget",` +
	`"sessionModel":{"format":"responses","baseURL":"http://up/v1","model":"gpt-5"},` +
	`"enqueued":"2026-01-02T03:04:05Z","attempt":2,"lastError":"boom","planMessages":7,` +
	`"cache":{"at":"2026-01-02T03:04:06Z","lastRequest":"2026-01-02T03:00:00Z","requests":3,"horizon":4,"maxHorizon":9}}`

// TestQueuedJobWireForm: encodeJob writes exactly queuedJSON for the job it holds (dropping
// the session model's credentials), and decodeJob reads it back to that job.
func TestQueuedJobWireForm(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j := &Job{Queued: Queued{Session: "s1", Format: wire.OpenAI, Body: []byte(`{}`), Hash: "abc", Trigger: "budget", SessionModel: &summarize.Endpoint{Format: wire.Responses, BaseURL: "http://up/v1", Model: "gpt-5", APIKey: "secret", Header: http.Header{"X": {"y"}}}, Enqueued: at, Attempt: 2, LastError: "boom", PlanMessages: 7, Cache: &CacheCheck{At: at.Add(time.Second), LastRequest: at.Add(-245 * time.Second), Requests: 3, Horizon: 4, MaxHorizon: 9}}}
	got, err := encodeJob(j)
	if err != nil || got != queuedJSON {
		t.Fatalf("encodeJob = %s, %v\nwant %s", got, err, queuedJSON)
	}
	if j.SessionModel.APIKey != "secret" {
		t.Fatal("encodeJob changed the job's session model")
	}
	back, err := decodeJob(queuedJSON)
	if err != nil {
		t.Fatal(err)
	}
	want := *j
	ep := *j.SessionModel
	ep.APIKey, ep.Header = "", nil
	want.SessionModel = &ep
	if !reflect.DeepEqual(back, &want) {
		t.Fatalf("decodeJob = %+v\nwant %+v", back, &want)
	}
	// A format no worker knows is an invalid job, never retried.
	var je *JobError
	if _, err := decodeJob(strings.Replace(queuedJSON, `"format":"openai"`, `"format":"chat"`, 1)); !errors.As(err, &je) ||
		!strings.Contains(err.Error(), `unknown wire format "chat"`) {
		t.Fatalf("format chat: %v", err)
	}
}
