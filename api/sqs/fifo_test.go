package sqs_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// FIFO queues over the wire: aws-sdk-go-v2 (JSON) and the query protocol.

func TestFifoJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("orders.fifo", map[string]string{"FifoQueue": "true"})

	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false",
		"DeduplicationScope": "queue", "FifoThroughputLimit": "perQueue"} {
		if attrs.Attributes[k] != want {
			t.Errorf("attribute %s = %q, want %q", k, attrs.Attributes[k], want)
		}
	}

	one, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("o1"),
		MessageGroupId: aws.String("customer-1"), MessageDeduplicationId: aws.String("o1")})
	if err != nil {
		t.Fatal(err)
	}
	if one.SequenceNumber == nil || *one.SequenceNumber == "" {
		t.Fatal("SendMessage on a FIFO queue returned no SequenceNumber")
	}
	// A duplicate: the original id and sequence number.
	dup, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("o1"),
		MessageGroupId: aws.String("customer-1"), MessageDeduplicationId: aws.String("o1")})
	if err != nil || *dup.MessageId != *one.MessageId || *dup.SequenceNumber != *one.SequenceNumber {
		t.Fatalf("duplicate send = %v %v, want %s", dup, err, *one.MessageId)
	}
	batch, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("o2"), MessageGroupId: aws.String("customer-1"), MessageDeduplicationId: aws.String("o2")},
		{Id: aws.String("b"), MessageBody: aws.String("o3"), MessageGroupId: aws.String("customer-1"), MessageDeduplicationId: aws.String("o3")},
	}})
	if err != nil || len(batch.Successful) != 2 {
		t.Fatalf("batch = %+v, %v", batch, err)
	}
	for _, s := range batch.Successful {
		if s.SequenceNumber == nil || *s.SequenceNumber <= *one.SequenceNumber {
			t.Fatalf("batch entry %s SequenceNumber %v, want above %s", *s.Id, s.SequenceNumber, *one.SequenceNumber)
		}
	}

	recv := func(attempt string) *awssqs.ReceiveMessageOutput {
		t.Helper()
		in := &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}
		if attempt != "" {
			in.ReceiveRequestAttemptId = aws.String(attempt)
		}
		out, err := e.client.ReceiveMessage(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := recv("try-1")
	if len(out.Messages) != 3 {
		t.Fatalf("received %d messages, want 3", len(out.Messages))
	}
	for i, m := range out.Messages {
		if want := []string{"o1", "o2", "o3"}[i]; *m.Body != want {
			t.Fatalf("message %d = %s, want %s", i, *m.Body, want)
		}
		a := m.Attributes
		if a["MessageGroupId"] != "customer-1" || a["MessageDeduplicationId"] != *m.Body || a["SequenceNumber"] == "" {
			t.Fatalf("system attributes of %s: %v", *m.Body, a)
		}
	}
	if out.Messages[0].Attributes["SequenceNumber"] != *one.SequenceNumber {
		t.Fatalf("received SequenceNumber %s, send answered %s", out.Messages[0].Attributes["SequenceNumber"], *one.SequenceNumber)
	}
	again := recv("try-1")
	if len(again.Messages) != 3 || *again.Messages[2].ReceiptHandle != *out.Messages[2].ReceiptHandle {
		t.Fatalf("retried receive returned %d messages or other receipts", len(again.Messages))
	}
	if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, ReceiveRequestAttemptId: aws.String("try-1")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" || !strings.Contains(ae.ErrorMessage(), "receiveRequestAttemptId is not valid anymore") {
		t.Fatalf("retry after delete: %v", err)
	}
	// The group is locked while o2 and o3 are in flight.
	if out := recv(""); len(out.Messages) != 0 {
		t.Fatalf("locked group returned %d messages", len(out.Messages))
	}
}

func TestFifoJSONErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("e.fifo", map[string]string{"FifoQueue": "true"})
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode() + ": " + ae.ErrorMessage()
		}
		return "no API error: " + func() string {
			if err == nil {
				return "<nil>"
			}
			return err.Error()
		}()
	}
	_, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	if got := code(err); got != "MissingParameter: The request must contain the parameter MessageGroupId." {
		t.Errorf("no group: %s", got)
	}
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")})
	if got := code(err); got != "InvalidParameterValue: The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly" {
		t.Errorf("no dedup id: %s", got)
	}
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageGroupId: aws.String("group 123"), MessageDeduplicationId: aws.String("d")})
	if got := code(err); !strings.HasPrefix(got, "InvalidParameterValue: Value group 123 for parameter MessageGroupId is invalid.") {
		t.Errorf("bad group: %s", got)
	}
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d"), DelaySeconds: 2})
	if got := code(err); !strings.HasPrefix(got, "InvalidParameterValue: Value 2 for parameter DelaySeconds is invalid.") {
		t.Errorf("per-message delay: %s", got)
	}
	// A standard queue cannot use a FIFO dead-letter queue.
	_, err = e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("std"), Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:e.fifo","maxReceiveCount":3}`}})
	if got := code(err); !strings.HasPrefix(got, "InvalidParameterValue") {
		t.Errorf("standard queue with a FIFO DLQ: %s", got)
	}
}

// TestFifoQuery: SequenceNumber in the XML replies, the FIFO parameters of
// query requests (including batch entries).
func TestFifoQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("q.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	path := "/000000000000/q.fifo"
	resp, body := e.form(path, vals("Action", "SendMessage", "MessageBody", "first", "MessageGroupId", "g"))
	var sent struct {
		MessageID      string `xml:"SendMessageResult>MessageId"`
		SequenceNumber string `xml:"SendMessageResult>SequenceNumber"`
	}
	decode(t, body, "SendMessageResponse", &sent)
	if resp.StatusCode != http.StatusOK || sent.SequenceNumber == "" {
		t.Fatalf("SendMessage: %d\n%s", resp.StatusCode, body)
	}
	resp, body = e.form(path, vals("Action", "SendMessageBatch",
		"SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "second",
		"SendMessageBatchRequestEntry.1.MessageGroupId", "g",
		"SendMessageBatchRequestEntry.2.Id", "b", "SendMessageBatchRequestEntry.2.MessageBody", "third",
		"SendMessageBatchRequestEntry.2.MessageGroupId", "g", "SendMessageBatchRequestEntry.2.MessageDeduplicationId", "x"))
	var batch struct {
		Entries []struct {
			ID             string `xml:"Id"`
			SequenceNumber string `xml:"SequenceNumber"`
		} `xml:"SendMessageBatchResult>SendMessageBatchResultEntry"`
	}
	decode(t, body, "SendMessageBatchResponse", &batch)
	if resp.StatusCode != http.StatusOK || len(batch.Entries) != 2 || batch.Entries[1].SequenceNumber <= batch.Entries[0].SequenceNumber ||
		batch.Entries[0].SequenceNumber <= sent.SequenceNumber {
		t.Fatalf("SendMessageBatch: %d\n%s", resp.StatusCode, body)
	}
	resp, body = e.form(path, vals("Action", "ReceiveMessage", "MaxNumberOfMessages", "10", "ReceiveRequestAttemptId", "r1",
		"AttributeName.1", "SequenceNumber", "AttributeName.2", "MessageGroupId"))
	var recv struct {
		Messages []xmlMessage `xml:"ReceiveMessageResult>Message"`
	}
	decode(t, body, "ReceiveMessageResponse", &recv)
	if resp.StatusCode != http.StatusOK || len(recv.Messages) != 3 {
		t.Fatalf("ReceiveMessage: %d\n%s", resp.StatusCode, body)
	}
	got := map[string]string{}
	for _, a := range recv.Messages[0].Attributes {
		got[a.Name] = a.Value
	}
	if recv.Messages[0].Body != "first" || got["SequenceNumber"] != sent.SequenceNumber || got["MessageGroupId"] != "g" || len(got) != 2 {
		t.Fatalf("first message %s attributes %v\n%s", recv.Messages[0].Body, got, body)
	}
	resp, body = e.form(path, vals("Action", "ReceiveMessage", "MaxNumberOfMessages", "10", "ReceiveRequestAttemptId", "r1"))
	var again struct {
		Messages []xmlMessage `xml:"ReceiveMessageResult>Message"`
	}
	decode(t, body, "ReceiveMessageResponse", &again)
	if resp.StatusCode != http.StatusOK || len(again.Messages) != 3 || again.Messages[1].ReceiptHandle != recv.Messages[1].ReceiptHandle {
		t.Fatalf("retried ReceiveMessage: %d\n%s", resp.StatusCode, body)
	}
	resp, body = e.form(path, vals("Action", "SendMessage", "MessageBody", "x"))
	expectError(t, resp, body, 400, "MissingParameter")
}
