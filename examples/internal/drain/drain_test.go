package drain

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestWait: Wait prints the counts when they change and returns once the
// queue is empty; a deadline first ends it with what the queue holds and
// how to look at it, instead of waiting for ever.
func TestWait(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, testbroker.Config{})
	c, err := client.New(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	if _, err := c.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Send(ctx, "q", client.Message{Body: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody consumes: the wait ends only when its context does, and says
	// what the queue held.
	var out testutil.Buffer
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- Wait(stop, c, "q", 10*time.Millisecond, &out) }()
	testutil.Eventually(t, 20*time.Second, "a progress line", func() bool { return strings.Contains(out.String(), "\n") })
	cancel()
	err = <-ended
	if err == nil || !strings.Contains(err.Error(), "interrupted while q still held 2 visible, 0 in flight, 0 delayed") || !strings.Contains(err.Error(), "sluice peek q") {
		t.Fatalf("Wait interrupted: %v", err)
	}
	// A deadline passed before the first read says so, not a count.
	past, cancelPast := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancelPast()
	if err := Wait(past, c, "q", 10*time.Millisecond, &out); err == nil || !strings.Contains(err.Error(), "timed out before the counts of q could be read") {
		t.Fatalf("Wait past its deadline: %v", err)
	}
	if got := out.String(); got != "q: 2 visible, 0 in flight, 0 delayed\n" {
		t.Errorf("progress %q, want one line (the counts did not change)", got)
	}
	// A consumer empties the queue: Wait returns nil.
	done := make(chan error, 1)
	var out2 testutil.Buffer
	go func() { done <- Wait(ctx, c, "q", 10*time.Millisecond, &out2) }()
	for range 2 {
		ds, err := c.Receive(ctx, "q", client.WaitTime(time.Second))
		if err != nil || len(ds) != 1 {
			t.Fatalf("receive: %v %v", ds, err)
		}
		if err := c.Ack(ctx, "q", ds[0].Receipt); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait on a queue emptied: %v", err)
	}
}
