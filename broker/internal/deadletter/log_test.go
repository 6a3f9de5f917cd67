package deadletter

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
)

func TestDeadLetterLog(t *testing.T) {
	t.Parallel()
	h := &recordHandler{}
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	l := &Log{Log: slog.New(h), Clock: clock, Interval: time.Second, Burst: 3}
	src, dlq := model.QueueRef{Name: "src"}, model.QueueRef{Account: "123456789012", Name: "dlq"}
	for i := 0; i < 5; i++ {
		l.Moved(fmt.Sprintf("m%d", i), src, dlq, "boom", i+1)
	}
	recs := h.all()
	if len(recs) != 3 {
		t.Fatalf("5 moves in one interval with Burst 3 logged %d lines, want 3", len(recs))
	}
	r := recs[0]
	if r.Level != slog.LevelWarn {
		t.Errorf("level %v, want warn", r.Level)
	}
	a := recordAttrs(r)
	want := map[string]string{"message_id": "m0", "queue": "src", "dead_letter_queue": "123456789012/dlq", "reason": "boom", "attempts": "1"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, a[k], v, a)
		}
	}
	if _, ok := a["not_logged_before"]; ok {
		t.Errorf("the first line reports dropped lines: %v", a)
	}
	// Still in the interval: dropped.
	clock.Advance(999 * time.Millisecond)
	l.Moved("m5", src, dlq, "boom", 1)
	if n := len(h.all()); n != 3 {
		t.Fatalf("a move before the interval ended was logged (%d lines)", n)
	}
	// A new interval: the next line reports the 3 dropped ones.
	clock.Advance(time.Millisecond)
	l.Moved("m6", src, dlq, "boom", 1)
	recs = h.all()
	if len(recs) != 4 {
		t.Fatalf("the first move of a new interval: %d lines, want 4", len(recs))
	}
	if a := recordAttrs(recs[3]); a["message_id"] != "m6" || a["not_logged_before"] != "3" {
		t.Errorf("the new interval's first line: %v, want message m6 and not_logged_before 3", a)
	}
	l.Moved("m7", src, dlq, "boom", 1)
	if a := recordAttrs(h.all()[4]); a["not_logged_before"] != "" {
		t.Errorf("the count of dropped lines was reported twice: %v", a)
	}
	// The defaults: 10 lines an interval.
	clock2 := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	h2 := &recordHandler{}
	l2 := &Log{Log: slog.New(h2), Clock: clock2}
	for i := 0; i < 25; i++ {
		l2.Moved("m", src, dlq, "r", 1)
	}
	if n := len(h2.all()); n != 10 {
		t.Errorf("the default burst logged %d of 25 moves in one interval, want 10", n)
	}
	// Nil and logger-less logs are no-ops.
	var nilLog *Log
	nilLog.Moved("m", src, dlq, "r", 1)
	(&Log{}).Moved("m", src, dlq, "r", 1)
}

func TestDeadLetterLogConcurrent(t *testing.T) {
	t.Parallel()
	h := &recordHandler{}
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	l := &Log{Log: slog.New(h), Clock: clock, Burst: 5}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				l.Moved("m", model.QueueRef{Name: "src"}, model.QueueRef{Name: "dlq"}, "r", 1)
			}
		}()
	}
	wg.Wait()
	if n := len(h.all()); n != 5 {
		t.Fatalf("800 concurrent moves in one interval logged %d lines, want the burst of 5", n)
	}
}

// recordHandler is a slog.Handler that keeps the records it is given.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *recordHandler) WithGroup(string) slog.Handler { return h }

func (h *recordHandler) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.records...)
}

func recordAttrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}
