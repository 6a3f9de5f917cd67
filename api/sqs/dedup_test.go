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
)

// Idempotent sends on standard queues over the wire: a
// MessageDeduplicationId on SendMessage and SendMessageBatch, answered with
// the original MessageId when repeated (JSON with aws-sdk-go-v2, query with
// raw form requests), and the dedup attributes' refusals in each
// protocol's error shape.

func TestStandardDedupJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("payments", nil)
	send := func(body, id string) *awssqs.SendMessageOutput {
		t.Helper()
		out, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body),
			MessageDeduplicationId: aws.String(id)})
		if err != nil {
			t.Fatalf("SendMessage with a MessageDeduplicationId on a standard queue: %v", err)
		}
		if out.SequenceNumber != nil {
			t.Fatalf("a standard queue answered a SequenceNumber %q", *out.SequenceNumber)
		}
		return out
	}
	one := send(`{"charge":100}`, "charge-42")
	again := send(`{"charge":100}`, "charge-42")
	if *again.MessageId != *one.MessageId {
		t.Fatalf("the repeated send answered %s, want the original %s", *again.MessageId, *one.MessageId)
	}
	batch, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("again"), MessageDeduplicationId: aws.String("charge-42")},
		{Id: aws.String("b"), MessageBody: aws.String("other"), MessageDeduplicationId: aws.String("charge-43")},
		{Id: aws.String("c"), MessageBody: aws.String("other again"), MessageDeduplicationId: aws.String("charge-43")},
		{Id: aws.String("d"), MessageBody: aws.String("no id")},
	}})
	if err != nil || len(batch.Successful) != 4 || len(batch.Failed) != 0 {
		t.Fatalf("SendMessageBatch = %+v, %v", batch, err)
	}
	ids := map[string]string{}
	for _, s := range batch.Successful {
		ids[*s.Id] = *s.MessageId
	}
	if ids["a"] != *one.MessageId || ids["c"] != ids["b"] || ids["b"] == *one.MessageId || ids["d"] == ids["b"] {
		t.Fatalf("batch ids %v, want a = %s and c = b", ids, *one.MessageId)
	}
	if visible, _ := e.queueCounts(url); visible != "3" {
		t.Fatalf("ApproximateNumberOfMessages = %s, want 3 (charge-42, charge-43, no id)", visible)
	}
	out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageDeduplicationId"}})
	if err != nil || len(out.Messages) != 3 {
		t.Fatalf("ReceiveMessage: %d messages, %v", len(out.Messages), err)
	}
	for _, m := range out.Messages {
		if *m.MessageId == *one.MessageId && m.Attributes["MessageDeduplicationId"] != "charge-42" {
			t.Errorf("the message's MessageDeduplicationId = %q, want charge-42", m.Attributes["MessageDeduplicationId"])
		}
	}
	// A malformed id is refused as on a FIFO queue.
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"),
		MessageDeduplicationId: aws.String("has space")})
	apiErr(t, "a malformed MessageDeduplicationId", err, "InvalidParameterValue", "")

	// The attributes: bounds, values, and the FIFO refusal, in the JSON shape.
	var badValue *types.InvalidAttributeValue
	for _, c := range []struct {
		name  string
		attrs map[string]string
		says  string
	}{
		{"short", map[string]string{"DeduplicationWindowSeconds": "59"}, "between 60 and 86400"},
		{"long", map[string]string{"DeduplicationWindowSeconds": "86401"}, "between 60 and 86400"},
		{"until", map[string]string{"DeduplicationUntil": "done"}, "must be window or settled"},
		{"f.fifo", map[string]string{"FifoQueue": "true", "DeduplicationWindowSeconds": "600"}, "standard queues only"},
		{"g.fifo", map[string]string{"FifoQueue": "true", "DeduplicationUntil": "settled"}, "standard queues only"},
	} {
		_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(c.name), Attributes: c.attrs})
		if !errors.As(err, &badValue) || !strings.Contains(badValue.ErrorMessage(), c.says) {
			t.Errorf("CreateQueue %s %v: %v, want InvalidAttributeValue saying %q", c.name, c.attrs, err, c.says)
		}
	}
	fifo := e.queue("h.fifo", map[string]string{"FifoQueue": "true"})
	_, err = e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &fifo,
		Attributes: map[string]string{"DeduplicationWindowSeconds": "300"}})
	if !errors.As(err, &badValue) || !strings.Contains(badValue.ErrorMessage(), "fixed 5-minute") {
		t.Errorf("SetQueueAttributes DeduplicationWindowSeconds on a FIFO queue: %v", err)
	}
	// The raw reply: status, __type and the query code header.
	resp, body := e.post("/", "application/x-amz-json-1.0", "AmazonSQS.SetQueueAttributes",
		`{"QueueUrl":"`+url+`","Attributes":{"DeduplicationWindowSeconds":"100000"}}`)
	expectJSONError(t, resp, body, http.StatusBadRequest, "com.amazonaws.sqs#InvalidAttributeValue", "InvalidAttributeValue")
}

func TestStandardDedupQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("jobs", map[string]string{"DeduplicationUntil": "settled"})
	path := "/" + acct + "/jobs"
	send := func(v ...string) string {
		t.Helper()
		resp, body := e.form(path, vals(append([]string{"Action", "SendMessage"}, v...)...))
		var sent struct {
			MessageID      string `xml:"SendMessageResult>MessageId"`
			SequenceNumber string `xml:"SendMessageResult>SequenceNumber"`
		}
		decode(t, body, "SendMessageResponse", &sent)
		if resp.StatusCode != http.StatusOK || sent.MessageID == "" || sent.SequenceNumber != "" {
			t.Fatalf("SendMessage: %d\n%s", resp.StatusCode, body)
		}
		return sent.MessageID
	}
	one := send("MessageBody", "report", "MessageDeduplicationId", "report-2024-06")
	if again := send("MessageBody", "report", "MessageDeduplicationId", "report-2024-06"); again != one {
		t.Fatalf("the repeated send answered %s, want %s", again, one)
	}
	resp, body := e.form(path, vals("Action", "SendMessageBatch",
		"SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "report",
		"SendMessageBatchRequestEntry.1.MessageDeduplicationId", "report-2024-06",
		"SendMessageBatchRequestEntry.2.Id", "b", "SendMessageBatchRequestEntry.2.MessageBody", "other",
		"SendMessageBatchRequestEntry.2.MessageDeduplicationId", "report-2024-07"))
	var batch struct {
		Entries []struct {
			ID        string `xml:"Id"`
			MessageID string `xml:"MessageId"`
		} `xml:"SendMessageBatchResult>SendMessageBatchResultEntry"`
	}
	decode(t, body, "SendMessageBatchResponse", &batch)
	if resp.StatusCode != http.StatusOK || len(batch.Entries) != 2 {
		t.Fatalf("SendMessageBatch: %d\n%s", resp.StatusCode, body)
	}
	got := map[string]string{}
	for _, x := range batch.Entries {
		got[x.ID] = x.MessageID
	}
	if got["a"] != one || got["b"] == one || got["b"] == "" {
		t.Fatalf("batch ids %v, want a = %s", got, one)
	}
	// The attributes in the query protocol's XML error shape.
	for _, attrs := range []map[string]string{
		{"DeduplicationWindowSeconds": "59"},
		{"DeduplicationWindowSeconds": "86401"},
		{"DeduplicationUntil": "Settled"},
	} {
		resp, body := e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", e.URL+path), attrs))
		expectError(t, resp, body, 400, "InvalidAttributeValue")
	}
	resp, body = e.form("/", queryAttrs(vals("Action", "CreateQueue", "QueueName", "q.fifo"),
		map[string]string{"FifoQueue": "true", "DeduplicationWindowSeconds": "600"}))
	if er := expectError(t, resp, body, 400, "InvalidAttributeValue"); !strings.Contains(er.Message, "standard queues only") {
		t.Errorf("the window on a FIFO queue: %+v", er)
	}
}
