package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/testutil"
)

// TestClientGoSDK runs aws-sdk-go-v2 service/sqs (AWS JSON 1.0, its MD5
// validation on) against the built binary through a message's whole life on
// standard and FIFO queues. api/sqs has the in-process SDK tests per action;
// this one proves the binary end to end.
func TestClientGoSDK(t *testing.T) {
	t.Parallel()
	b := startClientBroker(t)
	for _, part := range clientParts {
		t.Run(part.name, func(t *testing.T) {
			t.Parallel()
			part.skipMissing(t, b.feats)
			kind, what, _ := strings.Cut(part.name, "-")
			l := &goLife{t: t, c: sqsClient(b.p.URL), fifo: kind == "fifo", prefix: uniquePrefix("gosdk"), ctx: ctxT(t)}
			switch what {
			case "lifecycle":
				l.lifecycle()
			case "redrive":
				l.redrive()
			case "move":
				l.move()
			}
		})
	}
}

var goAttrs = map[string]types.MessageAttributeValue{
	"trace": {DataType: aws.String("String"), StringValue: aws.String("trace-é漢")},
	"count": {DataType: aws.String("Number"), StringValue: aws.String("42")},
	"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 0xfe, 0xff}},
	"kind":  {DataType: aws.String("String.custom"), StringValue: aws.String("custom type")},
}

type goLife struct {
	t      *testing.T
	c      *sqs.Client
	ctx    context.Context
	fifo   bool
	prefix string
}

func (l *goLife) must(err error, what string) {
	l.t.Helper()
	if err != nil {
		l.t.Fatalf("%s: %v", what, err)
	}
}

func (l *goLife) name(base string) string {
	if l.fifo {
		return l.prefix + "-" + base + ".fifo"
	}
	return l.prefix + "-" + base
}

func (l *goLife) create(base string, attrs map[string]string) string {
	l.t.Helper()
	if attrs == nil {
		attrs = map[string]string{}
	}
	if l.fifo {
		attrs["FifoQueue"] = "true"
	}
	out, err := l.c.CreateQueue(l.ctx, &sqs.CreateQueueInput{QueueName: aws.String(l.name(base)), Attributes: attrs})
	l.must(err, "CreateQueue "+l.name(base))
	got, err := l.c.GetQueueUrl(l.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(l.name(base))})
	l.must(err, "GetQueueUrl")
	if *got.QueueUrl != *out.QueueUrl {
		l.t.Fatalf("GetQueueUrl %s, CreateQueue %s", *got.QueueUrl, *out.QueueUrl)
	}
	return *out.QueueUrl
}

func (l *goLife) attrs(url string) map[string]string {
	l.t.Helper()
	out, err := l.c.GetQueueAttributes(l.ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	l.must(err, "GetQueueAttributes")
	return out.Attributes
}

func (l *goLife) counts(url string) string {
	a := l.attrs(url)
	return a["ApproximateNumberOfMessages"] + "/" + a["ApproximateNumberOfMessagesNotVisible"]
}

func (l *goLife) send(url, body, group, dedup string) *sqs.SendMessageOutput {
	l.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageAttributes: goAttrs}
	if l.fifo {
		in.MessageGroupId, in.MessageDeduplicationId = &group, &dedup
	}
	out, err := l.c.SendMessage(l.ctx, in) // the SDK checks both MD5s
	l.must(err, "SendMessage")
	if l.fifo && out.SequenceNumber == nil {
		l.t.Fatal("FIFO SendMessage without SequenceNumber")
	}
	return out
}

func (l *goLife) receive(url string, wait int32, max int32) []types.Message {
	l.t.Helper()
	out, err := l.c.ReceiveMessage(l.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: wait,
		MaxNumberOfMessages: max, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	l.must(err, "ReceiveMessage")
	return out.Messages
}

func (l *goLife) receiveN(url string, n int) []types.Message {
	l.t.Helper()
	var got []types.Message
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, l.receive(url, 5, 10)...)
	}
	if len(got) != n {
		l.t.Fatalf("received %d messages, want %d", len(got), n)
	}
	return got
}

func (l *goLife) expectEmpty(url, what string) {
	l.t.Helper()
	start := time.Now()
	if msgs := l.receive(url, 1, 10); len(msgs) != 0 {
		l.t.Fatalf("%s: a receive got %d messages, want none", what, len(msgs))
	}
	if d := time.Since(start); d < 800*time.Millisecond {
		l.t.Fatalf("%s: an empty 1 s long poll returned after %v", what, d)
	}
}

func (l *goLife) lifecycle() {
	t := l.t
	url := l.create("life", map[string]string{"VisibilityTimeout": "30"})
	if a := l.attrs(url); a["VisibilityTimeout"] != "30" || !strings.HasSuffix(a["QueueArn"], ":"+l.name("life")) ||
		(l.fifo && a["FifoQueue"] != "true") {
		t.Fatalf("queue attributes %v", a)
	}
	l.expectEmpty(url, "new queue")

	// A long poll started before the send returns the message as soon as it is sent.
	type result struct {
		msgs []types.Message
		took time.Duration
	}
	polled := make(chan result, 1)
	start := time.Now()
	go func() {
		out, err := l.c.ReceiveMessage(l.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Errorf("long poll: %v", err)
			out = &sqs.ReceiveMessageOutput{}
		}
		polled <- result{out.Messages, time.Since(start)}
	}()
	mid := *l.send(url, "single body", "g1", "d1").MessageId
	r := <-polled
	if len(r.msgs) != 1 || *r.msgs[0].MessageId != mid || r.took > 15*time.Second {
		t.Fatalf("long poll got %d messages after %v", len(r.msgs), r.took)
	}
	m := r.msgs[0]
	if *m.Body != "single body" || *m.MessageAttributes["trace"].StringValue != "trace-é漢" ||
		string(m.MessageAttributes["blob"].BinaryValue) != "\x00\x01\xfe\xff" ||
		*m.MessageAttributes["kind"].DataType != "String.custom" || m.Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("received %+v", m)
	}
	if l.fifo && (m.Attributes["MessageGroupId"] != "g1" || m.Attributes["SequenceNumber"] == "") {
		t.Fatalf("FIFO system attributes %v", m.Attributes)
	}
	if c := l.counts(url); c != "0/1" {
		t.Fatalf("counts while leased %s, want 0/1", c)
	}
	// Shorten the lease to 1 s: a long poll gets the message back when it ends.
	_, err := l.c.ChangeMessageVisibility(l.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url,
		ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 1})
	l.must(err, "ChangeMessageVisibility")
	again := l.receive(url, 10, 1)
	if len(again) != 1 || *again[0].MessageId != mid || again[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("after the lease ended: %+v", again)
	}
	_, err = l.c.DeleteMessage(l.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: again[0].ReceiptHandle})
	l.must(err, "DeleteMessage")
	if c := l.counts(url); c != "0/0" {
		t.Fatalf("counts after delete %s", c)
	}
	if l.fifo {
		if dup := *l.send(url, "single body", "g1", "d1").MessageId; dup != mid {
			t.Fatalf("duplicate send answered %s, want the first id %s", dup, mid)
		}
		l.expectEmpty(url, "after a deduplicated send")
	}

	entries := make([]types.SendMessageBatchRequestEntry, 3)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprintf("e%d", i)),
			MessageBody: aws.String(fmt.Sprintf("batch body %d", i)), MessageAttributes: goAttrs}
		if l.fifo {
			entries[i].MessageGroupId = aws.String("g2")
			entries[i].MessageDeduplicationId = aws.String(fmt.Sprintf("b%d", i))
		}
	}
	sb, err := l.c.SendMessageBatch(l.ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
	l.must(err, "SendMessageBatch")
	if len(sb.Successful) != 3 || len(sb.Failed) != 0 {
		t.Fatalf("SendMessageBatch %+v", sb)
	}
	got := l.receiveN(url, 3)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, *m.Body)
	}
	if !l.fifo {
		slices.Sort(bodies)
	}
	if want := []string{"batch body 0", "batch body 1", "batch body 2"}; !slices.Equal(bodies, want) {
		t.Fatalf("batch bodies %q, want %q", bodies, want)
	}
	var vis []types.ChangeMessageVisibilityBatchRequestEntry
	for i, m := range got {
		vis = append(vis, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	cv, err := l.c.ChangeMessageVisibilityBatch(l.ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: vis})
	if err != nil || len(cv.Successful) != 3 {
		t.Fatalf("ChangeMessageVisibilityBatch %+v %v", cv, err)
	}
	got = l.receiveN(url, 3)
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range got {
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	db, err := l.c.DeleteMessageBatch(l.ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: del})
	if err != nil || len(db.Successful) != 3 {
		t.Fatalf("DeleteMessageBatch %+v %v", db, err)
	}
	if c := l.counts(url); c != "0/0" {
		t.Fatalf("counts after the batch delete %s", c)
	}
	l.expectEmpty(url, "after the batch delete")
	_, err = l.c.DeleteQueue(l.ctx, &sqs.DeleteQueueInput{QueueUrl: &url})
	l.must(err, "DeleteQueue")
	var qdne *types.QueueDoesNotExist
	if _, err := l.c.GetQueueUrl(l.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(l.name("life"))}); !errors.As(err, &qdne) {
		t.Fatalf("GetQueueUrl of a deleted queue: %v, want QueueDoesNotExist", err)
	}
}

// redrive sends one message to a queue whose RedrivePolicy has
// maxReceiveCount 1, receives it, ends its lease; the next receive moves it to
// the DLQ. It leaves the message visible in the DLQ.
func (l *goLife) redrive() (src, dlq, body string) {
	t := l.t
	dlq = l.create("dlq", nil)
	dlqArn := l.attrs(dlq)["QueueArn"]
	rp, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqArn, "maxReceiveCount": 1})
	src = l.create("src", map[string]string{"RedrivePolicy": string(rp)})
	body = "poison " + l.prefix
	mid := *l.send(src, body, "g1", "p1").MessageId
	first := l.receive(src, 5, 10)
	if len(first) != 1 {
		t.Fatalf("first receive got %d", len(first))
	}
	_, err := l.c.ChangeMessageVisibility(l.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: first[0].ReceiptHandle})
	l.must(err, "ChangeMessageVisibility 0")
	if again := l.receive(src, 1, 10); len(again) != 0 {
		t.Fatalf("second receive returned the message instead of moving it to the DLQ")
	}
	dead := l.receive(dlq, 5, 10)
	if len(dead) != 1 || *dead[0].MessageId != mid || *dead[0].Body != body ||
		*dead[0].MessageAttributes["count"].StringValue != "42" ||
		dead[0].Attributes["DeadLetterQueueSourceArn"] != l.attrs(src)["QueueArn"] {
		t.Fatalf("DLQ receive %+v", dead)
	}
	_, err = l.c.ChangeMessageVisibility(l.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &dlq, ReceiptHandle: dead[0].ReceiptHandle})
	l.must(err, "ChangeMessageVisibility 0 in the DLQ")
	if c := l.counts(src); c != "0/0" {
		t.Fatalf("source counts %s after the redrive", c)
	}
	return src, dlq, body
}

func (l *goLife) move() {
	t := l.t
	src, dlq, body := l.redrive()
	dlqArn := l.attrs(dlq)["QueueArn"]
	srcs, err := l.c.ListDeadLetterSourceQueues(l.ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
	if err != nil || !slices.Equal(srcs.QueueUrls, []string{src}) {
		t.Fatalf("ListDeadLetterSourceQueues %+v %v", srcs, err)
	}
	st, err := l.c.StartMessageMoveTask(l.ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn})
	if err != nil || aws.ToString(st.TaskHandle) == "" {
		t.Fatalf("StartMessageMoveTask %+v %v", st, err)
	}
	var task types.ListMessageMoveTasksResultEntry
	testutil.Eventually(t, 30*time.Second, "the move task to complete", func() bool {
		out, err := l.c.ListMessageMoveTasks(l.ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &dlqArn})
		if err != nil || len(out.Results) == 0 {
			t.Fatalf("ListMessageMoveTasks %+v %v", out, err)
		}
		task = out.Results[0]
		switch s := aws.ToString(task.Status); s {
		case "COMPLETED":
			return true
		case "RUNNING", "CANCELLING":
			return false
		default:
			t.Fatalf("move task status %s: %+v", s, task)
			return false
		}
	})
	if task.ApproximateNumberOfMessagesMoved != 1 || aws.ToString(task.SourceArn) != dlqArn {
		t.Fatalf("completed task %+v", task)
	}
	back := l.receive(src, 5, 10)
	if len(back) != 1 || *back[0].Body != body || *back[0].MessageAttributes["count"].StringValue != "42" {
		t.Fatalf("after the move, the source gave %+v", back)
	}
	_, err = l.c.DeleteMessage(l.ctx, &sqs.DeleteMessageInput{QueueUrl: &src, ReceiptHandle: back[0].ReceiptHandle})
	l.must(err, "DeleteMessage")
	if c := l.counts(dlq); c != "0/0" {
		t.Fatalf("DLQ counts %s after the move", c)
	}
}
