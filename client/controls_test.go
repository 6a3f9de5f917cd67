package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
)

func TestControls(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.redriven("q", 5, nil)
	e.send("q", "ack", "nack", "extend", "snooze", "release", "dead")
	got := map[string]client.Delivery{}
	for _, d := range e.receive("q", 6, client.VisibilityTimeout(30*time.Second)) {
		got[d.Body] = d
	}
	state := func(body string) client.Delivery {
		t.Helper()
		page, err := e.c.Browse(ctx, "q", client.Limit(100))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			if m.Body == body {
				return m
			}
		}
		t.Fatalf("message %q is not in the queue", body)
		return client.Delivery{}
	}

	if err := e.c.Ack(ctx, "q", got["ack"].Receipt); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Nack(ctx, "q", got["nack"].Receipt, "payment service unavailable", 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if m := state("nack"); m.State != "delayed" || m.FailureReason != "payment service unavailable" || m.Attempts != 1 ||
		m.VisibleAt.Sub(time.Now()) < 80*time.Second {
		t.Fatalf("nacked: %+v", m)
	}
	if err := e.c.Extend(ctx, "q", got["extend"].Receipt, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if m := state("extend"); m.State != "inflight" || m.VisibleAt.Sub(time.Now()) < time.Hour {
		t.Fatalf("extended: %+v", m)
	}
	if err := e.c.Snooze(ctx, "q", got["snooze"].Receipt, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	// A snooze takes the attempt back.
	if m := state("snooze"); m.State != "delayed" || m.Attempts != 0 || m.VisibleAt.Sub(time.Now()) < 9*time.Minute {
		t.Fatalf("snoozed: %+v", m)
	}
	if err := e.c.Release(ctx, "q", got["release"].Receipt); err != nil {
		t.Fatal(err)
	}
	if m := state("release"); m.State != "visible" || m.Attempts != 0 {
		t.Fatalf("released: %+v", m)
	}
	if err := e.c.DeadLetter(ctx, "q", got["dead"].Receipt, "order 44 has no customer"); err != nil {
		t.Fatal(err)
	}
	dl, err := e.c.DeadLetters(ctx, "q")
	if err != nil || len(dl.Messages) != 1 || dl.Queue != "q-dlq" || dl.Messages[0].Body != "dead" ||
		dl.Messages[0].FailureReason != "order 44 has no customer" || dl.Messages[0].DeadLetterSource != "q" {
		t.Fatalf("DeadLetters = %+v, %v", dl, err)
	}
}

func TestControlErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("plain", nil)
	e.send("plain", "m")

	// Dead-letter now on a queue without a RedrivePolicy.
	d := e.receive("plain", 1, client.VisibilityTimeout(time.Minute))[0]
	ce := wantIs(t, e.c.DeadLetter(ctx, "plain", d.Receipt, "no"), client.ErrConflict)
	if ce.Status != 409 || ce.Code != "conflict" {
		t.Fatalf("%#v", ce)
	}
	_, err := e.c.DeadLetters(ctx, "plain")
	wantIs(t, err, client.ErrConflict)

	// A lease that ended: the message went back to the queue.
	if err := e.c.Release(ctx, "plain", d.Receipt); err != nil {
		t.Fatal(err)
	}
	ce = wantIs(t, e.c.Extend(ctx, "plain", d.Receipt, time.Minute), client.ErrMessageNotInFlight)
	if ce.Status != 409 || ce.Code != "message_not_in_flight" {
		t.Fatalf("%#v", ce)
	}
	// A stale receipt (the message was received again since): 400
	// invalid_parameter, as in SQS; an ack of it succeeds without effect.
	d2 := e.receive("plain", 1, client.VisibilityTimeout(time.Minute))[0]
	err = e.c.Nack(ctx, "plain", d.Receipt, "late", 0)
	if ce := wantIs(t, err, client.ErrInvalidParameter); ce.Code != "invalid_parameter" || errors.Is(err, client.ErrInvalidReceipt) {
		t.Fatalf("stale receipt: %#v", ce)
	}
	if err := e.c.Ack(ctx, "plain", d.Receipt); err != nil {
		t.Fatalf("ack of a stale receipt: %v", err)
	}
	if st, err := e.c.Stats(ctx, "plain"); err != nil || st.InFlight != 1 {
		t.Fatalf("the stale ack changed the queue: %+v, %v", st, err)
	}
	// A receipt that does not decode.
	err = e.c.Snooze(ctx, "plain", "garbage", time.Second)
	if ce := wantIs(t, err, client.ErrInvalidReceipt); ce.Code != "invalid_receipt" || !errors.Is(err, client.ErrInvalidParameter) {
		t.Fatalf("%#v", ce)
	}
	// A field out of range.
	wantIs(t, e.c.Extend(ctx, "plain", d2.Receipt, 13*time.Hour), client.ErrInvalidParameter)
	wantIs(t, e.c.Ack(ctx, "missing", d2.Receipt), client.ErrQueueNotFound)
}

func TestBatchControls(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.redriven("q", 5, nil)
	e.send("q", "a1", "a2", "n1", "e1", "s1", "r1", "d1", "d2")
	got := map[string]string{}
	for _, d := range e.receive("q", 8, client.VisibilityTimeout(time.Minute)) {
		got[d.Body] = d.Receipt
	}
	check := func(what string, errs []error, err error, want ...error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(errs) != len(want) {
			t.Fatalf("%s: %d results, want %d", what, len(errs), len(want))
		}
		for i := range want {
			if want[i] == nil && errs[i] != nil || want[i] != nil && !errors.Is(errs[i], want[i]) {
				t.Fatalf("%s: entry %d = %v, want %v", what, i, errs[i], want[i])
			}
			var ce *client.Error
			if errs[i] != nil && (!errors.As(errs[i], &ce) || ce.Status != 400 || ce.Message == "") {
				t.Fatalf("%s: entry %d = %#v", what, i, errs[i])
			}
		}
	}
	errs, err := e.c.ExtendBatch(ctx, "q", []client.ExtendEntry{{Receipt: got["a1"], Visibility: time.Hour}, {Receipt: "bad", Visibility: time.Hour}})
	check("ExtendBatch", errs, err, nil, client.ErrInvalidReceipt)
	errs, err = e.c.AckBatch(ctx, "q", []string{got["a1"], "bad", got["a2"]})
	check("AckBatch", errs, err, nil, client.ErrInvalidReceipt, nil)
	errs, err = e.c.NackBatch(ctx, "q", []client.NackEntry{{Receipt: got["n1"], Reason: "flaky", Delay: time.Hour}, {Receipt: "bad"}})
	check("NackBatch", errs, err, nil, client.ErrInvalidReceipt)
	errs, err = e.c.SnoozeBatch(ctx, "q", []client.SnoozeEntry{{Receipt: got["s1"], Delay: time.Hour}})
	check("SnoozeBatch", errs, err, nil)
	errs, err = e.c.ReleaseBatch(ctx, "q", []string{"bad", got["r1"]})
	check("ReleaseBatch", errs, err, client.ErrInvalidReceipt, nil)
	errs, err = e.c.DeadLetterBatch(ctx, "q", []client.DeadLetterEntry{{Receipt: got["d1"], Reason: "unknown currency XXX"}, {Receipt: got["d2"]}})
	check("DeadLetterBatch", errs, err, nil, nil)

	st, err := e.c.Stats(ctx, "q")
	// Left: n1 and s1 delayed, r1 visible, e1 in flight; d1, d2 dead.
	if err != nil || st.Delayed != 2 || st.Visible != 1 || st.InFlight != 1 || *st.DeadLetters != 2 {
		t.Fatalf("Stats = %+v, %v", st, err)
	}
	// An empty batch, or one past 10 entries, fails as a whole.
	_, err = e.c.AckBatch(ctx, "q", nil)
	wantIs(t, err, client.ErrInvalidParameter)
	_, err = e.c.ReleaseBatch(ctx, "q", make([]string, 11))
	wantIs(t, err, client.ErrInvalidParameter)
}
