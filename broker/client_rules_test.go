package broker

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Rules that real SQS clients tripped on.

func TestFifoAcceptsDelayZero(t *testing.T) {
	t.Parallel()
	fifo := DefaultQueueConfig(true)
	zero, one := time.Duration(0), time.Second
	if err := ValidateSendEntry(fifo, &SendEntry{Body: "a", GroupID: "g", DedupID: "d", Delay: &zero}); err != nil {
		t.Errorf("DelaySeconds=0 on a FIFO queue: %v", err)
	}
	err := ValidateSendEntry(fifo, &SendEntry{Body: "a", GroupID: "g", DedupID: "d", Delay: &one})
	if !errors.Is(err, ErrInvalidParameterValue) || !strings.Contains(ErrorMessage(err), "DelaySeconds") {
		t.Errorf("DelaySeconds=1 on a FIFO queue: %v", err)
	}
	if err := ValidateSendEntry(DefaultQueueConfig(false), &SendEntry{Body: "a", Delay: &one}); err != nil {
		t.Errorf("DelaySeconds=1 on a standard queue: %v", err)
	}
}

func TestMessageDelay(t *testing.T) {
	t.Parallel()
	std, fifo := DefaultQueueConfig(false), DefaultQueueConfig(true)
	std.Delay, fifo.Delay = 5*time.Second, 5*time.Second
	zero, two := time.Duration(0), 2*time.Second
	for _, c := range []struct {
		what string
		cfg  QueueConfig
		own  *time.Duration
		want time.Duration
	}{
		{"standard, no delay of its own", std, nil, 5 * time.Second},
		{"standard, DelaySeconds=0", std, &zero, 0},
		{"standard, DelaySeconds=2", std, &two, 2 * time.Second},
		{"FIFO, no delay of its own", fifo, nil, 5 * time.Second},
		{"FIFO, DelaySeconds=0", fifo, &zero, 5 * time.Second},
	} {
		if got := MessageDelay(c.cfg, &SendEntry{Delay: c.own}); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}
