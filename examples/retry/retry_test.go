package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// The example's run on the broker's fake clock: p-1 is tried at 0 s, 10 s
// and 70 s and paid; p-2 at 0 s, 10 s, 70 s and 370 s, then it is in the
// dead-letter queue with 4 attempts; no attempt comes a moment early. The
// report is the one docs/examples.md shows.
func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c, err := client.New(testbroker.Start(t, testbroker.Config{Clock: clock}).URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := Setup(ctx, c); err != nil {
		t.Fatal(err)
	}
	q, err := c.GetQueue(ctx, Queue)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Attributes["RetryPolicy"]; got != `{"delays":[10,60,300],"jitter":"none"}` {
		t.Fatalf("the queue's RetryPolicy reads %s", got)
	}
	gateway := NewGateway(map[string]int{"p-1": 2, "p-2": -1})
	log := NewLog(clock.Now)
	if err := SendPayments(ctx, c); err != nil {
		t.Fatal(err)
	}
	cfg := worker.DefaultConfig()
	cfg.Source = worker.NewSource(c, Queue)
	cfg.Handler = Handler(gateway, log)
	cfg.Logger = testutil.Logger(t)
	pool, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(ctx) }()
	t.Cleanup(func() {
		_ = pool.Shutdown(ctx)
		<-ran
	})

	// wait waits until the log holds n attempts and the queue's counts are
	// delayed (backing off) and depth, nothing visible or in flight: every
	// failure's nack has landed, so the clock may move.
	wait := func(what string, n int, delayed int64) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, what, func() bool {
			st, err := c.Stats(ctx, Queue)
			if err != nil {
				t.Fatal(err)
			}
			return len(log.Attempts()) == n && st.Delayed == delayed && st.Depth == delayed
		})
	}
	wait("the first attempts", 2, 2)
	clock.Advance(10 * time.Second)
	wait("the second attempts, 10 s later", 4, 2)
	clock.Advance(60 * time.Second)
	wait("the third attempts, 60 s later: p-1 paid", 6, 1)
	clock.Advance(299 * time.Second)
	if st, err := c.Stats(ctx, Queue); err != nil || st.Delayed != 1 || st.Visible != 0 || st.InFlight != 0 {
		t.Fatalf("299 s after its third attempt p-2 must still wait: %+v, %v", st, err)
	}
	clock.Advance(time.Second)
	var dead []client.Delivery
	testutil.Eventually(t, 30*time.Second, "p-2 in the dead-letter queue after its fourth attempt", func() bool {
		page, err := c.DeadLetters(ctx, Queue)
		if err != nil {
			t.Fatal(err)
		}
		dead = page.Messages
		st, err := c.Stats(ctx, Queue)
		if err != nil {
			t.Fatal(err)
		}
		return len(dead) == 1 && st.Depth == 0
	})
	if dead[0].Attempts != MaxAttempts || dead[0].FailureReason != ErrUnavailable.Error() {
		t.Fatalf("dead letter %s: %d attempts, reason %q", dead[0].Body, dead[0].Attempts, dead[0].FailureReason)
	}

	// The attempts came exactly on the schedule.
	want := []Attempt{
		{"p-1", 1, 0, ErrUnavailable}, {"p-2", 1, 0, ErrUnavailable},
		{"p-1", 2, 10 * time.Second, ErrUnavailable}, {"p-2", 2, 10 * time.Second, ErrUnavailable},
		{"p-1", 3, 70 * time.Second, nil}, {"p-2", 3, 70 * time.Second, ErrUnavailable},
		{"p-2", 4, 370 * time.Second, ErrUnavailable},
	}
	got := log.Attempts()
	if len(got) != len(want) {
		t.Fatalf("attempts %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("attempt %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	// docs/examples.md shows this run's report, and this queue's policy.
	var report bytes.Buffer
	Report(&report, got)
	ReportDeadLetters(&report, dead)
	doc, err := os.ReadFile("../../docs/examples.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	if i := strings.Index(section, "\n## retry:"); i < 0 {
		t.Fatal(`docs/examples.md has no section "## retry: ..."`)
	} else {
		section = section[i+1:]
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	for _, part := range []string{report.String(), RetryPolicy, "maxReceiveCount", "go test -run RetrySchedule -v ./examples/retry"} {
		if !strings.Contains(section, part) {
			t.Errorf("docs/examples.md's retry section lacks:\n%s", part)
		}
	}
}
