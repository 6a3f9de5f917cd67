package worker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
)

// nativeEnv is a real broker in-process, a client of it and a queue
// "jobs" with a dead-letter queue (after 5 attempts) and a retry policy.
type nativeEnv struct {
	t   *testing.T
	c   *client.Client
	src worker.Source
}

func setupNative(t *testing.T) *nativeEnv {
	t.Helper()
	c, err := client.New(testbroker.Start(t, testbroker.Config{}).URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	dlq, err := c.CreateQueue(ctx, "jobs-dlq", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateQueue(ctx, "jobs", map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":5}`, dlq.ARN),
		"RetryPolicy":   `{"baseSeconds":60,"maxSeconds":60,"jitter":"none"}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &nativeEnv{t: t, c: c, src: worker.NewSource(c, "jobs", worker.WithProtocol(worker.ProtocolHTTP))}
}

func (e *nativeEnv) send(bodies ...string) {
	e.t.Helper()
	for _, b := range bodies {
		if _, err := e.c.Send(context.Background(), "jobs", client.Message{Body: b}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// receive leases n messages through the source, by body.
func (e *nativeEnv) receive(n int) map[string]*worker.Message {
	e.t.Helper()
	got := map[string]*worker.Message{}
	testutil.Eventually(e.t, 10*time.Second, fmt.Sprintf("%d messages", n), func() bool {
		ms, err := e.src.Receive(context.Background(), worker.ReceiveRequest{Max: min(10, n-len(got)), Lease: time.Minute})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range ms {
			got[string(m.Body)] = m
		}
		return len(got) >= n
	})
	return got
}

// browse answers the queue's messages by body.
func (e *nativeEnv) browse() map[string]client.Delivery {
	e.t.Helper()
	page, err := e.c.Browse(context.Background(), "jobs", client.Limit(100))
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]client.Delivery{}
	for _, m := range page.Messages {
		out[m.Body] = m
	}
	return out
}

func TestNativeSourceReceive(t *testing.T) {
	t.Parallel()
	e := setupNative(t)
	ctx := context.Background()
	_, err := e.c.Send(ctx, "jobs", client.Message{
		Body: "hello", Attributes: map[string]client.Attribute{"type": client.String("greeting")},
		Priority: 3, CorrelationID: "corr", TraceContext: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := e.src.Receive(ctx, worker.ReceiveRequest{Max: 10, Wait: 2 * time.Second, Lease: 45 * time.Second})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	m := ms[0]
	if string(m.Body) != "hello" || m.Queue != "jobs" || m.ID == "" || m.Receipt == "" || m.Attributes["type"].Value != "greeting" ||
		m.Priority != 3 || m.CorrelationID != "corr" || m.TraceContext == "" || m.Attempts != 1 || m.ReceiveCount != 1 ||
		m.MaxAttempts != 5 || m.SentAt.IsZero() {
		t.Fatalf("message %+v", m)
	}
	if d := e.browse()["hello"]; d.State != "inflight" || time.Until(d.VisibleAt) < 40*time.Second {
		t.Fatalf("leased for %v, want 45 s", time.Until(d.VisibleAt))
	}
	// An empty answer is not an error.
	if ms, err := e.src.Receive(ctx, worker.ReceiveRequest{Max: 1}); err != nil || len(ms) != 0 {
		t.Fatalf("Receive on an empty queue = %v, %v", ms, err)
	}
	_, err = worker.NewSource(e.c, "missing", worker.WithProtocol(worker.ProtocolHTTP)).Receive(ctx, worker.ReceiveRequest{Max: 1})
	if !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("Receive of a missing queue: %v", err)
	}
}

func TestNativeSourceSettle(t *testing.T) {
	t.Parallel()
	e := setupNative(t)
	ctx := context.Background()
	e.send("ack", "nack-policy", "nack-delay", "snooze", "release", "dead")
	ms := e.receive(6)
	for body, o := range map[string]worker.Outcome{
		"ack":         {Kind: worker.KindAck},
		"nack-policy": {Kind: worker.KindNack, Reason: "boom"},
		"nack-delay":  {Kind: worker.KindNack, Reason: "later", Delay: 2 * time.Hour},
		"snooze":      {Kind: worker.KindSnooze, Delay: 10 * time.Minute},
		"release":     {Kind: worker.KindRelease},
		"dead":        {Kind: worker.KindDeadLetter, Reason: "never"},
	} {
		if err := e.src.Settle(ctx, ms[body], o); err != nil {
			t.Fatalf("Settle %s: %v", body, err)
		}
	}
	got := e.browse()
	if _, ok := got["ack"]; ok {
		t.Fatal("the acked message is still there")
	}
	// A nack without a delay follows the queue's retry policy (60 s here).
	if d := got["nack-policy"]; d.State != "delayed" || d.FailureReason != "boom" || time.Until(d.VisibleAt) < 50*time.Second || time.Until(d.VisibleAt) > 70*time.Second {
		t.Fatalf("nack-policy: %+v (visible in %v)", d, time.Until(d.VisibleAt))
	}
	if d := got["nack-delay"]; d.State != "delayed" || d.FailureReason != "later" || time.Until(d.VisibleAt) < 110*time.Minute {
		t.Fatalf("nack-delay: %+v", d)
	}
	if d := got["snooze"]; d.State != "delayed" || d.Attempts != 0 || time.Until(d.VisibleAt) < 9*time.Minute {
		t.Fatalf("snooze: %+v", d)
	}
	if d := got["release"]; d.State != "visible" || d.Attempts != 0 {
		t.Fatalf("release: %+v", d)
	}
	page, err := e.c.DeadLetters(ctx, "jobs")
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Body != "dead" || page.Messages[0].FailureReason != "never" {
		t.Fatalf("DeadLetters = %+v, %v", page, err)
	}
	if err := e.src.Settle(ctx, ms["release"], worker.Outcome{}); err == nil {
		t.Fatal("Settle with no kind succeeded")
	}
}

func TestNativeSourceLeaseLost(t *testing.T) {
	t.Parallel()
	e := setupNative(t)
	ctx := context.Background()
	e.send("m")
	old := e.receive(1)["m"]
	if err := e.src.Settle(ctx, old, worker.Outcome{Kind: worker.KindRelease}); err != nil {
		t.Fatal(err)
	}
	// The lease ended (the message is back in the queue): 409
	// message_not_in_flight.
	for _, o := range []worker.Outcome{
		{Kind: worker.KindNack, Reason: "x"}, {Kind: worker.KindSnooze, Delay: time.Second},
		{Kind: worker.KindRelease}, {Kind: worker.KindDeadLetter, Reason: "x"},
	} {
		err := e.src.Settle(ctx, old, o)
		if !errors.Is(err, worker.ErrLeaseLost) || !errors.Is(err, client.ErrMessageNotInFlight) {
			t.Fatalf("Settle %v on an ended lease: %v", o.Kind, err)
		}
	}
	// Received again since: the old receipt is stale (400
	// invalid_parameter), the lease lost all the same.
	cur := e.receive(1)["m"]
	err := e.src.Settle(ctx, old, worker.Outcome{Kind: worker.KindNack, Reason: "x"})
	if !errors.Is(err, worker.ErrLeaseLost) || !errors.Is(err, client.ErrInvalidParameter) {
		t.Fatalf("Settle on a stale receipt: %v", err)
	}
	// A receipt that does not decode.
	bad := *cur
	bad.Receipt = "garbage"
	if err := e.src.Settle(ctx, &bad, worker.Outcome{Kind: worker.KindRelease}); !errors.Is(err, worker.ErrLeaseLost) {
		t.Fatalf("Settle with an invalid receipt: %v", err)
	}
	// An ack of a stale receipt succeeds on the broker, without effect.
	if err := e.src.Settle(ctx, old, worker.Outcome{Kind: worker.KindAck}); err != nil {
		t.Fatalf("ack of a stale receipt: %v", err)
	}
	if d := e.browse()["m"]; d.State != "inflight" {
		t.Fatalf("the stale ack changed the message: %+v", d)
	}
	// Other errors stay what they are.
	err = worker.NewSource(e.c, "missing", worker.WithProtocol(worker.ProtocolHTTP)).Settle(ctx, cur, worker.Outcome{Kind: worker.KindAck})
	if !errors.Is(err, client.ErrQueueNotFound) || errors.Is(err, worker.ErrLeaseLost) {
		t.Fatalf("Settle on a missing queue: %v", err)
	}
}

func TestNativeSourceExtend(t *testing.T) {
	t.Parallel()
	e := setupNative(t)
	ctx := context.Background()
	var bodies []string
	for i := range 23 {
		bodies = append(bodies, fmt.Sprint(i))
	}
	e.send(bodies...)
	got := e.receive(23)
	msgs := make([]*worker.Message, 23)
	for i, b := range bodies {
		msgs[i] = got[b]
	}
	// Two leases end before the heartbeat: one released, one in the third
	// chunk acked by id and its receipt gone.
	if err := e.src.Settle(ctx, msgs[3], worker.Outcome{Kind: worker.KindRelease}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.DeleteMessage(ctx, "jobs", msgs[21].ID); err != nil {
		t.Fatal(err)
	}
	errs, err := e.src.Extend(ctx, msgs, 2*time.Hour)
	if err != nil || len(errs) != 23 {
		t.Fatalf("Extend = %d errors, %v", len(errs), err)
	}
	state := e.browse()
	for i, m := range msgs {
		switch i {
		case 3, 21:
			if !errors.Is(errs[i], worker.ErrLeaseLost) {
				t.Fatalf("message %d: %v, want ErrLeaseLost", i, errs[i])
			}
		default:
			if errs[i] != nil {
				t.Fatalf("message %d: %v", i, errs[i])
			}
			if d := state[string(m.Body)]; time.Until(d.VisibleAt) < time.Hour {
				t.Fatalf("message %d's lease ends in %v", i, time.Until(d.VisibleAt))
			}
		}
	}
	if errs, err := e.src.Extend(ctx, nil, time.Minute); err != nil || len(errs) != 0 {
		t.Fatalf("Extend of none = %v, %v", errs, err)
	}
	_, err = worker.NewSource(e.c, "missing", worker.WithProtocol(worker.ProtocolHTTP)).Extend(ctx, msgs[:1], time.Minute)
	if !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("Extend on a missing queue: %v", err)
	}
}

func TestNativeSourceBacklog(t *testing.T) {
	t.Parallel()
	e := setupNative(t)
	ctx := context.Background()
	bl, ok := e.src.(worker.Backlogger)
	if !ok {
		t.Fatal("the native source is no Backlogger")
	}
	e.send("a", "b", "c")
	e.receive(1)
	if n, err := bl.Backlog(ctx); err != nil || n != 2 {
		t.Fatalf("Backlog = %d, %v; want 2 (visible)", n, err)
	}
	if _, err := worker.NewSource(e.c, "missing", worker.WithProtocol(worker.ProtocolHTTP)).(worker.Backlogger).Backlog(ctx); !errors.Is(err, client.ErrQueueNotFound) {
		t.Fatalf("Backlog of a missing queue: %v", err)
	}
}

// A request the broker refuses for a parameter other than the receipt (a
// delay out of range) is not a lost lease; a negative delay is sent as 0.
func TestNativeSourceParameterErrorNotLeaseLost(t *testing.T) {
	t.Parallel()
	e := setupNative(t)
	ctx := context.Background()
	e.send("m")
	m := e.receive(1)["m"]
	err := e.src.Settle(ctx, m, worker.Outcome{Kind: worker.KindSnooze, Delay: 13 * time.Hour})
	if !errors.Is(err, client.ErrInvalidParameter) || errors.Is(err, worker.ErrLeaseLost) {
		t.Fatalf("snooze past 12 h: %v, want invalid_parameter and not ErrLeaseLost", err)
	}
	if err := e.src.Settle(ctx, m, worker.Outcome{Kind: worker.KindSnooze, Delay: -time.Minute}); err != nil {
		t.Fatalf("snooze of -1m: %v, want it taken as 0", err)
	}
	if d := e.browse()["m"]; d.State != "visible" {
		t.Fatalf("after a snooze of -1m the message is %q, want visible", d.State)
	}
}
