package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/condense-dev/condense/internal/upstreamfake"
	"github.com/condense-dev/condense/internal/wire"
)

// TestManualFlushServedOnce: two requests that loaded the same snapshot (one admin flush
// request pending) both start the manual flush; the request counts as served once, so the
// next admin flush request is not ignored.
func TestManualFlushServedOnce(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true} })
	msgs, _ := conversation(t, r, "sess-served", false)
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, r)+"/admin/sessions/sess-served/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	ctx := context.Background()
	snap, err := r.st.Load(ctx, "sess-served")
	if err != nil || snap.Stats[statFlushRequested] != 1 {
		t.Fatalf("%v %v", snap.Stats, err)
	}
	body, _ := aParams(msgs).MarshalJSON()
	req, err := wire.Parse(wire.Anthropic, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // as two requests (two replicas) would, from one snapshot
		tn := &turn{f: wire.Anthropic, ep: epMessages, sid: "sess-served", log: r.px.log, hdr: http.Header{}, client: req, view: req, fwd: req, snap: snap, at: time.Now()}
		if trig, _ := r.px.dueTrigger(tn); trig != "manual" {
			t.Fatalf("trigger %q", trig)
		}
		if done := r.px.startFlush(tn, "manual", req, body, flushOpts{}, true); done != nil {
			<-done
		}
	}
	r.px.bg.Wait()
	snap, _ = r.st.Load(ctx, "sess-served")
	if req, served := snap.Stats[statFlushRequested], snap.Stats[statFlushServed]; served != req {
		t.Fatalf("served %d of %d requested flushes", served, req)
	}
}

// TestManualFlushRefusedByLeaseIsNotServed: a manual flush that finds the session's lease
// held by another flusher did not run, so the admin request stays pending and the session's
// next request starts it again.
func TestManualFlushRefusedByLeaseIsNotServed(t *testing.T) {
	r := newRig(t, nil, nil, func(o *Options) { o.Trigger = Trigger{OnDemand: true}; o.FlushWaitTimeout = 0 })
	msgs, c := conversation(t, r, "sess-busy", false)
	ctx := context.Background()
	lease, err := r.st.AcquireLease(ctx, "sess-busy", "another-replica", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := httpDo(t, http.MethodPost, adminURL(t, r)+"/admin/sessions/sess-busy/flush"); code != http.StatusAccepted {
		t.Fatalf("admin flush: %d", code)
	}
	next := func(text string) {
		r.up.Enqueue(upstreamfake.Reply{Text: "ok"})
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(text)))
		m := aTurn(t, c, msgs, false)
		msgs = append(msgs, m.ToParam())
		if v, ok := r.px.flights.Load("sess-busy"); ok { // the flush this request started has ended
			<-v.(<-chan struct{})
		}
		r.px.bg.Wait()
	}
	next("one") // its manual flush finds the lease held
	snap, _ := r.st.Load(ctx, "sess-busy")
	if snap.Stats[statFlushServed] != 0 {
		t.Fatalf("a flush refused by the lease counted as served: %v", snap.Stats)
	}
	if err := r.st.ReleaseLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	next("two") // starts it again, and it runs
	snap, _ = r.st.Load(ctx, "sess-busy")
	if snap.Stats[statFlushServed] != 1 || snap.Version == 0 {
		t.Fatalf("the admin flush never ran: version %d, %v", snap.Version, snap.Stats)
	}
}
