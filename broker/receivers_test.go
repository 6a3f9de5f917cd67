package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestReceiversWindow: a receiver is kept per access key, host and
// User-Agent (another port of the same host is the same one), counts its
// receives and messages, and goes 5 minutes after its latest receive; an
// in-process call is not recorded.
func TestReceiversWindow(t *testing.T) {
	t.Parallel()
	var r receivers
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := WithCaller(context.Background(), Caller{Addr: "10.0.0.1:5000", AccessKey: "K1", UserAgent: "w"})
	a2 := WithCaller(context.Background(), Caller{Addr: "10.0.0.1:5001", AccessKey: "K1", UserAgent: "w"})
	b := WithCaller(context.Background(), Caller{Addr: "10.0.0.2:5000", AccessKey: "K2", UserAgent: "w"})
	r.seen(a, "q", 3, t0)
	r.seen(a2, "q", 0, t0.Add(time.Second))
	r.seen(b, "q", 1, t0.Add(2*time.Second))
	r.seen(context.Background(), "q", 5, t0.Add(2*time.Second))
	got := r.of("q", t0.Add(3*time.Second))
	if len(got) != 2 || got[0].AccessKey != "K2" || got[1].AccessKey != "K1" || got[1].Receives != 2 || got[1].Received != 3 || got[1].Addr != "10.0.0.1:5001" {
		t.Fatalf("receivers %+v", got)
	}
	// K1's latest receive was at t0+1s: 5 minutes later it is gone, K2 not yet.
	got = r.of("q", t0.Add(time.Second+ReceiverWindow+time.Millisecond))
	if len(got) != 1 || got[0].AccessKey != "K2" {
		t.Fatalf("after the window: %+v", got)
	}
	r.forget("q")
	if got := r.of("q", t0); len(got) != 0 {
		t.Fatalf("after forget: %+v", got)
	}
}

// TestReceiversBounded: a receiver's User-Agent and access key are kept
// cut to maxReceiverField bytes (a header may hold 64 KiB and more, 100
// times per queue), and the receivers of a queue nobody asks about go once
// their window has passed (they stayed until the queue's receivers were
// read or the queue deleted).
func TestReceiversBounded(t *testing.T) {
	t.Parallel()
	var r receivers
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("é", 40000)
	r.seen(WithCaller(context.Background(), Caller{Addr: "10.0.0.1:5000", AccessKey: long, UserAgent: long}), "q", 1, t0)
	got := r.of("q", t0)
	if len(got) != 1 || len(got[0].UserAgent) > maxReceiverField || len(got[0].AccessKey) > maxReceiverField ||
		!utf8.ValidString(got[0].UserAgent) || !strings.HasPrefix(long, got[0].UserAgent) {
		t.Fatalf("a long User-Agent and access key kept as %d and %d bytes", len(got[0].UserAgent), len(got[0].AccessKey))
	}
	for i := range 1000 {
		r.seen(WithCaller(context.Background(), Caller{Addr: "10.0.0.1:5000", UserAgent: "w"}), fmt.Sprint("q", i), 1, t0)
	}
	r.seen(WithCaller(context.Background(), Caller{Addr: "10.0.0.1:5000", UserAgent: "w"}), "other", 1, t0.Add(ReceiverWindow+2*time.Minute))
	r.mu.Lock()
	n := len(r.byQueue)
	r.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d queues' receivers kept after their window, want 1", n)
	}
}
