package embedded

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// TestPebbleErrorsRateLimited: a Pebble error repeated in a tight loop (a
// flush retried with no file descriptor left) is logged once, and the next
// line of its form, errorLogEvery later, says how many were left out;
// another form is logged at once.
func TestPebbleErrorsRateLimited(t *testing.T) {
	t.Parallel()
	var logs testutil.Buffer
	p := newPebbleLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	for i := range 10000 {
		p.Errorf("flush failed: %d: too many open files", i)
	}
	p.Errorf("compaction failed: %s", "no space left on device")
	if got := strings.Count(logs.String(), "\n"); got != 2 {
		t.Fatalf("10,000 errors of one form and one of another logged %d lines, want 2:\n%s", got, logs.String())
	}
	// The limiter on its own, on a clock of its own.
	r := &repeatLimiter{last: map[string]repeatState{}}
	t0 := time.Unix(0, 0)
	if _, ok := r.allow("f", t0); !ok {
		t.Fatal("the first line of a form was left out")
	}
	for i := 1; i <= 5; i++ {
		if _, ok := r.allow("f", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("a repeat %d s later was logged", i)
		}
	}
	if left, ok := r.allow("f", t0.Add(errorLogEvery)); !ok || left != 5 {
		t.Fatalf("errorLogEvery later: logged %v with %d left out, want true and 5", ok, left)
	}
}
