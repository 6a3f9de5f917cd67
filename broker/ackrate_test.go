package broker

import (
	"testing"
	"time"
)

func TestAckRate(t *testing.T) {
	t.Parallel()
	since := time.Unix(1000, 0)
	var r ackRate
	r.add(since.Add(500*time.Millisecond), 5)
	if got := r.perSecond(since.Add(500*time.Millisecond), since); got != 5 {
		t.Errorf("half a second after opening: %v/s, want 5 (the span is at least a second)", got)
	}
	for s := 1; s < 20; s++ {
		r.add(since.Add(time.Duration(s)*time.Second), 10)
	}
	now := since.Add(19 * time.Second)
	if got := r.perSecond(now, since); got != 10 {
		t.Errorf("steady 10/s: %v/s", got)
	}
	if got := r.perSecond(now.Add(5*time.Second), since); got != 5 {
		t.Errorf("five quiet seconds later: %v/s, want 5", got)
	}
	if got := r.perSecond(now.Add(time.Minute), since); got != 0 {
		t.Errorf("a quiet minute later: %v/s, want 0", got)
	}
}
