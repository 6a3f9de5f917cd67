package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/broker/model"
)

// Behaviours real SQS clients tripped on, each checked in both protocols:
// JSON (aws-sdk-go-v2, or raw requests where the SDK cannot send the input)
// and query (raw form requests, checked against the XML ErrorResponse).

// jsonError is the body of a JSON-protocol error.
type jsonError struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// expectJSONError checks a raw JSON-protocol error reply: status, __type,
// the query-compatible code header, and a message; it returns the body.
func expectJSONError(t *testing.T, resp *http.Response, body string, status int, typ, code string) jsonError {
	t.Helper()
	var got jsonError
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if resp.StatusCode != status || got.Type != typ || got.Message == "" ||
		resp.Header.Get("X-Amzn-Query-Error") != code+";Sender" || resp.Header.Get("X-Amzn-Requestid") == "" {
		t.Fatalf("want %d %s (%s), got %d %q %s", status, typ, code, resp.StatusCode, resp.Header.Get("X-Amzn-Query-Error"), body)
	}
	return got
}

// expectJSONOK checks a raw JSON-protocol reply is a 200 and decodes it into v.
func expectJSONOK(t *testing.T, what string, resp *http.Response, body string, v any) {
	t.Helper()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", what, resp.StatusCode, body)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %v: %s", what, err, body)
		}
	}
}

// queueCounts returns ApproximateNumberOfMessages and ...Delayed of a queue.
func (e *env) queueCounts(url string) (visible, delayed string) {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesDelayed"]
}

func TestFifoDelaySecondsZero(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("delay0.fifo", map[string]string{"FifoQueue": "true"})
	path := strings.TrimPrefix(url, e.URL)

	// JSON. aws-sdk-go-v2 omits a zero DelaySeconds, so these are raw requests.
	resp, body := e.jsonCall("SendMessage", `{"QueueUrl":"`+url+`","MessageBody":"j1","MessageGroupId":"g","MessageDeduplicationId":"j1","DelaySeconds":0}`)
	var sent struct{ MessageId, SequenceNumber string }
	expectJSONOK(t, "JSON SendMessage with DelaySeconds 0", resp, body, &sent)
	if sent.MessageId == "" || sent.SequenceNumber == "" {
		t.Fatalf("JSON SendMessage: %s", body)
	}
	resp, body = e.jsonCall("SendMessageBatch", `{"QueueUrl":"`+url+`","Entries":[`+
		`{"Id":"a","MessageBody":"j2","MessageGroupId":"g","MessageDeduplicationId":"j2","DelaySeconds":0},`+
		`{"Id":"b","MessageBody":"j3","MessageGroupId":"g","MessageDeduplicationId":"j3"}]}`)
	var batch struct {
		Successful []struct{ Id string }
		Failed     []struct{ Id, Code string }
	}
	expectJSONOK(t, "JSON SendMessageBatch with DelaySeconds 0", resp, body, &batch)
	if len(batch.Successful) != 2 || len(batch.Failed) != 0 {
		t.Fatalf("JSON SendMessageBatch: %s", body)
	}
	resp, body = e.jsonCall("SendMessage", `{"QueueUrl":"`+url+`","MessageBody":"j4","MessageGroupId":"g","MessageDeduplicationId":"j4","DelaySeconds":1}`)
	er := expectJSONError(t, resp, body, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue")
	if !strings.Contains(er.Message, "DelaySeconds") {
		t.Fatalf("DelaySeconds 1 on FIFO: %q", er.Message)
	}

	// Query.
	resp, body = e.form(path, vals("Action", "SendMessage", "MessageBody", "q1", "MessageGroupId", "g", "MessageDeduplicationId", "q1", "DelaySeconds", "0"))
	decode(t, body, "SendMessageResponse", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("query SendMessage with DelaySeconds 0: %d %s", resp.StatusCode, body)
	}
	resp, body = e.form(path, vals("Action", "SendMessageBatch",
		"SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "q2", "SendMessageBatchRequestEntry.1.DelaySeconds", "0",
		"SendMessageBatchRequestEntry.1.MessageGroupId", "g", "SendMessageBatchRequestEntry.1.MessageDeduplicationId", "q2"))
	var qb struct {
		OK     []string `xml:"SendMessageBatchResult>SendMessageBatchResultEntry>Id"`
		Failed []string `xml:"SendMessageBatchResult>BatchResultErrorEntry>Id"`
	}
	decode(t, body, "SendMessageBatchResponse", &qb)
	if resp.StatusCode != 200 || len(qb.OK) != 1 || len(qb.Failed) != 0 {
		t.Fatalf("query SendMessageBatch with DelaySeconds 0: %s", body)
	}
	resp, body = e.form(path, vals("Action", "SendMessage", "MessageBody", "q3", "MessageGroupId", "g", "MessageDeduplicationId", "q3", "DelaySeconds", "5"))
	expectError(t, resp, body, 400, "InvalidParameterValue")

	if visible, delayed := e.queueCounts(url); visible != "5" || delayed != "0" {
		t.Fatalf("after 5 sends with DelaySeconds 0: %s visible, %s delayed", visible, delayed)
	}
}

func TestEmptyBatchNamesItsEntry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("emptybatch", nil)
	path := strings.TrimPrefix(url, e.URL)
	ctx := context.Background()
	for _, c := range []struct{ action, entry string }{
		{"SendMessageBatch", "SendMessageBatchRequestEntry"},
		{"DeleteMessageBatch", "DeleteMessageBatchRequestEntry"},
		{"ChangeMessageVisibilityBatch", "ChangeMessageVisibilityBatchRequestEntry"},
	} {
		want := "There should be at least one " + c.entry + " in the request."
		resp, body := e.jsonCall(c.action, `{"QueueUrl":"`+url+`","Entries":[]}`)
		if er := expectJSONError(t, resp, body, 400, "com.amazonaws.sqs#EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest"); er.Message != want {
			t.Errorf("JSON %s: %q, want %q", c.action, er.Message, want)
		}
		resp, body = e.form(path, vals("Action", c.action))
		if er := expectError(t, resp, body, 400, "AWS.SimpleQueueService.EmptyBatchRequest"); er.Message != want {
			t.Errorf("query %s: %q, want %q", c.action, er.Message, want)
		}
	}
	// The SDK's modeled exception carries the same message.
	_, err := e.client.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{}})
	var empty *types.EmptyBatchRequest
	if !errors.As(err, &empty) || empty.ErrorMessage() != "There should be at least one DeleteMessageBatchRequestEntry in the request." {
		t.Fatalf("SDK DeleteMessageBatch with no entries: %v", err)
	}
	_, err = e.client.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{}})
	if !errors.As(err, &empty) || empty.ErrorMessage() != "There should be at least one ChangeMessageVisibilityBatchRequestEntry in the request." {
		t.Fatalf("SDK ChangeMessageVisibilityBatch with no entries: %v", err)
	}
}

func TestOneEntryBatchTooLong(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("onebig", nil)
	path := strings.TrimPrefix(url, e.URL)
	ctx := context.Background()
	big := strings.Repeat("x", model.MaxBatchBytes+1)

	// JSON (aws-sdk-go-v2).
	_, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("only"), MessageBody: aws.String(big)},
	}})
	var tooLong *types.BatchRequestTooLong
	if !errors.As(err, &tooLong) {
		t.Fatalf("JSON one-entry batch of 1 MiB + 1: %v", err)
	}
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(big)})
	apiErr(t, "JSON SendMessage of 1 MiB + 1", err, "InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.")
	// A batch of one that fits is fine.
	out, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("only"), MessageBody: aws.String(big[1:])},
	}})
	if err != nil || len(out.Successful) != 1 {
		t.Fatalf("JSON one-entry batch of 1 MiB: %+v, %v", out, err)
	}

	// Query.
	resp, body := e.form(path, vals("Action", "SendMessageBatch", "SendMessageBatchRequestEntry.1.Id", "only", "SendMessageBatchRequestEntry.1.MessageBody", big))
	expectError(t, resp, body, 400, "AWS.SimpleQueueService.BatchRequestTooLong")
	resp, body = e.form(path, vals("Action", "SendMessage", "MessageBody", big))
	if er := expectError(t, resp, body, 400, "InvalidParameterValue"); !strings.Contains(er.Message, "shorter than") {
		t.Fatalf("query SendMessage of 1 MiB + 1: %+v", er)
	}
	if visible, _ := e.queueCounts(url); visible != "1" {
		t.Fatalf("%s messages stored, want the one that fitted", visible)
	}
}

func TestNonASCIIAttributeName(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("attrname", nil)
	path := strings.TrimPrefix(url, e.URL)
	ctx := context.Background()
	const want = "Message (user) attribute name 'öther' is invalid."

	// JSON (aws-sdk-go-v2): SendMessage fails, a batch entry fails alone.
	_, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{"öther": strAttr("v")}})
	apiErr(t, "JSON SendMessage", err, "InvalidParameterValue", want)
	out, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{"other": strAttr("v")}},
		{Id: aws.String("bad"), MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{"öther": strAttr("v")}},
	}})
	if err != nil || len(out.Successful) != 1 || len(out.Failed) != 1 || *out.Failed[0].Id != "bad" ||
		*out.Failed[0].Code != "InvalidParameterValue" || aws.ToString(out.Failed[0].Message) != want {
		t.Fatalf("JSON SendMessageBatch: %+v, %v", out, err)
	}

	// Query.
	resp, body := e.form(path, vals("Action", "SendMessage", "MessageBody", "x", "MessageAttribute.1.Name", "öther",
		"MessageAttribute.1.Value.DataType", "String", "MessageAttribute.1.Value.StringValue", "v"))
	if er := expectError(t, resp, body, 400, "InvalidParameterValue"); er.Message != want {
		t.Fatalf("query SendMessage: %q", er.Message)
	}
	if visible, _ := e.queueCounts(url); visible != "1" {
		t.Fatalf("%s messages stored, want 1", visible)
	}
}

func TestAddPermissionActionLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("perm", nil)
	path := strings.TrimPrefix(url, e.URL)
	ctx := context.Background()
	actions := []string{"SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
		"GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListQueueTags"}

	// JSON (aws-sdk-go-v2).
	_, err := e.client.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("eight"),
		AWSAccountIds: []string{"111122223333"}, Actions: actions})
	var over *types.OverLimit
	if !errors.As(err, &over) {
		t.Fatalf("JSON AddPermission of 8 actions: %v", err)
	}
	if _, err := e.client.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("seven"),
		AWSAccountIds: []string{"111122223333"}, Actions: actions[:7]}); err != nil {
		t.Fatalf("JSON AddPermission of 7 actions: %v", err)
	}

	// Query.
	v := vals("Action", "AddPermission", "Label", "eightq", "AWSAccountId.1", "111122223333")
	for i, a := range actions {
		v.Set("ActionName."+strconv.Itoa(i+1), a)
	}
	resp, body := e.form(path, v)
	expectError(t, resp, body, 403, "OverLimit")
	v.Del("ActionName.8")
	resp, body = e.form(path, v)
	decode(t, body, "AddPermissionResponse", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("query AddPermission of 7 actions: %d %s", resp.StatusCode, body)
	}
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"Policy"}})
	if err != nil || strings.Count(attrs.Attributes["Policy"], `"Sid"`) != 2 || strings.Contains(attrs.Attributes["Policy"], `"Sid":"eight"`) {
		t.Fatalf("Policy after the refused and accepted calls: %v, %v", attrs.Attributes, err)
	}
}
