package plan

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

func TestSendGroupParams(t *testing.T) {
	t.Parallel()
	fifo := model.DefaultQueueConfig(true)
	std := model.DefaultQueueConfig(false)
	err := ValidateSendGroupParams(fifo, []model.SendEntry{{Body: "a", GroupID: "g", DedupID: "d"}, {Body: "b", DedupID: "d"}})
	if !errors.Is(err, model.ErrMissingParameter) || model.ErrorMessage(err) != "The request must contain the parameter MessageGroupId." {
		t.Errorf("missing group: %v", err)
	}
	err = ValidateSendGroupParams(fifo, []model.SendEntry{{Body: "a", GroupID: "g"}})
	if !errors.Is(err, model.ErrInvalidParameterValue) || model.ErrorMessage(err) != "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly" {
		t.Errorf("missing dedup: %v", err)
	}
	cbd := fifo
	cbd.ContentBasedDedup = true
	if err := ValidateSendGroupParams(cbd, []model.SendEntry{{Body: "a", GroupID: "g"}}); err != nil {
		t.Errorf("content-based: %v", err)
	}
	if err := ValidateSendGroupParams(std, []model.SendEntry{{Body: "a"}}); err != nil {
		t.Errorf("standard: %v", err)
	}
	if err := model.ValidateSendEntry(std, &model.SendEntry{Body: "a", GroupID: "g"}); err != nil {
		t.Errorf("group on a standard queue (fair queues): %v", err)
	}
	// A dedup id on a standard queue is an idempotent send (it used to be
	// refused); a malformed one is refused as on a FIFO queue.
	if err := model.ValidateSendEntry(std, &model.SendEntry{Body: "a", DedupID: "d"}); err != nil {
		t.Errorf("dedup id on a standard queue: %v", err)
	}
	if err := model.ValidateSendEntry(std, &model.SendEntry{Body: "a", DedupID: "d d"}); !errors.Is(err, model.ErrInvalidParameterValue) {
		t.Errorf("malformed dedup id on a standard queue: %v", err)
	}
	if err := model.ValidateSendEntry(fifo, &model.SendEntry{Body: "a", GroupID: "g g", DedupID: "d"}); !errors.Is(err, model.ErrInvalidParameterValue) {
		t.Errorf("malformed group: %v", err)
	}
}

func TestDedupRules(t *testing.T) {
	t.Parallel()
	fifo := model.DefaultQueueConfig(true)
	fifo.ContentBasedDedup = true
	// SHA-256("body") in lower-case hex.
	const sum = "230d8358dc8e8890b4c58deeb62912ee2f20357ae92a5cc861b98e68fe31acb5"
	if got := DedupID(fifo, &model.SendEntry{Body: "body"}); got != sum {
		t.Errorf("content-based DedupID = %s", got)
	}
	if got := DedupID(fifo, &model.SendEntry{Body: "body", DedupID: "x"}); got != "x" {
		t.Errorf("explicit DedupID = %s", got)
	}
	std := model.DefaultQueueConfig(false)
	if got := DedupID(std, &model.SendEntry{Body: "body"}); got != "" {
		t.Errorf("standard DedupID without an id = %s (a standard send is not content-deduplicated)", got)
	}
	if got := DedupID(std, &model.SendEntry{Body: "body", DedupID: "x"}); got != "x" {
		t.Errorf("standard DedupID = %s", got)
	}
	if DedupKey(std, "tenant-1", "d") != "d" {
		t.Error("standard queue: a group is a tenant, not a dedup scope")
	}
	if DedupKey(fifo, "g1", "d") != DedupKey(fifo, "g2", "d") {
		t.Error("scope queue: the group must not count")
	}
	fifo.DedupScope = model.DedupScopeMessageGroup
	if DedupKey(fifo, "g1", "d") == DedupKey(fifo, "g2", "d") || DedupKey(fifo, "a", "bc") == DedupKey(fifo, "ab", "c") {
		t.Error("scope messageGroup: keys of different (group, dedup) pairs collide")
	}
	if got := model.FormatSequenceNumber(42); got != "00000000000000000042" {
		t.Errorf("FormatSequenceNumber(42) = %s", got)
	}
}

func TestOriginal(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	std := model.DefaultQueueConfig(false)
	settled := std
	settled.DedupUntil = model.DedupUntilSettled
	fifo := model.DefaultQueueConfig(true)
	open := DedupFound{WindowID: "w", WindowUntil: now.Add(time.Second)}
	closed := DedupFound{WindowID: "w", WindowUntil: now} // expires at now: gone
	for _, tc := range []struct {
		name string
		c    model.QueueConfig
		f    DedupFound
		want string
	}{
		{"nothing found", std, DedupFound{}, ""},
		{"window open", std, open, "w"},
		{"window closed", std, closed, ""},
		{"window open, FIFO", fifo, open, "w"},
		{"window closed, a live carrier, window mode", std, DedupFound{WindowID: "w", WindowUntil: now, LiveID: "l"}, ""},
		{"window closed, a live carrier, settled", settled, DedupFound{WindowID: "w", WindowUntil: now, LiveID: "l"}, "l"},
		{"no window, a live carrier, settled", settled, DedupFound{LiveID: "l"}, "l"},
		{"window open and a live carrier: the window's id", settled, DedupFound{WindowID: "w", WindowUntil: now.Add(time.Second), LiveID: "l"}, "w"},
		{"window closed, no carrier, settled", settled, closed, ""},
	} {
		if got := Original(tc.c, tc.f, now); got != tc.want {
			t.Errorf("%s: Original = %q, want %q", tc.name, got, tc.want)
		}
	}
	if !LiveCarrier("d", 0) || LiveCarrier("", 0) || LiveCarrier("d", 7) {
		t.Error("LiveCarrier: a standard message with an id counts; none without one, nor a FIFO dead letter (a sequence number)")
	}
}

func TestCarrierStays(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	c := model.DefaultQueueConfig(false)
	c.Retention = time.Hour
	for _, tc := range []struct {
		name              string
		sentAt, expiresAt time.Time
		held              bool
		want              bool
	}{
		{"no time to live", now.Add(-time.Minute), time.Time{}, false, true},
		{"time to live to come", now.Add(-time.Minute), now.Add(time.Second), false, true},
		{"expired at now", now.Add(-time.Minute), now, false, false},
		{"expired, held by a live lease", now.Add(-time.Minute), now.Add(-time.Second), true, true},
		{"past retention", now.Add(-time.Hour), time.Time{}, false, false},
		{"past retention, held", now.Add(-time.Hour), time.Time{}, true, false},
		{"just within retention", now.Add(-time.Hour + time.Nanosecond), time.Time{}, false, true},
	} {
		if got := CarrierStays(c, tc.sentAt, tc.expiresAt, tc.held, now); got != tc.want {
			t.Errorf("%s: CarrierStays = %v, want %v", tc.name, got, tc.want)
		}
	}
}
