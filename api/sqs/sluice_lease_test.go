package sqs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/testutil"
)

// What SQS clients reach of the Sluice settings through the lease actions:
// a RetryPolicy's backoff after ChangeMessageVisibility to 0, a dead letter
// moved at once by the failure that used its last attempt (and its
// DeadLetterQueueSourceArn), Paused, and DeliveryMode at-most-once. These
// run on the real clock: the backoffs are whole seconds, the tests wait for
// them with long polls under a deadline.

// receiveOne long-polls q for one message, failing t after timeout.
func (e *env) receiveOne(q string, timeout time.Duration, sysAttrs ...types.MessageSystemAttributeName) types.Message {
	e.t.Helper()
	var m *types.Message
	testutil.Eventually(e.t, timeout, "a message on "+q, func() bool {
		out, err := e.client.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: sysAttrs})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			m = &out.Messages[0]
		}
		return m != nil
	})
	return *m
}

// receiveNone checks that q has nothing to deliver now.
func (e *env) receiveNone(q, what string) {
	e.t.Helper()
	out, err := e.client.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 0})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Messages) != 0 {
		e.t.Fatalf("%s: received %q", what, aws.ToString(out.Messages[0].Body))
	}
}

// attrsOf reads the named attributes of q.
func (e *env) attrsOf(q string, names ...types.QueueAttributeName) map[string]string {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: &q, AttributeNames: names})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Attributes
}

// clockSlack is how much earlier than a backoff's length, on this test's
// monotonic clock, a message may come back (see its use).
const clockSlack = 10 * time.Millisecond

func TestRetryPolicyBackoffAfterNack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	// Backoffs 2 s, 4 s, 8 s (jitter none, so exact): the checks "while
	// backing off" below must all fit in the first backoff, synced writes
	// included, on a loaded machine.
	q := e.queue("backoff", map[string]string{"RetryPolicy": `{"baseSeconds":2,"maxSeconds":8,"jitter":"none"}`})
	if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("retry me")}); err != nil {
		t.Fatal(err)
	}
	m := e.receiveOne(q, 10*time.Second)
	for attempt, backoff := range []time.Duration{2 * time.Second, 4 * time.Second} {
		nacked := time.Now()
		if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			t.Fatalf("nack %d: %v", attempt+1, err)
		}
		// Backing off: not visible, counted as delayed, its receipt stale.
		e.receiveNone(q, "right after the nack")
		if a := e.attrsOf(q, "All"); a["ApproximateNumberOfMessagesDelayed"] != "1" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
			t.Errorf("while backing off: %v", a)
		}
		_, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 5})
		apiErr(t, "a visibility change of a backing-off message's receipt", err, "InvalidParameterValue", "")

		m = e.receiveOne(q, backoff+10*time.Second, "ApproximateReceiveCount")
		// The broker's deadlines are wall-clock instants (they outlive a
		// restart) and this test measures on the monotonic clock: the two
		// may differ by a few hundred µs over seconds while the wall clock
		// is slewed (CI saw 1.999247 s for 2 s). A millisecond-level
		// tolerance still tells a 4 s backoff from a 2 s one.
		if waited := time.Since(nacked); waited < backoff-clockSlack {
			t.Fatalf("after nack %d the message came back in %v, before its backoff of %v", attempt+1, waited, backoff)
		}
		if got, want := m.Attributes["ApproximateReceiveCount"], string(rune('2'+attempt)); got != want {
			t.Errorf("ApproximateReceiveCount = %s, want %s", got, want)
		}
	}
	// A non-zero ChangeMessageVisibility is honoured: the lease is set to
	// that length and the message stays in flight, not backing off.
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 30}); err != nil {
		t.Fatal(err)
	}
	if a := e.attrsOf(q, "All"); a["ApproximateNumberOfMessagesNotVisible"] != "1" || a["ApproximateNumberOfMessagesDelayed"] != "0" {
		t.Errorf("after ChangeMessageVisibility 30: %v", a)
	}
}

func TestDeadLetterSourceArnAfterLastAttempt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dlq := e.queue("forensics-dlq", nil)
	src := e.queue("forensics", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + qarn("forensics-dlq") + `","maxReceiveCount":1}`,
		"RetryPolicy":   `{"baseSeconds":60,"jitter":"none"}`,
	})
	if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &src, MessageBody: aws.String("poison"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Sluice.CorrelationId": strAttr("corr-7")}}); err != nil {
		t.Fatal(err)
	}
	m := e.receiveOne(src, 10*time.Second)
	// The nack used the only attempt: the message moves at once, without
	// waiting out the backoff or another receive.
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	d := e.receiveOne(dlq, 5*time.Second, "All")
	if aws.ToString(d.MessageId) != aws.ToString(m.MessageId) || aws.ToString(d.Body) != "poison" {
		t.Fatalf("dead letter: %+v", d)
	}
	if got := d.Attributes["DeadLetterQueueSourceArn"]; got != qarn("forensics") {
		t.Errorf("DeadLetterQueueSourceArn = %q, want %q", got, qarn("forensics"))
	}
	if a := e.attrsOf(src, "All"); a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesDelayed"] != "0" {
		t.Errorf("source after the move: %v", a)
	}

	// The query protocol says the same.
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &dlq, ReceiptHandle: d.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	resp, body := e.form(strings.TrimPrefix(dlq, e.URL), vals("Action", "ReceiveMessage", "WaitTimeSeconds", "5", "AttributeName.1", "DeadLetterQueueSourceArn"))
	var got struct {
		Messages []xmlMessage `xml:"ReceiveMessageResult>Message"`
	}
	decode(t, body, "ReceiveMessageResponse", &got)
	if resp.StatusCode != 200 || len(got.Messages) != 1 || len(got.Messages[0].Attributes) != 1 ||
		got.Messages[0].Attributes[0] != (nameValue{"DeadLetterQueueSourceArn", qarn("forensics")}) {
		t.Fatalf("query receive from the dead-letter queue: %s", body)
	}
}

func TestPausedQueue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	q := e.queue("paused", nil)
	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"Paused": "true"}}); err != nil {
		t.Fatal(err)
	}
	// Sends are accepted; nothing is delivered.
	for _, b := range []string{"one", "two"} {
		if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(b)}); err != nil {
			t.Fatalf("send to a paused queue: %v", err)
		}
	}
	e.receiveNone(q, "a paused queue")
	if a := e.attrsOf(q, "ApproximateNumberOfMessages", "Paused"); a["ApproximateNumberOfMessages"] != "2" || a["Paused"] != "true" {
		t.Errorf("paused queue: %v", a)
	}
	// The query protocol's receive is refused the same way.
	_, body := e.form(strings.TrimPrefix(q, e.URL), vals("Action", "ReceiveMessage", "WaitTimeSeconds", "0"))
	if strings.Contains(body, "<Message>") {
		t.Fatalf("query receive on a paused queue: %s", body)
	}

	// A long poll waits through the pause and returns when it ends.
	type result struct {
		out *awssqs.ReceiveMessageOutput
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 20})
		done <- result{out, err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("a long poll on a paused queue returned: %+v, %v", r.out, r.err)
	case <-time.After(300 * time.Millisecond): // watching that it does not return
	}
	resumed := time.Now()
	resp, body := e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", q), map[string]string{"Paused": "false"}))
	if resp.StatusCode != 200 {
		t.Fatalf("resume: %d %s", resp.StatusCode, body)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.out.Messages) != 1 {
			t.Fatalf("the long poll after the resume: %+v, %v", r.out, r.err)
		}
		if took := r.at.Sub(resumed); took > 5*time.Second {
			t.Errorf("the long poll returned %v after the resume", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not return after the queue was resumed")
	}
	if a := e.attrsOf(q, "All"); a["Paused"] != "" {
		t.Errorf("All after the resume has Paused=%q", a["Paused"])
	}
}

func TestAtMostOnceDelivery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	q := e.queue("amo", map[string]string{"DeliveryMode": "at-most-once", "VisibilityTimeout": "0"})
	for _, b := range []string{"one", "two", "three"} {
		if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	m := e.receiveOne(q, 5*time.Second)
	// Gone at the receive: neither visible nor in flight, even with a zero
	// visibility timeout.
	if a := e.attrsOf(q, "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"); a["ApproximateNumberOfMessages"] != "2" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Errorf("after one receive: %v", a)
	}
	_, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 10})
	var notInflight *types.MessageNotInflight
	if !errors.As(err, &notInflight) || notInflight.ErrorCode() != "AWS.SimpleQueueService.MessageNotInflight" {
		t.Fatalf("ChangeMessageVisibility of an at-most-once delivery: %v", err)
	}
	out, err := e.client.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: &q,
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("a"), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}}})
	if err != nil || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Code) != "AWS.SimpleQueueService.MessageNotInflight" {
		t.Fatalf("ChangeMessageVisibilityBatch: %+v, %v", out, err)
	}
	if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage of an at-most-once delivery: %v", err)
	}

	// The query protocol: the same answers.
	path := strings.TrimPrefix(q, e.URL)
	_, body := e.form(path, vals("Action", "ReceiveMessage", "WaitTimeSeconds", "5"))
	var got struct {
		Messages []xmlMessage `xml:"ReceiveMessageResult>Message"`
	}
	decode(t, body, "ReceiveMessageResponse", &got)
	if len(got.Messages) != 1 || got.Messages[0].Body == aws.ToString(m.Body) {
		t.Fatalf("query receive: %s", body)
	}
	rh := got.Messages[0].ReceiptHandle
	resp, body := e.form(path, vals("Action", "ChangeMessageVisibility", "ReceiptHandle", rh, "VisibilityTimeout", "0"))
	expectError(t, resp, body, 400, "AWS.SimpleQueueService.MessageNotInflight")
	if resp, body := e.form(path, vals("Action", "DeleteMessage", "ReceiptHandle", rh)); resp.StatusCode != 200 {
		t.Fatalf("query DeleteMessage: %d %s", resp.StatusCode, body)
	}
	if a := e.attrsOf(q, "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"); a["ApproximateNumberOfMessages"] != "1" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Errorf("after two receives: %v", a)
	}
}
