package sqssource_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/sqssource"
)

const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestReceiveFields: every worker.Message field from an SQS message: the
// attributes of each type (custom labels kept), the Sluice options and the
// trace context lifted into fields, the receive count that grows on each
// receive, the maxReceiveCount as MaxAttempts (a message's own
// Sluice.MaxAttempts overriding it), SentAt, and a FIFO message's group.
func TestReceiveFields(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q, _ := e.withDLQ("fields", false, 5)
	sentAt := e.clock.Now()
	blob := []byte{0, 1, 0xfe, 0xff}
	id := e.send(q, "hello", map[string]types.MessageAttributeValue{
		"kind":                 str("order.created"),
		"amount":               num("129.90"),
		"blob":                 {DataType: aws.String("Binary"), BinaryValue: blob},
		"tenant":               {DataType: aws.String("String.tenant"), StringValue: aws.String("acme")},
		"size":                 {DataType: aws.String("Number.int"), StringValue: aws.String("3")},
		"Sluice.Priority":      num("7"),
		"Sluice.CorrelationId": str("checkout-7f3a"),
		"Sluice.MaxAttempts":   num("3"),
		"traceparent":          str(traceparent),
	}, "")
	e.send(q, "plain", nil, "")
	src := e.source(q, sqssource.DefaultConfig())
	if src.Queue() != "fields" || src.URL() != q {
		t.Fatalf("Queue() = %q, URL() = %q; want fields, %s", src.Queue(), src.URL(), q)
	}
	msgs := e.receive(src, time.Minute)
	if len(msgs) != 2 {
		t.Fatalf("received %d messages, want 2", len(msgs))
	}
	m, plain := msgs[0], msgs[1]
	if m.ID != id {
		m, plain = plain, m
	}
	if m.ID != id || m.Queue != "fields" || string(m.Body) != "hello" || m.Receipt == "" {
		t.Fatalf("message = id %q queue %q body %q receipt %q; want %s fields hello and a receipt", m.ID, m.Queue, m.Body, m.Receipt, id)
	}
	if m.ReceiveCount != 1 || m.Attempts != 1 {
		t.Errorf("ReceiveCount, Attempts = %d, %d; want 1, 1", m.ReceiveCount, m.Attempts)
	}
	if m.Priority != 7 || m.CorrelationID != "checkout-7f3a" || m.TraceContext != traceparent || m.MaxAttempts != 3 {
		t.Errorf("Priority %d CorrelationID %q TraceContext %q MaxAttempts %d; want 7 checkout-7f3a %s 3",
			m.Priority, m.CorrelationID, m.TraceContext, m.MaxAttempts, traceparent)
	}
	if !m.SentAt.Equal(sentAt.Truncate(time.Millisecond)) {
		t.Errorf("SentAt = %v, want %v", m.SentAt, sentAt)
	}
	want := map[string]worker.Attribute{
		"kind":   {Type: "String", Value: "order.created"},
		"amount": {Type: "Number", Value: "129.90"},
		"blob":   {Type: "Binary", Binary: blob},
		"tenant": {Type: "String.tenant", Value: "acme"},
		"size":   {Type: "Number.int", Value: "3"},
	}
	if len(m.Attributes) != len(want) {
		t.Errorf("Attributes = %v, want exactly %v (the Sluice options and traceparent lifted out)", m.Attributes, want)
	}
	for name, w := range want {
		g, ok := m.Attributes[name]
		if !ok || g.Type != w.Type || g.Value != w.Value || !bytes.Equal(g.Binary, w.Binary) {
			t.Errorf("Attributes[%s] = %+v, want %+v", name, g, w)
		}
	}
	if plain.MaxAttempts != 5 || plain.Priority != 0 || plain.Attributes != nil || plain.TraceContext != "" {
		t.Errorf("plain message: MaxAttempts %d Priority %d Attributes %v TraceContext %q; want the queue's 5, 0, none, none",
			plain.MaxAttempts, plain.Priority, plain.Attributes, plain.TraceContext)
	}
	// Each receive counts.
	e.settle(src, plain, worker.Outcome{Kind: worker.KindAck})
	for want := 2; want <= 3; want++ {
		e.settle(src, m, worker.Outcome{Kind: worker.KindRelease})
		m = e.receiveOne(src, time.Minute)
		if m.ReceiveCount != want || m.Attempts != want || m.ID != id {
			t.Fatalf("receive #%d: id %s ReceiveCount %d Attempts %d; want %s %d %d", want, m.ID, m.ReceiveCount, m.Attempts, id, want, want)
		}
	}

	// A FIFO message's group.
	fq := e.queue("fields.fifo", map[string]string{"FifoQueue": "true"})
	e.send(fq, "f", nil, "g-1")
	fm := e.receiveOne(e.source(fq, sqssource.Config{}), time.Minute)
	if fm.GroupID != "g-1" || fm.Queue != "fields.fifo" || fm.MaxAttempts != 0 {
		t.Errorf("FIFO message: GroupID %q Queue %q MaxAttempts %d; want g-1, fields.fifo, 0 (no RedrivePolicy)", fm.GroupID, fm.Queue, fm.MaxAttempts)
	}
}

// TestReceiveLease: the request's lease is the visibility timeout, rounded
// up to whole seconds.
func TestReceiveLease(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("lease", nil)
	e.send(q, "a", nil, "")
	src := e.source(q, sqssource.Config{})
	e.receiveOne(src, 1500*time.Millisecond)
	e.invisibleFor(src, 2*time.Second)
	if _, err := src.Receive(e.ctx, worker.ReceiveRequest{Max: 1, Lease: 13 * time.Hour}); err == nil {
		t.Error("Receive with a 13 h lease: no error, want one (SQS's maximum is 12 h)")
	}
}

func TestAckDeletes(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("ack", nil)
	e.send(q, "a", nil, "")
	src := e.source(q, sqssource.Config{})
	m := e.receiveOne(src, time.Second)
	e.settle(src, m, worker.Outcome{Kind: worker.KindAck})
	e.clock.Advance(time.Hour)
	e.receiveNone(src, "after the ack and an hour")
	if n, err := src.Backlog(e.ctx); err != nil || n != 0 {
		t.Errorf("Backlog = %d, %v; want 0", n, err)
	}
}

// TestNackBackoff: a nack without a delay sets the visibility to the
// backoff's jittered delay for the receive count: with the jitter drawing
// 0.5 and a 4 s base, 2 s after the first receive, 4 s after the second,
// then capped (Max 10 s: 5 s).
func TestNackBackoff(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("nack", nil)
	e.send(q, "a", nil, "")
	var draws atomic.Int64
	src := e.source(q, sqssource.Config{Backoff: sqssource.Backoff{Base: 4 * time.Second, Max: 10 * time.Second},
		Rand: constRand(0.5, &draws)})
	m := e.receiveOne(src, time.Minute)
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		e.settle(src, m, worker.Outcome{Kind: worker.KindNack, Reason: "boom"})
		m = e.invisibleFor(src, want)
		if m.ReceiveCount != i+2 {
			t.Fatalf("after nack #%d: ReceiveCount %d, want %d", i+1, m.ReceiveCount, i+2)
		}
	}
	if draws.Load() != 4 {
		t.Errorf("the jitter was drawn %d times, want 4 (once per nack)", draws.Load())
	}
}

// TestRetryAfterDelay: a nack with a delay sets exactly that visibility
// (rounded up to whole seconds), without drawing the jitter.
func TestRetryAfterDelay(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("retry", nil)
	e.send(q, "a", nil, "")
	var draws atomic.Int64
	src := e.source(q, sqssource.Config{Rand: constRand(0.9, &draws)})
	m := e.receiveOne(src, time.Minute)
	e.settle(src, m, worker.Outcome{Kind: worker.KindNack, Reason: "rate limited", Delay: 2500 * time.Millisecond})
	if m = e.invisibleFor(src, 3*time.Second); m.ReceiveCount != 2 {
		t.Errorf("ReceiveCount %d, want 2", m.ReceiveCount)
	}
	if draws.Load() != 0 {
		t.Errorf("the jitter was drawn %d times, want 0", draws.Load())
	}
}

// TestSnooze: a snooze is a visibility change; on SQS the next receive
// counts.
func TestSnooze(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("snooze", nil)
	e.send(q, "a", nil, "")
	src := e.source(q, sqssource.Config{})
	m := e.receiveOne(src, time.Minute)
	e.settle(src, m, worker.Outcome{Kind: worker.KindSnooze, Delay: 7 * time.Second})
	if m = e.invisibleFor(src, 7*time.Second); m.ReceiveCount != 2 {
		t.Errorf("ReceiveCount after a snooze %d, want 2 (SQS counts it)", m.ReceiveCount)
	}
	if err := src.Settle(e.ctx, m, worker.Outcome{Kind: worker.KindSnooze, Delay: 13 * time.Hour}); err == nil {
		t.Error("a 13 h snooze: no error, want one (SQS's maximum is 12 h)")
	}
}

// TestRelease: a release makes the message visible at once; on SQS the
// next receive counts.
func TestRelease(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("release", nil)
	e.send(q, "a", nil, "")
	src := e.source(q, sqssource.Config{})
	m := e.receiveOne(src, time.Hour)
	e.settle(src, m, worker.Outcome{Kind: worker.KindRelease})
	if m = e.receiveOne(src, time.Hour); m.ReceiveCount != 2 {
		t.Errorf("ReceiveCount after a release %d, want 2", m.ReceiveCount)
	}
}

func TestUnknownOutcome(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("unknown", nil)
	src := e.source(q, sqssource.Config{})
	if err := src.Settle(e.ctx, &worker.Message{Receipt: "r"}, worker.Outcome{Kind: 99}); err == nil {
		t.Error("Settle of kind 99: no error")
	}
	if err := src.Settle(e.ctx, &worker.Message{}, worker.Outcome{Kind: worker.KindAck}); err == nil {
		t.Error("Settle of a message without a receipt: no error")
	}
}

// TestBacklog: ApproximateNumberOfMessages, the visible ones.
func TestBacklog(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("backlog", nil)
	src := e.source(q, sqssource.Config{})
	for _, b := range []string{"a", "b", "c"} {
		e.send(q, b, nil, "")
	}
	if n, err := src.Backlog(e.ctx); err != nil || n != 3 {
		t.Fatalf("Backlog = %d, %v; want 3", n, err)
	}
	if _, err := src.Receive(e.ctx, worker.ReceiveRequest{Max: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if n, err := src.Backlog(e.ctx); err != nil || n != 2 {
		t.Fatalf("Backlog after a receive = %d, %v; want 2", n, err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	for _, u := range []string{"", "queue", "http://host/", "::"} {
		if _, err := sqssource.New(e.c, u, sqssource.Config{}); err == nil {
			t.Errorf("New with queue URL %q: no error", u)
		}
	}
	if _, err := sqssource.New(nil, e.url+"/000000000000/q", sqssource.Config{}); err == nil {
		t.Error("New with a nil client: no error")
	}
	bad := sqssource.Config{Backoff: sqssource.Backoff{Base: 500 * time.Millisecond}}
	if _, err := sqssource.New(e.c, e.url+"/000000000000/q", bad); err == nil || !strings.Contains(err.Error(), "Backoff.Base") {
		t.Errorf("New with a 500 ms backoff base: %v, want an error naming Backoff.Base", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b  sqssource.Backoff
		ok bool
	}{
		{sqssource.Backoff{}, true},
		{sqssource.DefaultConfig().Backoff, true},
		{sqssource.Backoff{Base: time.Hour}, true}, // Max defaults to Base
		{sqssource.Backoff{Base: 12 * time.Hour, Max: 12 * time.Hour}, true},
		{sqssource.Backoff{Base: 999 * time.Millisecond}, false},
		{sqssource.Backoff{Base: -time.Second}, false},
		{sqssource.Backoff{Base: 10 * time.Second, Max: 5 * time.Second}, false},
		{sqssource.Backoff{Max: 13 * time.Hour}, false},
	} {
		err := sqssource.Config{Backoff: tc.b}.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", tc.b, err, tc.ok)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := sqssource.Backoff{Base: time.Second, Max: 5 * time.Minute}
	for _, tc := range []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{0, 0.999, time.Second}, // counts as the first
		{1, 0.999, time.Second},
		{1, 0.25, time.Second}, // rounded up to whole seconds
		{1, 0, 0},
		{2, 0.999, 2 * time.Second},
		{4, 0.5, 4 * time.Second},
		{9, 0.999, 256 * time.Second},
		{10, 0.999, 5 * time.Minute}, // 512 s capped
		{1 << 30, 0.5, 150 * time.Second},
	} {
		if got := b.Delay(tc.n, tc.r); got != tc.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tc.n, tc.r, got, tc.want)
		}
	}
	if got := (sqssource.Backoff{}).Ceiling(3); got != 4*time.Second {
		t.Errorf("zero Backoff Ceiling(3) = %v, want the defaults' 4s", got)
	}
}

// TestLeaseLostCodes: the SQS error codes and messages that mean a lost
// lease (see errors.go), and some that do not.
func TestLeaseLostCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code, msg string
		lost      bool
	}{
		{"ReceiptHandleIsInvalid", "The input receipt handle is invalid.", true},
		{"ReceiptHandleIsInvalid", "The receipt handle has expired", true},
		{"MessageNotInflight", "", true},
		{"AWS.SimpleQueueService.MessageNotInflight", "The message referred to is not in flight.", true},
		{"InvalidParameterValue", "Value AQEB for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.", true},
		{"InvalidParameterValue", "Value AQEB for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", true},
		{"InvalidParameterValue", "Value 50000 for parameter VisibilityTimeout is invalid. Reason: must be between 0 and 43200, if provided.", false},
		{"InvalidParameterValue", "Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", false},
		{"AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.", false},
		{"RequestThrottled", "", false},
	} {
		if got := sqssource.LeaseLostCode(tc.code, tc.msg); got != tc.lost {
			t.Errorf("LeaseLostCode(%q, %q) = %v, want %v", tc.code, tc.msg, got, tc.lost)
		}
	}
}

// TestLeaseLost: a lease that ended maps to worker.ErrLeaseLost: the
// SDK's errors of a real broker, for each call on an old receipt.
func TestLeaseLost(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q, dlq := e.withDLQ("lost", false, 10)
	e.send(q, "a", nil, "")
	src := e.source(q, sqssource.Config{})
	old := e.receiveOne(src, time.Second)
	e.clock.Advance(time.Second)

	// The lease ended, no receive since: MessageNotInflight.
	errs, err := src.Extend(e.ctx, []*worker.Message{old}, time.Minute)
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	wantLeaseLost(t, "Extend of an expired lease", errs[0])
	wantLeaseLost(t, "nack of an expired lease", src.Settle(e.ctx, old, worker.Outcome{Kind: worker.KindNack}))

	// Received again elsewhere: the old receipt is stale (InvalidParameterValue).
	other := e.source(q, sqssource.Config{})
	cur := e.receiveOne(other, time.Minute)
	errs, err = src.Extend(e.ctx, []*worker.Message{old}, time.Minute)
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	wantLeaseLost(t, "Extend of a lease taken by another receive", errs[0])
	for _, o := range []worker.Outcome{{Kind: worker.KindNack}, {Kind: worker.KindSnooze, Delay: time.Second},
		{Kind: worker.KindRelease}, {Kind: worker.KindDeadLetter, Reason: "x"}} {
		wantLeaseLost(t, fmt.Sprintf("Settle %+v of a stale receipt", o), src.Settle(e.ctx, old, o))
	}
	if got := e.rawReceive(dlq); len(got) != 0 {
		t.Fatalf("the dead-letter of a stale receipt sent %d copies, want none", len(got))
	}
	// An ack of a stale receipt on a standard queue succeeds without effect
	// (as in SQS): the current holder still holds the message.
	if err := src.Settle(e.ctx, old, worker.Outcome{Kind: worker.KindAck}); err != nil {
		t.Fatalf("ack of a stale receipt on a standard queue: %v, want success (SQS cannot tell)", err)
	}
	e.settle(other, cur, worker.Outcome{Kind: worker.KindAck})

	// A receipt that is not one: ReceiptHandleIsInvalid.
	garbage := &worker.Message{ID: "g", Receipt: "garbage"}
	wantLeaseLost(t, "ack of a garbage receipt", src.Settle(e.ctx, garbage, worker.Outcome{Kind: worker.KindAck}))
	wantLeaseLost(t, "release of a garbage receipt", src.Settle(e.ctx, garbage, worker.Outcome{Kind: worker.KindRelease}))

	// FIFO: an ack of an expired receipt says "The receipt handle has expired."
	fq := e.queue("lost.fifo", map[string]string{"FifoQueue": "true"})
	e.send(fq, "f", nil, "g")
	fsrc := e.source(fq, sqssource.Config{})
	fm := e.receiveOne(fsrc, time.Second)
	e.clock.Advance(time.Second)
	err = fsrc.Settle(e.ctx, fm, worker.Outcome{Kind: worker.KindAck})
	wantLeaseLost(t, "FIFO ack of an expired receipt", err)
	if !strings.Contains(err.Error(), "expired") {
		t.Errorf("FIFO ack of an expired receipt: %v, want the SQS error's text kept", err)
	}
}

// TestExtend: ChangeMessageVisibilityBatch in chunks of 10, one error per
// message; a garbage receipt fails its entry only.
func TestExtend(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("extend", nil)
	for i := 0; i < 12; i++ {
		e.send(q, string(rune('a'+i)), nil, "")
	}
	src := e.source(q, sqssource.Config{})
	msgs := append(e.receive(src, 2*time.Second), e.receive(src, 2*time.Second)...)
	if len(msgs) != 12 {
		t.Fatalf("received %d, want 12", len(msgs))
	}
	// The garbage one lands in the second chunk (index 10).
	ext := append(append(msgs[:10:10], &worker.Message{ID: "g", Receipt: "garbage"}), msgs[10:]...)
	errs, err := src.Extend(e.ctx, ext, 10*time.Second)
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if len(errs) != len(ext) {
		t.Fatalf("Extend answered %d errors for %d messages", len(errs), len(ext))
	}
	for i, err := range errs {
		if i == 10 {
			wantLeaseLost(t, "the garbage receipt's entry", err)
		} else if err != nil {
			t.Errorf("entry %d: %v", i, err)
		}
	}
	e.clock.Advance(9999 * time.Millisecond)
	e.receiveNone(src, "before the extended leases end")
	e.clock.Advance(time.Millisecond)
	if got := e.receive(src, time.Minute); len(got) != 10 {
		t.Fatalf("after the extended leases: received %d, want 10 (of 12)", len(got))
	}
	if _, err := src.Extend(e.ctx, msgs[:1], 13*time.Hour); err == nil {
		t.Error("Extend to 13 h: no error")
	}
	if errs, err := src.Extend(e.ctx, nil, time.Minute); err != nil || len(errs) != 0 {
		t.Errorf("Extend of none = %v, %v; want no errors", errs, err)
	}
	// A call that fails as a whole (the queue is gone) fails every entry and the call.
	if _, err := e.c.DeleteQueue(e.ctx, &sqs.DeleteQueueInput{QueueUrl: &q}); err != nil {
		t.Fatal(err)
	}
	errs, err = src.Extend(e.ctx, msgs[:2], time.Minute)
	if err == nil || len(errs) != 2 || errs[0] == nil || errs[1] == nil || errors.Is(err, worker.ErrLeaseLost) {
		t.Errorf("Extend on a deleted queue = %v, %v; want the call's error on both entries and the call", errs, err)
	}
}
