package sqssource_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// TestDeadLetterNow: the emulated dead-letter-now sends a copy to the
// queue's dead-letter queue (resolved from its RedrivePolicy) with the body,
// the attributes (Sluice.MaxAttempts and Sluice.TimeToLive dropped) and the
// reason, then deletes the message from the source.
func TestDeadLetterNow(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q, dlq := e.withDLQ("dl", false, 5)
	blob := []byte{0, 0xff}
	e.send(q, "poison", map[string]types.MessageAttributeValue{
		"kind":                 str("order.created"),
		"amount":               num("12"),
		"blob":                 {DataType: aws.String("Binary.raw"), BinaryValue: blob},
		"Sluice.Priority":      num("-3"),
		"Sluice.CorrelationId": str("corr-1"),
		"Sluice.MaxAttempts":   num("2"),
		"Sluice.TimeToLive":    num("3600"),
		"traceparent":          str(traceparent),
	}, "")
	src := e.source(q, sqssource.Config{})
	m := e.receiveOne(src, time.Minute)
	e.settle(src, m, worker.Outcome{Kind: worker.KindDeadLetter, Reason: "cannot parse order: unexpected EOF"})

	got := e.rawReceive(dlq)
	if len(got) != 1 {
		t.Fatalf("dead-letter queue holds %d messages, want 1", len(got))
	}
	d := got[0]
	if aws.ToString(d.Body) != "poison" {
		t.Errorf("dead letter body %q, want poison", aws.ToString(d.Body))
	}
	wantAttrs := map[string]string{
		"kind":                              "String=order.created",
		"amount":                            "Number=12",
		"blob":                              fmt.Sprintf("Binary.raw=%x", blob),
		"Sluice.Priority":                   "Number=-3",
		"Sluice.CorrelationId":              "String=corr-1",
		"traceparent":                       "String=" + traceparent,
		sqssource.DeadLetterReasonAttribute: "String=cannot parse order: unexpected EOF",
	}
	if gotAttrs := attrStrings(d.MessageAttributes); !maps.Equal(gotAttrs, wantAttrs) {
		t.Errorf("dead letter attributes\n got %v\nwant %v", gotAttrs, wantAttrs)
	}
	// Gone from the source, also once the reserved lease would have ended.
	e.clock.Advance(time.Hour)
	e.receiveNone(src, "the source after the dead-letter")
	if n := e.attr(q, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible); n != "0" {
		t.Errorf("source in flight %s, want 0", n)
	}
}

// TestDeadLetterNowFifo: on FIFO queues the copy keeps its group and gets
// the message id as its deduplication id.
func TestDeadLetterNowFifo(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q, dlq := e.withDLQ("dlf", true, 5)
	id := e.send(q, "poison", map[string]types.MessageAttributeValue{"kind": str("x")}, "group-7")
	src := e.source(q, sqssource.Config{})
	m := e.receiveOne(src, time.Minute)
	e.settle(src, m, worker.Outcome{Kind: worker.KindDeadLetter, Reason: "bad"})
	got := e.rawReceive(dlq)
	if len(got) != 1 {
		t.Fatalf("dead-letter queue holds %d messages, want 1", len(got))
	}
	sys := got[0].Attributes
	if sys["MessageGroupId"] != "group-7" || sys["MessageDeduplicationId"] != id {
		t.Errorf("dead letter group %q dedup %q; want group-7, %s", sys["MessageGroupId"], sys["MessageDeduplicationId"], id)
	}
	if r := got[0].MessageAttributes[sqssource.DeadLetterReasonAttribute]; aws.ToString(r.StringValue) != "bad" {
		t.Errorf("dead letter reason %q, want bad", aws.ToString(r.StringValue))
	}
	e.clock.Advance(time.Hour)
	e.receiveNone(src, "the FIFO source after the dead-letter")
}

// TestDeadLetterNowFullAttributes: a message with SQS's 10 attributes keeps
// them all in its copy, and the reason is left out (logged instead).
func TestDeadLetterNowFullAttributes(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q, dlq := e.withDLQ("dl10", false, 5)
	attrs := map[string]types.MessageAttributeValue{}
	for i := range 10 {
		attrs[fmt.Sprintf("a%d", i)] = str(fmt.Sprint(i))
	}
	e.send(q, "full", attrs, "")
	src := e.source(q, sqssource.Config{})
	m := e.receiveOne(src, time.Minute)
	e.settle(src, m, worker.Outcome{Kind: worker.KindDeadLetter, Reason: "r"})
	got := e.rawReceive(dlq)
	if len(got) != 1 {
		t.Fatalf("dead-letter queue holds %d messages, want 1", len(got))
	}
	if n := len(got[0].MessageAttributes); n != 10 {
		t.Errorf("dead letter has %d attributes, want the message's 10", n)
	}
	if _, ok := got[0].MessageAttributes[sqssource.DeadLetterReasonAttribute]; ok {
		t.Error("dead letter has a reason attribute: it cannot fit with 10 others")
	}
}

// TestDeadLetterNowOverride: Config.DeadLetterQueueURL names the
// dead-letter queue of a queue without a RedrivePolicy; the reason is cut to
// worker.MaxReasonBytes, made valid for SQS, and an empty one gets a default.
func TestDeadLetterNowOverride(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("plain", nil)
	parking := e.queue("parking", nil)
	e.send(q, "a", nil, "")
	e.send(q, "b", nil, "")
	e.send(q, "c", nil, "")
	src := e.source(q, sqssource.Config{DeadLetterQueueURL: parking})
	long := strings.Repeat("é", worker.MaxReasonBytes) // 2 bytes a rune
	for _, m := range e.receive(src, time.Minute) {
		reason := map[string]string{"a": long, "b": "", "c": "bad\x00byte \xff"}[string(m.Body)]
		e.settle(src, m, worker.Outcome{Kind: worker.KindDeadLetter, Reason: reason})
	}
	got := e.rawReceive(parking)
	if len(got) != 3 {
		t.Fatalf("parking queue holds %d messages, want 3", len(got))
	}
	for _, d := range got {
		r := aws.ToString(d.MessageAttributes[sqssource.DeadLetterReasonAttribute].StringValue)
		switch aws.ToString(d.Body) {
		case "a":
			if r != long[:worker.MaxReasonBytes] {
				t.Errorf("long reason kept as %d bytes, want its first %d", len(r), worker.MaxReasonBytes)
			}
		case "b":
			if r == "" {
				t.Error("empty reason sent empty; SQS refuses empty attribute values")
			}
		case "c":
			if r != "bad\uFFFDbyte \uFFFD" {
				t.Errorf("reason with a NUL and invalid UTF-8 sent as %q, want them replaced by U+FFFD", r)
			}
		}
	}
}

// TestDeadLetterNoRedrive: a queue without a RedrivePolicy or an override
// answers ErrNoDeadLetterQueue, and the message stays leased until its lease
// ends.
func TestDeadLetterNoRedrive(t *testing.T) {
	t.Parallel()
	e := setup(t, true)
	q := e.queue("nodlq", nil)
	e.send(q, "a", nil, "")
	src := e.source(q, sqssource.Config{})
	m := e.receiveOne(src, 10*time.Second)
	err := src.Settle(e.ctx, m, worker.Outcome{Kind: worker.KindDeadLetter, Reason: "r"})
	if !errors.Is(err, sqssource.ErrNoDeadLetterQueue) {
		t.Fatalf("dead-letter without a dead-letter queue: %v, want ErrNoDeadLetterQueue", err)
	}
	if m = e.invisibleFor(src, 10*time.Second); m.ReceiveCount != 2 {
		t.Errorf("ReceiveCount %d, want 2", m.ReceiveCount)
	}
}

// attrStrings renders attributes as "Type=value" (a binary value in hex).
func attrStrings(attrs map[string]types.MessageAttributeValue) map[string]string {
	out := map[string]string{}
	for n, a := range attrs {
		if strings.HasPrefix(aws.ToString(a.DataType), "Binary") {
			out[n] = fmt.Sprintf("%s=%x", aws.ToString(a.DataType), a.BinaryValue)
		} else {
			out[n] = aws.ToString(a.DataType) + "=" + aws.ToString(a.StringValue)
		}
	}
	return out
}
