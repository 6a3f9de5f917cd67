package plan

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// ttlAttr is a Sluice.TimeToLive of secs seconds.
func ttlAttr(secs int) map[string]model.MessageAttribute {
	return map[string]model.MessageAttribute{model.MsgAttrTimeToLive: {DataType: "Number", StringValue: strconv.Itoa(secs)}}
}

// TestPlanSendTimeToLive: a message's time to live is its own, else its
// queue's; one longer than the retention, or not longer than the message's
// delay (its own, or the queue's), fails its entry with
// InvalidParameterValue naming the setting at fault.
func TestPlanSendTimeToLive(t *testing.T) {
	t.Parallel()
	std := model.DefaultQueueConfig(false)
	std.Retention = time.Hour
	withTTL := std
	withTTL.TimeToLive = 10 * time.Minute
	delayed := withTTL
	delayed.Delay = 5 * time.Minute
	fifo := model.DefaultQueueConfig(true)
	fifo.ContentBasedDedup = true
	fifo.TimeToLive = time.Minute
	for _, tc := range []struct {
		name  string
		c     model.QueueConfig
		entry model.SendEntry
		ttl   time.Duration
		delay time.Duration
		// refusal: the entry fails with InvalidParameterValue whose text
		// says this; "" when it plans.
		refusal string
	}{
		{"none", std, model.SendEntry{Body: "x"}, 0, 0, ""},
		{"the queue's", withTTL, model.SendEntry{Body: "x"}, 10 * time.Minute, 0, ""},
		{"its own beats the queue's", withTTL, model.SendEntry{Body: "x", Attributes: ttlAttr(30)}, 30 * time.Second, 0, ""},
		{"its own, longer than the queue's", withTTL, model.SendEntry{Body: "x", Attributes: ttlAttr(3600)}, time.Hour, 0, ""},
		{"its own on a queue without one", std, model.SendEntry{Body: "x", Attributes: ttlAttr(1)}, time.Second, 0, ""},
		{"FIFO queue's", fifo, model.SendEntry{Body: "x", GroupID: "g"}, time.Minute, 0, ""},
		{"longer than the retention", std, model.SendEntry{Body: "x", Attributes: ttlAttr(3601)},
			0, 0, "Sluice.TimeToLive is invalid. Reason: must not be longer than the queue's MessageRetentionPeriod (3600 seconds)"},
		{"own delay as long as its own", std, model.SendEntry{Body: "x", Delay: dur(30 * time.Second), Attributes: ttlAttr(30)},
			0, 0, "Value 30 for parameter Sluice.TimeToLive is invalid. Reason: must be longer than the message's delay (30 seconds)"},
		{"own delay shorter than its own", std, model.SendEntry{Body: "x", Delay: dur(29 * time.Second), Attributes: ttlAttr(30)}, 30 * time.Second, 29 * time.Second, ""},
		{"own delay as long as the queue's", withTTL, model.SendEntry{Body: "x", Delay: dur(10 * time.Minute), LongDelay: true},
			0, 0, "Value 600 for parameter DelaySeconds is invalid. Reason: must be shorter than the queue's MessageTimeToLive (600 seconds)"},
		{"queue's delay longer than its own", delayed, model.SendEntry{Body: "x", Attributes: ttlAttr(300)},
			0, 0, "Value 300 for parameter Sluice.TimeToLive is invalid. Reason: must be longer than the message's delay (300 seconds)"},
		{"queue's delay, own zero delay", delayed, model.SendEntry{Body: "x", Delay: dur(0), Attributes: ttlAttr(300)}, 300 * time.Second, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plans, err := sendParsed(tc.c, "q", 0, []model.SendEntry{tc.entry})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			p := plans[0]
			if tc.refusal != "" {
				if !errors.Is(p.Err, model.ErrInvalidParameterValue) || !strings.Contains(p.Err.Error(), tc.refusal) {
					t.Fatalf("entry error = %v, want InvalidParameterValue saying %q", p.Err, tc.refusal)
				}
				return
			}
			if p.Err != nil || p.TTL != tc.ttl || p.Delay != tc.delay {
				t.Fatalf("plan = ttl %v, delay %v, err %v; want ttl %v, delay %v", p.TTL, p.Delay, p.Err, tc.ttl, tc.delay)
			}
		})
	}
}

// TestPlanLeaseExpired: a lease change or end of a message whose time to
// live has passed expires it, with the reason "expired"; an extension and
// a dead-letter now are its holder's to make.
func TestPlanLeaseExpired(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	id := "0b1c2d3e-0000-4000-8000-000000000000"
	redrive := &model.RedrivePolicy{DeadLetterQueue: "dlq", MaxReceiveCount: 3}
	retry := &model.RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: model.JitterNone}
	both := model.QueueConfig{Redrive: redrive, Retry: retry}
	expired := LeasePlan{Fate: FateExpired, At: now, Attempts: 2, Reason: model.ReasonExpired, SetReason: true}
	gone := LeaseFacts{MessageID: id, Attempts: 2, ExpiresAt: now}
	live := LeaseFacts{MessageID: id, Attempts: 2, ExpiresAt: now.Add(time.Second)}
	for _, c := range []struct {
		name string
		m    LeaseFacts
		ch   model.VisibilityChange
		want LeasePlan
	}{
		{"nack", gone, model.VisibilityChange{Kind: model.Nack, Reason: "boom"}, expired},
		{"visibility 0", gone, model.VisibilityChange{Kind: model.ChangeTimeout}, expired},
		{"nack on the last attempt", LeaseFacts{MessageID: id, Attempts: 3, ExpiresAt: now}, model.VisibilityChange{Kind: model.Nack},
			LeasePlan{Fate: FateExpired, At: now, Attempts: 3, Reason: model.ReasonExpired, SetReason: true}},
		{"release", gone, model.VisibilityChange{Kind: model.Snooze},
			LeasePlan{Fate: FateExpired, At: now, Attempts: 1, Reason: model.ReasonExpired, SetReason: true}},
		{"extend", gone, model.VisibilityChange{Kind: model.ChangeTimeout, Timeout: time.Minute},
			LeasePlan{Fate: FateInFlight, At: now.Add(time.Minute), Attempts: 2}},
		{"dead-letter now", gone, model.VisibilityChange{Kind: model.DeadLetterNow, Reason: "poison"},
			LeasePlan{Fate: FateDeadLetter, At: now, Attempts: 2, Reason: "poison", SetReason: true}},
		{"nack before the expiry backs off past it", live, model.VisibilityChange{Kind: model.Nack},
			LeasePlan{Fate: FateDelayed, At: now.Add(4 * time.Second), Attempts: 2, Reason: model.ReasonNack, SetReason: true}},
	} {
		if got := LeaseChange(both, c.m, c.ch, now); got != c.want {
			t.Errorf("LeaseChange %s = %+v, want %+v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		c    model.QueueConfig
		m    LeaseFacts
		want LeasePlan
	}{
		{"expired at the lease's end", both, gone, expired},
		{"expired in flight, before the end", model.QueueConfig{}, LeaseFacts{MessageID: id, Attempts: 2, ExpiresAt: now.Add(-time.Hour)}, expired},
		{"expired on its last attempt", both, LeaseFacts{MessageID: id, Attempts: 3, ExpiresAt: now},
			LeasePlan{Fate: FateExpired, At: now, Attempts: 3, Reason: model.ReasonExpired, SetReason: true}},
		{"expiring after the lease's end", model.QueueConfig{}, live,
			LeasePlan{Fate: FateVisible, At: now, Attempts: 2, Reason: model.ReasonLeaseExpired, SetReason: true}},
	} {
		if got := LeaseExpiry(c.c, c.m, now); got != c.want {
			t.Errorf("LeaseExpiry %s = %+v, want %+v", c.name, got, c.want)
		}
	}
}
