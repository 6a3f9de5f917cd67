package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

func TestBackoffNone(t *testing.T) {
	t.Parallel()
	// The seed's table: 2 s, 4 s, 8 s … capped at 5 minutes.
	p := model.RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: model.JitterNone}
	want := []time.Duration{2, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300}
	for attempts, w := range want { // attempts 0 backs off as 1
		for _, seed := range []uint64{0, 1, 1 << 63} {
			if got := Backoff(p, attempts, seed); got != w*time.Second {
				t.Errorf("Backoff(2..300 none, attempts %d, seed %d) = %v, want %v", attempts, seed, got, w*time.Second)
			}
		}
	}
	// Far past the cap the doubling stops (no overflow).
	for _, attempts := range []int{64, 1000, 1 << 30} {
		if got := Backoff(p, attempts, 7); got != 300*time.Second {
			t.Errorf("Backoff(attempts %d) = %v, want the cap", attempts, got)
		}
	}
	// The largest policy.
	big := model.RetryPolicy{Base: model.MaxRetrySeconds * time.Second, Max: model.MaxRetrySeconds * time.Second, Jitter: model.JitterNone}
	if got := Backoff(big, 1000, 0); got != model.MaxRetrySeconds*time.Second {
		t.Errorf("Backoff(43200..43200) = %v", got)
	}
	// base == max: always max.
	flat := model.RetryPolicy{Base: 5 * time.Second, Max: 5 * time.Second, Jitter: model.JitterNone}
	for attempts := 1; attempts < 5; attempts++ {
		if got := Backoff(flat, attempts, 0); got != 5*time.Second {
			t.Errorf("Backoff(5..5, attempts %d) = %v", attempts, got)
		}
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	for _, form := range []model.RetryPolicy{
		{Base: 2 * time.Second, Max: 300 * time.Second},
		{Delays: []time.Duration{10 * time.Second, 60 * time.Second, 300 * time.Second}},
	} {
		for _, jitter := range []string{model.JitterFull, model.JitterEqual} {
			p := form
			p.Jitter = jitter
			for attempts := 1; attempts <= 12; attempts++ {
				none := form
				none.Jitter = model.JitterNone
				d := Backoff(none, attempts, 0)
				lo := time.Duration(0)
				if jitter == model.JitterEqual {
					lo = d / 2
				}
				seen := map[time.Duration]bool{}
				var min, max time.Duration = d, 0
				for i := 0; i < 500; i++ {
					id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
					got := Backoff(p, attempts, JitterSeed(id, attempts))
					if got < lo || got > d {
						t.Fatalf("Backoff(%s, attempts %d) = %v, outside [%v, %v]", p, attempts, got, lo, d)
					}
					seen[got] = true
					if got < min {
						min = got
					}
					if got > max {
						max = got
					}
				}
				// 500 draws spread over the range: distinct, and reaching both
				// ends' neighbourhoods (the lowest and highest tenth).
				if len(seen) < 490 {
					t.Errorf("%s, attempts %d: only %d distinct backoffs of 500 messages", p, attempts, len(seen))
				}
				tenth := (d - lo) / 10
				if min > lo+tenth || max < d-tenth {
					t.Errorf("%s, attempts %d: backoffs span [%v, %v], want near [%v, %v]", p, attempts, min, max, lo, d)
				}
			}
		}
	}
}

// TestBackoffSchedule: the schedule form waits delays[n-1] after the n-th
// attempt, and the last delay after every later one.
func TestBackoffSchedule(t *testing.T) {
	t.Parallel()
	p := model.RetryPolicy{Delays: []time.Duration{10 * time.Second, 60 * time.Second, 300 * time.Second}, Jitter: model.JitterNone}
	want := []time.Duration{10, 10, 60, 300, 300, 300, 300}
	for attempts, w := range want { // attempts 0 backs off as 1
		for _, seed := range []uint64{0, 1, 1 << 63} {
			if got := Backoff(p, attempts, seed); got != w*time.Second {
				t.Errorf("Backoff(10,60,300 none, attempts %d, seed %d) = %v, want %v", attempts, seed, got, w*time.Second)
			}
		}
	}
	for _, attempts := range []int{1000, 1 << 30} {
		if got := Backoff(p, attempts, 7); got != 300*time.Second {
			t.Errorf("Backoff(attempts %d) = %v, want the last delay", attempts, got)
		}
	}
	// One delay: every attempt waits it. The order is the user's.
	one := model.RetryPolicy{Delays: []time.Duration{45 * time.Second}, Jitter: model.JitterNone}
	down := model.RetryPolicy{Delays: []time.Duration{300 * time.Second, 60 * time.Second}, Jitter: model.JitterNone}
	for attempts, w := range []time.Duration{45, 45, 45, 45} {
		if got := Backoff(one, attempts, 0); got != w*time.Second {
			t.Errorf("Backoff(45, attempts %d) = %v", attempts, got)
		}
	}
	for attempts, w := range []time.Duration{300, 300, 60, 60} {
		if got := Backoff(down, attempts, 0); got != w*time.Second {
			t.Errorf("Backoff(300,60, attempts %d) = %v, want %v", attempts, got, w*time.Second)
		}
	}
}

// TestBackoffExact pins the draws: a backoff is computed again after a
// restart and on other brokers, so the same message and attempt must wait
// the same time in every version (these values are what Sluice computed
// when the schedule form and jitter up came; a change of them moves the
// retries of messages already backing off).
func TestBackoffExact(t *testing.T) {
	t.Parallel()
	id := "0b1c2d3e-0000-4000-8000-000000000000"
	sched := []time.Duration{10 * time.Second, 60 * time.Second, 300 * time.Second}
	exp := model.RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second}
	for _, c := range []struct {
		jitter string
		sched  []time.Duration // attempts 1..4, schedule 10, 60, 300
		exp    []time.Duration // attempts 1..3, 2 s doubling
	}{
		{model.JitterNone, []time.Duration{10e9, 60e9, 300e9, 300e9}, []time.Duration{2e9, 4e9, 8e9}},
		{model.JitterFull, []time.Duration{4660177348, 42457844180, 268055792714, 11992255242}, []time.Duration{932035470, 2830522946, 7148154473}},
		{model.JitterEqual, []time.Duration{7330088674, 51228922090, 284027896357, 155996127621}, []time.Duration{1466017735, 3415261473, 7574077237}},
		{model.JitterUp, []time.Duration{12330088674, 81228922090, 434027896357, 305996127621}, []time.Duration{2466017735, 5415261473, 11574077237}},
	} {
		p := model.RetryPolicy{Delays: sched, Jitter: c.jitter}
		for i, want := range c.sched {
			if got := Backoff(p, i+1, JitterSeed(id, i+1)); got != want {
				t.Errorf("Backoff(10,60,300 %s, attempts %d) = %v, want %v", c.jitter, i+1, got, want)
			}
		}
		e := exp
		e.Jitter = c.jitter
		for i, want := range c.exp {
			if got := Backoff(e, i+1, JitterSeed(id, i+1)); got != want {
				t.Errorf("Backoff(2..300 %s, attempts %d) = %v, want %v", c.jitter, i+1, got, want)
			}
		}
	}
}

// TestBackoffJitterUp: jitter up waits d times a factor in [1, 1.5] (the
// seed's "+0-50 %" table: 2 s waits 2-3 s, 4 s waits 4-6 s, …), in both
// forms, spread over the whole range.
func TestBackoffJitterUp(t *testing.T) {
	t.Parallel()
	for _, p := range []model.RetryPolicy{
		{Delays: []time.Duration{10 * time.Second, 60 * time.Second, 300 * time.Second}, Jitter: model.JitterUp},
		{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: model.JitterUp},
	} {
		none := p
		none.Jitter = model.JitterNone
		for attempts := 1; attempts <= 10; attempts++ {
			d := Backoff(none, attempts, 0)
			hi := d + d/2
			seen := map[time.Duration]bool{}
			lo, top := hi, time.Duration(0)
			for i := 0; i < 500; i++ {
				id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
				got := Backoff(p, attempts, JitterSeed(id, attempts))
				if got < d || got > hi {
					t.Fatalf("Backoff(%s, attempts %d) = %v, outside [%v, %v]", p, attempts, got, d, hi)
				}
				seen[got] = true
				lo, top = min(lo, got), max(top, got)
			}
			if len(seen) < 490 {
				t.Errorf("%s, attempts %d: only %d distinct backoffs of 500 messages", p, attempts, len(seen))
			}
			tenth := (hi - d) / 10
			if lo > d+tenth || top < hi-tenth {
				t.Errorf("%s, attempts %d: backoffs span [%v, %v], want near [%v, %v]", p, attempts, lo, top, d, hi)
			}
		}
	}
	// The largest delay: 1.5 × 43200 s at most, no overflow.
	big := model.RetryPolicy{Delays: []time.Duration{model.MaxRetrySeconds * time.Second}, Jitter: model.JitterUp}
	for seed := uint64(0); seed < 100; seed++ {
		if got := Backoff(big, 3, seed); got < model.MaxRetrySeconds*time.Second || got > model.MaxRetrySeconds*time.Second*3/2 {
			t.Fatalf("Backoff(43200 up) = %v", got)
		}
	}
}

func TestBackoffDeterministic(t *testing.T) {
	t.Parallel()
	p := model.RetryPolicy{Base: time.Second, Max: time.Hour, Jitter: model.JitterFull}
	id := "0b1c2d3e-0000-4000-8000-000000000000"
	for attempts := 1; attempts < 10; attempts++ {
		a := Backoff(p, attempts, JitterSeed(id, attempts))
		b := Backoff(p, attempts, JitterSeed(id, attempts))
		if a != b {
			t.Fatalf("same message and attempt: %v then %v", a, b)
		}
	}
	if JitterSeed(id, 1) == JitterSeed(id, 2) {
		t.Error("two attempts of a message draw the same seed")
	}
	if JitterSeed(id, 1) == JitterSeed("1b1c2d3e-0000-4000-8000-000000000000", 1) {
		t.Error("two messages draw the same seed")
	}
	// Messages failing together spread out: 100 messages, one attempt.
	seen := map[time.Duration]bool{}
	for i := 0; i < 100; i++ {
		seen[Backoff(p, 1, JitterSeed(fmt.Sprintf("m-%d", i), 1))] = true
	}
	if len(seen) < 95 {
		t.Errorf("100 messages failing together back off by only %d distinct delays", len(seen))
	}
	// A zero-length range (the jitter of a zero backoff) is 0.
	if got := uniform(12345, 0); got != 0 {
		t.Errorf("uniform(seed, 0) = %d", got)
	}
	for seed := uint64(0); seed < 1000; seed++ {
		if got := uniform(seed, 7); got >= 7 {
			t.Fatalf("uniform(%d, 7) = %d", seed, got)
		}
	}
}

func TestPlanLeaseChange(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	id := "0b1c2d3e-0000-4000-8000-000000000000"
	redrive := &model.RedrivePolicy{DeadLetterQueue: "dlq", MaxReceiveCount: 3}
	retry := &model.RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: model.JitterNone}
	full := &model.RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: model.JitterFull}
	plain, withRetry, withBoth := model.QueueConfig{}, model.QueueConfig{Retry: retry}, model.QueueConfig{Redrive: redrive, Retry: retry}
	d := func(x time.Duration) *time.Duration { return &x }
	fullDelay := Backoff(*full, 2, JitterSeed(id, 2))
	for _, c := range []struct {
		name string
		c    model.QueueConfig
		m    LeaseFacts
		ch   model.VisibilityChange
		want LeasePlan
	}{
		{"extend", withBoth, LeaseFacts{MessageID: id, Attempts: 3, MaxAttempts: 0}, model.VisibilityChange{Kind: model.ChangeTimeout, Timeout: 40 * time.Second},
			LeasePlan{Fate: FateInFlight, At: now.Add(40 * time.Second), Attempts: 3}},
		{"extend at the limit is not a failure", withBoth, LeaseFacts{MessageID: id, Attempts: 9, MaxAttempts: 0}, model.VisibilityChange{Kind: model.ChangeTimeout, Timeout: time.Second},
			LeasePlan{Fate: FateInFlight, At: now.Add(time.Second), Attempts: 9}},
		{"nack to visible, no policy", plain, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.ChangeTimeout},
			LeasePlan{Fate: FateVisible, At: now, Attempts: 1, Reason: model.ReasonNack, SetReason: true}},
		{"nack backs off, attempts 1", withRetry, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.ChangeTimeout},
			LeasePlan{Fate: FateDelayed, At: now.Add(2 * time.Second), Attempts: 1, Reason: model.ReasonNack, SetReason: true}},
		{"native nack backs off, attempts 4", withRetry, LeaseFacts{MessageID: id, Attempts: 4, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Nack, Reason: "boom"},
			LeasePlan{Fate: FateDelayed, At: now.Add(16 * time.Second), Attempts: 4, Reason: "boom", SetReason: true}},
		{"nack with jitter", model.QueueConfig{Retry: full}, LeaseFacts{MessageID: id, Attempts: 2, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Nack},
			LeasePlan{Fate: FateDelayed, At: now.Add(fullDelay), Attempts: 2, Reason: model.ReasonNack, SetReason: true}},
		{"nack with a delay beats the backoff", withRetry, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Nack, Delay: d(7 * time.Second), Reason: "later"},
			LeasePlan{Fate: FateDelayed, At: now.Add(7 * time.Second), Attempts: 1, Reason: "later", SetReason: true}},
		{"nack with a delay of 0 is visible at once", withRetry, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Nack, Delay: d(0)},
			LeasePlan{Fate: FateVisible, At: now, Attempts: 1, Reason: model.ReasonNack, SetReason: true}},
		{"ChangeTimeout ignores Delay", withRetry, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.ChangeTimeout, Delay: d(7 * time.Second)},
			LeasePlan{Fate: FateDelayed, At: now.Add(2 * time.Second), Attempts: 1, Reason: model.ReasonNack, SetReason: true}},
		{"last attempt's nack dead-letters", withBoth, LeaseFacts{MessageID: id, Attempts: 3, MaxAttempts: 0}, model.VisibilityChange{Kind: model.ChangeTimeout},
			LeasePlan{Fate: FateDeadLetter, At: now, Attempts: 3, Reason: model.ReasonNack, SetReason: true}},
		{"past the limit dead-letters too", withBoth, LeaseFacts{MessageID: id, Attempts: 5, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Nack, Reason: "x", Delay: d(time.Minute)},
			LeasePlan{Fate: FateDeadLetter, At: now, Attempts: 5, Reason: "x", SetReason: true}},
		{"below the limit backs off", withBoth, LeaseFacts{MessageID: id, Attempts: 2, MaxAttempts: 0}, model.VisibilityChange{Kind: model.ChangeTimeout},
			LeasePlan{Fate: FateDelayed, At: now.Add(4 * time.Second), Attempts: 2, Reason: model.ReasonNack, SetReason: true}},
		{"own MaxAttempts lower", withBoth, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 1}, model.VisibilityChange{Kind: model.Nack},
			LeasePlan{Fate: FateDeadLetter, At: now, Attempts: 1, Reason: model.ReasonNack, SetReason: true}},
		{"own MaxAttempts higher", withBoth, LeaseFacts{MessageID: id, Attempts: 3, MaxAttempts: 5}, model.VisibilityChange{Kind: model.Nack},
			LeasePlan{Fate: FateDelayed, At: now.Add(8 * time.Second), Attempts: 3, Reason: model.ReasonNack, SetReason: true}},
		{"own MaxAttempts without a RedrivePolicy means nothing", withRetry, LeaseFacts{MessageID: id, Attempts: 3, MaxAttempts: 1}, model.VisibilityChange{Kind: model.Nack},
			LeasePlan{Fate: FateDelayed, At: now.Add(8 * time.Second), Attempts: 3, Reason: model.ReasonNack, SetReason: true}},
		{"snooze gives the attempt back", withBoth, LeaseFacts{MessageID: id, Attempts: 3, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Snooze, Timeout: 30 * time.Second},
			LeasePlan{Fate: FateDelayed, At: now.Add(30 * time.Second), Attempts: 2}},
		{"release", withBoth, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Snooze, Reason: "ignored"},
			LeasePlan{Fate: FateVisible, At: now, Attempts: 0}},
		{"snooze of a message never counted stays at 0", plain, LeaseFacts{MessageID: id, Attempts: 0, MaxAttempts: 0}, model.VisibilityChange{Kind: model.Snooze, Timeout: time.Second},
			LeasePlan{Fate: FateDelayed, At: now.Add(time.Second), Attempts: 0}},
		{"dead-letter now", withBoth, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.DeadLetterNow, Reason: "poison"},
			LeasePlan{Fate: FateDeadLetter, At: now, Attempts: 1, Reason: "poison", SetReason: true}},
		{"dead-letter now without a reason", withBoth, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, model.VisibilityChange{Kind: model.DeadLetterNow},
			LeasePlan{Fate: FateDeadLetter, At: now, Attempts: 1, Reason: model.ReasonNack, SetReason: true}},
	} {
		if got := LeaseChange(c.c, c.m, c.ch, now); got != c.want {
			t.Errorf("%s: PlanLeaseChange = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestPlanLeaseExpiry(t *testing.T) {
	t.Parallel()
	expired := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	id := "0b1c2d3e-0000-4000-8000-000000000000"
	redrive := &model.RedrivePolicy{DeadLetterQueue: "dlq", MaxReceiveCount: 2}
	retry := &model.RetryPolicy{Base: 10 * time.Second, Max: 15 * time.Second, Jitter: model.JitterNone}
	equal := &model.RetryPolicy{Base: 10 * time.Second, Max: 15 * time.Second, Jitter: model.JitterEqual}
	reason := func(p LeasePlan) LeasePlan { p.Reason, p.SetReason = model.ReasonLeaseExpired, true; return p }
	for _, c := range []struct {
		name string
		c    model.QueueConfig
		m    LeaseFacts
		want LeasePlan
	}{
		{"no policy: visible from the expiry", model.QueueConfig{}, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, reason(LeasePlan{Fate: FateVisible, At: expired, Attempts: 1})},
		{"redrive, attempts left", model.QueueConfig{Redrive: redrive}, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, reason(LeasePlan{Fate: FateVisible, At: expired, Attempts: 1})},
		{"backs off from the expiry", model.QueueConfig{Retry: retry}, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 0}, reason(LeasePlan{Fate: FateDelayed, At: expired.Add(10 * time.Second), Attempts: 1})},
		{"backoff capped", model.QueueConfig{Retry: retry}, LeaseFacts{MessageID: id, Attempts: 3, MaxAttempts: 0}, reason(LeasePlan{Fate: FateDelayed, At: expired.Add(15 * time.Second), Attempts: 3})},
		{"jittered", model.QueueConfig{Retry: equal}, LeaseFacts{MessageID: id, Attempts: 2, MaxAttempts: 0},
			reason(LeasePlan{Fate: FateDelayed, At: expired.Add(Backoff(*equal, 2, JitterSeed(id, 2))), Attempts: 2})},
		{"last attempt dead-letters", model.QueueConfig{Redrive: redrive, Retry: retry}, LeaseFacts{MessageID: id, Attempts: 2, MaxAttempts: 0}, reason(LeasePlan{Fate: FateDeadLetter, At: expired, Attempts: 2})},
		{"own MaxAttempts", model.QueueConfig{Redrive: redrive}, LeaseFacts{MessageID: id, Attempts: 1, MaxAttempts: 1}, reason(LeasePlan{Fate: FateDeadLetter, At: expired, Attempts: 1})},
		{"own MaxAttempts higher", model.QueueConfig{Redrive: redrive}, LeaseFacts{MessageID: id, Attempts: 2, MaxAttempts: 3}, reason(LeasePlan{Fate: FateVisible, At: expired, Attempts: 2})},
	} {
		got := LeaseExpiry(c.c, c.m, expired)
		if got != c.want {
			t.Errorf("%s: PlanLeaseExpiry = %+v, want %+v", c.name, got, c.want)
		}
		// ExpiryVisibleAt computes the same instant without the plan.
		if got.Fate != FateDeadLetter {
			if at := ExpiryVisibleAt(c.c, id, c.m.Attempts, expired); !at.Equal(got.At) {
				t.Errorf("%s: ExpiryVisibleAt = %v, PlanLeaseExpiry says %v", c.name, at, got.At)
			}
		}
	}
}

func TestShouldDeadLetterOnReceive(t *testing.T) {
	t.Parallel()
	r := &model.RedrivePolicy{MaxReceiveCount: 2}
	for _, c := range []struct {
		r                *model.RedrivePolicy
		attempts, ownMax int
		want             bool
	}{
		{nil, 50, 0, false}, {nil, 50, 1, false},
		{r, 0, 0, false}, {r, 1, 0, false}, {r, 2, 0, true}, {r, 3, 0, true},
		{r, 2, 3, false}, {r, 3, 3, true}, {r, 1, 1, true},
	} {
		if got := ShouldDeadLetterOnReceive(c.r, c.attempts, c.ownMax); got != c.want {
			t.Errorf("ShouldDeadLetterOnReceive(%v, %d, %d) = %v, want %v", c.r, c.attempts, c.ownMax, got, c.want)
		}
	}
}
