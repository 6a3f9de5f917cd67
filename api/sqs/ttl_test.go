package sqs_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/testutil"
)

// Time to live over the wire: the message attribute Sluice.TimeToLive and
// the queue attributes MessageTimeToLive and ExpiredMessageAction, read and
// set in both protocols (JSON with aws-sdk-go-v2, query with raw form
// requests), a message that expires unreceived, and the refusals in each
// protocol's error shape: InvalidParameterValue for a message,
// InvalidAttributeValue for a queue.

func ttlAttr(v string) map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{"Sluice.TimeToLive": {DataType: aws.String("Number"), StringValue: aws.String(v)}}
}

func TestTimeToLiveJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.queue("dlq", nil)
	url := e.queue("jobs", map[string]string{"MessageRetentionPeriod": "3600", "MessageTimeToLive": "600",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"3"}`})
	get := func(names ...types.QueueAttributeName) map[string]string {
		t.Helper()
		out, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: names})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes
	}
	// All lists the set one only; by name, the action's default on a queue
	// with a RedrivePolicy is dead-letter.
	all := get("All")
	if all["MessageTimeToLive"] != "600" {
		t.Errorf("All MessageTimeToLive = %q, want 600", all["MessageTimeToLive"])
	}
	if _, ok := all["ExpiredMessageAction"]; ok {
		t.Errorf("All lists the unset ExpiredMessageAction")
	}
	if got := get("ExpiredMessageAction")["ExpiredMessageAction"]; got != "dead-letter" {
		t.Errorf("ExpiredMessageAction by name = %q, want dead-letter", got)
	}
	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"ExpiredMessageAction": "drop", "MessageTimeToLive": "0"}}); err != nil {
		t.Fatal(err)
	}
	if a := get("All"); a["ExpiredMessageAction"] != "drop" || a["MessageTimeToLive"] != "" {
		t.Errorf("after setting drop and removing the default: %v", a)
	}
	if got := get("MessageTimeToLive")["MessageTimeToLive"]; got != "0" {
		t.Errorf("MessageTimeToLive by name, unset = %q, want 0", got)
	}

	// A message with its own time to live is sent and stored, the
	// attribute kept as sent; it is not received once it expired.
	short := e.queue("short", nil)
	if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &short, MessageBody: aws.String("soon gone"),
		MessageAttributes: ttlAttr("1")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the message expired", func() bool {
		v, _ := e.queueCounts(short)
		return v == "0"
	})
	out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &short, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("ReceiveMessage after the expiry: %d messages, %v", len(out.Messages), err)
	}

	// Refusals: a message's in InvalidParameterValue, in a batch per entry.
	for _, c := range []struct {
		attrs map[string]types.MessageAttributeValue
		delay int32
		says  string
	}{
		{ttlAttr("3601"), 0, "must not be longer than the queue's MessageRetentionPeriod (3600 seconds)"},
		{ttlAttr("0"), 0, "must be an integer from 1 to 1209600"},
		{ttlAttr("60"), 60, "must be longer than the message's delay (60 seconds)"},
		{map[string]types.MessageAttributeValue{"Sluice.TimeToLive": {DataType: aws.String("String"), StringValue: aws.String("60")}}, 0, "must be Number"},
	} {
		_, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"),
			MessageAttributes: c.attrs, DelaySeconds: c.delay})
		var ae interface{ ErrorCode() string }
		if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" || !strings.Contains(err.Error(), c.says) {
			t.Errorf("SendMessage %v delay %d: %v, want InvalidParameterValue saying %q", c.attrs, c.delay, err, c.says)
		}
	}
	batch, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String("x"), MessageAttributes: ttlAttr("3600")},
		{Id: aws.String("long"), MessageBody: aws.String("y"), MessageAttributes: ttlAttr("3601")},
	}})
	if err != nil || len(batch.Successful) != 1 || len(batch.Failed) != 1 || *batch.Failed[0].Id != "long" ||
		*batch.Failed[0].Code != "InvalidParameterValue" || !batch.Failed[0].SenderFault {
		t.Fatalf("SendMessageBatch with one time to live past the retention: %+v, %v", batch, err)
	}

	// A queue's in InvalidAttributeValue.
	var badValue *types.InvalidAttributeValue
	for _, c := range []struct {
		name  string
		attrs map[string]string
		says  string
	}{
		{"past-retention", map[string]string{"MessageRetentionPeriod": "60", "MessageTimeToLive": "61"}, "longer than the queue's MessageRetentionPeriod (60 seconds)"},
		{"past-max", map[string]string{"MessageTimeToLive": "1209601"}, "between 0 and 1209600"},
		{"delayed", map[string]string{"DelaySeconds": "30", "MessageTimeToLive": "30"}, "not longer than the queue's DelaySeconds (30)"},
		{"no-dlq", map[string]string{"ExpiredMessageAction": "dead-letter"}, "needs a RedrivePolicy"},
		{"bad-action", map[string]string{"ExpiredMessageAction": "Drop"}, "must be dead-letter or drop"},
	} {
		_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(c.name), Attributes: c.attrs})
		if !errors.As(err, &badValue) || !strings.Contains(badValue.ErrorMessage(), c.says) {
			t.Errorf("CreateQueue %s %v: %v, want InvalidAttributeValue saying %q", c.name, c.attrs, err, c.says)
		}
	}
	// Lowering the retention below the queue's time to live.
	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"MessageTimeToLive": "1800"}}); err != nil {
		t.Fatal(err)
	}
	resp, body := e.post("/", "application/x-amz-json-1.0", "AmazonSQS.SetQueueAttributes",
		`{"QueueUrl":"`+url+`","Attributes":{"MessageRetentionPeriod":"1799"}}`)
	expectJSONError(t, resp, body, http.StatusBadRequest, "com.amazonaws.sqs#InvalidAttributeValue", "InvalidAttributeValue")
}

func TestTimeToLiveQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("jobs", map[string]string{"MessageRetentionPeriod": "3600"})
	path := "/" + acct + "/jobs"
	send := func(v ...string) (*http.Response, string) {
		t.Helper()
		return e.form(path, vals(append([]string{"Action", "SendMessage", "MessageBody", "x",
			"MessageAttribute.1.Name", "Sluice.TimeToLive", "MessageAttribute.1.Value.DataType", "Number"}, v...)...))
	}
	if resp, body := send("MessageAttribute.1.Value.StringValue", "3600"); resp.StatusCode != http.StatusOK {
		t.Fatalf("SendMessage with a time to live as long as the retention: %d\n%s", resp.StatusCode, body)
	}
	resp, body := send("MessageAttribute.1.Value.StringValue", "3601")
	if er := expectError(t, resp, body, 400, "InvalidParameterValue"); !strings.Contains(er.Message, "MessageRetentionPeriod (3600 seconds)") {
		t.Errorf("a time to live past the retention: %+v", er)
	}
	resp, body = send("MessageAttribute.1.Value.StringValue", "10", "DelaySeconds", "10")
	if er := expectError(t, resp, body, 400, "InvalidParameterValue"); !strings.Contains(er.Message, "longer than the message's delay") {
		t.Errorf("a delay as long as the time to live: %+v", er)
	}

	// The queue attributes: set, read, refused in the XML error shape.
	resp, body = e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", e.URL+path),
		map[string]string{"MessageTimeToLive": "120", "ExpiredMessageAction": "drop"}))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("SetQueueAttributes: %d\n%s", resp.StatusCode, body)
	}
	resp, body = e.form(path, vals("Action", "GetQueueAttributes", "AttributeName.1", "All"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<Name>MessageTimeToLive</Name><Value>120</Value>") ||
		!strings.Contains(body, "<Name>ExpiredMessageAction</Name><Value>drop</Value>") {
		t.Fatalf("GetQueueAttributes All: %d\n%s", resp.StatusCode, body)
	}
	for _, attrs := range []map[string]string{
		{"MessageTimeToLive": "3601"},
		{"MessageTimeToLive": "two minutes"},
		{"MessageRetentionPeriod": "119"},
		{"DelaySeconds": "120"},
		{"ExpiredMessageAction": "dead-letter"},
	} {
		resp, body := e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", e.URL+path), attrs))
		expectError(t, resp, body, 400, "InvalidAttributeValue")
	}
}
