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

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/internal/testutil"
)

// How a QueueUrl names a queue: a URL of any host whose path ends in
// <account>/<queue>, or a bare queue name; an account other than the broker's
// names no queue.

// TestBareQueueNameAsQueueURL drives every action that takes a QueueUrl with
// a bare queue name, through aws-sdk-go-v2 (JSON) and raw query requests.
func TestBareQueueNameAsQueueURL(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		e.queue("bare-json", nil)
		e.queue("bare-json-dlq", nil)
		q := aws.String("bare-json")
		ok := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s with QueueUrl %q: %v", what, *q, err)
			}
		}
		_, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: q, Attributes: map[string]string{
			"VisibilityTimeout": "45", "RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:bare-json-dlq","maxReceiveCount":5}`,
		}})
		ok("SetQueueAttributes", err)
		attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q, AttributeNames: []types.QueueAttributeName{"VisibilityTimeout"}})
		ok("GetQueueAttributes", err)
		if attrs.Attributes["VisibilityTimeout"] != "45" {
			t.Fatalf("GetQueueAttributes: %v", attrs.Attributes)
		}
		_, err = e.client.TagQueue(ctx, &awssqs.TagQueueInput{QueueUrl: q, Tags: map[string]string{"a": "1", "b": "2"}})
		ok("TagQueue", err)
		_, err = e.client.UntagQueue(ctx, &awssqs.UntagQueueInput{QueueUrl: q, TagKeys: []string{"b"}})
		ok("UntagQueue", err)
		tags, err := e.client.ListQueueTags(ctx, &awssqs.ListQueueTagsInput{QueueUrl: q})
		ok("ListQueueTags", err)
		if len(tags.Tags) != 1 || tags.Tags["a"] != "1" {
			t.Fatalf("ListQueueTags: %v", tags.Tags)
		}
		_, err = e.client.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: q, Label: aws.String("p"), AWSAccountIds: []string{"111122223333"}, Actions: []string{"SendMessage"}})
		ok("AddPermission", err)
		_, err = e.client.RemovePermission(ctx, &awssqs.RemovePermissionInput{QueueUrl: q, Label: aws.String("p")})
		ok("RemovePermission", err)
		srcs, err := e.client.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String("bare-json-dlq")})
		ok("ListDeadLetterSourceQueues", err)
		if len(srcs.QueueUrls) != 1 || !strings.HasSuffix(srcs.QueueUrls[0], "/000000000000/bare-json") {
			t.Fatalf("ListDeadLetterSourceQueues: %v", srcs.QueueUrls)
		}
		_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("one")})
		ok("SendMessage", err)
		_, err = e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q, Entries: []types.SendMessageBatchRequestEntry{
			{Id: aws.String("a"), MessageBody: aws.String("two")}, {Id: aws.String("b"), MessageBody: aws.String("three")},
		}})
		ok("SendMessageBatch", err)
		var msgs []types.Message
		testutil.Eventually(t, 10*time.Second, "3 messages", func() bool {
			got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			ok("ReceiveMessage", err)
			msgs = append(msgs, got.Messages...)
			return len(msgs) >= 3
		})
		_, err = e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: q, ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 60})
		ok("ChangeMessageVisibility", err)
		cv, err := e.client.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: q, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("x"), ReceiptHandle: msgs[1].ReceiptHandle, VisibilityTimeout: 60},
		}})
		ok("ChangeMessageVisibilityBatch", err)
		if len(cv.Successful) != 1 {
			t.Fatalf("ChangeMessageVisibilityBatch: %+v", cv)
		}
		_, err = e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: msgs[0].ReceiptHandle})
		ok("DeleteMessage", err)
		db, err := e.client.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: q, Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("x"), ReceiptHandle: msgs[1].ReceiptHandle}, {Id: aws.String("y"), ReceiptHandle: msgs[2].ReceiptHandle},
		}})
		ok("DeleteMessageBatch", err)
		if len(db.Successful) != 2 {
			t.Fatalf("DeleteMessageBatch: %+v", db)
		}
		_, err = e.client.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: q})
		ok("PurgeQueue", err)
		_, err = e.client.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: q})
		ok("DeleteQueue", err)
		_, err = e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q})
		var gone *types.QueueDoesNotExist
		if !errors.As(err, &gone) {
			t.Fatalf("a bare name of a deleted queue: %v", err)
		}
	})

	t.Run("query", func(t *testing.T) {
		t.Parallel()
		e.queue("bare-query", nil)
		e.queue("bare-query-dlq", nil)
		call := func(action string, kv ...string) string {
			t.Helper()
			resp, body := e.form("/", vals(append([]string{"Action", action, "QueueUrl", "bare-query"}, kv...)...))
			decode(t, body, action+"Response", nil)
			if resp.StatusCode != 200 {
				t.Fatalf("%s with QueueUrl bare-query: %d %s", action, resp.StatusCode, body)
			}
			return body
		}
		call("SetQueueAttributes", "Attribute.1.Name", "RedrivePolicy",
			"Attribute.1.Value", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:bare-query-dlq","maxReceiveCount":5}`)
		if body := call("GetQueueAttributes", "AttributeName.1", "QueueArn"); !strings.Contains(body, "arn:aws:sqs:us-east-1:000000000000:bare-query<") {
			t.Fatalf("GetQueueAttributes: %s", body)
		}
		call("TagQueue", "Tag.1.Key", "a", "Tag.1.Value", "1")
		call("UntagQueue", "TagKey.1", "b")
		if body := call("ListQueueTags"); !strings.Contains(body, "<Key>a</Key>") {
			t.Fatalf("ListQueueTags: %s", body)
		}
		call("AddPermission", "Label", "p", "AWSAccountId.1", "111122223333", "ActionName.1", "SendMessage")
		call("RemovePermission", "Label", "p")
		resp, body := e.form("/", vals("Action", "ListDeadLetterSourceQueues", "QueueUrl", "bare-query-dlq"))
		if resp.StatusCode != 200 || !strings.Contains(body, "/000000000000/bare-query<") {
			t.Fatalf("ListDeadLetterSourceQueues: %s", body)
		}
		call("SendMessage", "MessageBody", "one")
		call("SendMessageBatch", "SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "two")
		var handles []string
		testutil.Eventually(t, 10*time.Second, "2 messages", func() bool {
			var got struct {
				Handles []string `xml:"ReceiveMessageResult>Message>ReceiptHandle"`
			}
			decode(t, call("ReceiveMessage", "MaxNumberOfMessages", "10", "WaitTimeSeconds", "1"), "ReceiveMessageResponse", &got)
			handles = append(handles, got.Handles...)
			return len(handles) >= 2
		})
		call("ChangeMessageVisibility", "ReceiptHandle", handles[0], "VisibilityTimeout", "60")
		if body := call("ChangeMessageVisibilityBatch", "ChangeMessageVisibilityBatchRequestEntry.1.Id", "x",
			"ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle", handles[1], "ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout", "60"); strings.Contains(body, "BatchResultErrorEntry") {
			t.Fatalf("ChangeMessageVisibilityBatch: %s", body)
		}
		call("DeleteMessage", "ReceiptHandle", handles[0])
		if body := call("DeleteMessageBatch", "DeleteMessageBatchRequestEntry.1.Id", "x", "DeleteMessageBatchRequestEntry.1.ReceiptHandle", handles[1]); strings.Contains(body, "BatchResultErrorEntry") {
			t.Fatalf("DeleteMessageBatch: %s", body)
		}
		call("PurgeQueue")
		call("DeleteQueue")
		resp, body = e.form("/", vals("Action", "GetQueueAttributes", "QueueUrl", "bare-query"))
		expectError(t, resp, body, 400, "AWS.SimpleQueueService.NonExistentQueue")
	})
}

// TestOtherAccountIsNotServed: a QueueUrl (or queue path) naming another
// account, and GetQueueUrl with another QueueOwnerAWSAccountId, name no queue.
func TestOtherAccountIsNotServed(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *broker.Config) { c.AccountID = "111122223333" })
	ctx := context.Background()
	url := e.queue("mine", nil)
	if want := e.URL + "/111122223333/mine"; url != want {
		t.Fatalf("QueueUrl %s, want %s", url, want)
	}
	others := []string{
		e.URL + "/000000000000/mine",                            // the default account, not configured here
		"https://sqs.us-east-1.amazonaws.com/444455556666/mine", // any host, another account
		"/999999999999/mine",
	}

	// JSON (aws-sdk-go-v2).
	var gone *types.QueueDoesNotExist
	for _, u := range others {
		_, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(u), MessageBody: aws.String("x")})
		if !errors.As(err, &gone) || gone.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
			t.Errorf("JSON SendMessage to %s: %v", u, err)
		}
		_, err = e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(u)})
		if !errors.As(err, &gone) {
			t.Errorf("JSON GetQueueAttributes of %s: %v", u, err)
		}
	}
	_, err := e.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("mine"), QueueOwnerAWSAccountId: aws.String("000000000000")})
	if !errors.As(err, &gone) || !strings.Contains(gone.ErrorMessage(), "111122223333") {
		t.Fatalf("JSON GetQueueUrl with another owner: %v", err)
	}
	got, err := e.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("mine"), QueueOwnerAWSAccountId: aws.String("111122223333")})
	if err != nil || *got.QueueUrl != url {
		t.Fatalf("JSON GetQueueUrl with the broker's account: %v, %v", got, err)
	}
	if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")}); err != nil {
		t.Fatalf("JSON SendMessage to the broker's own account: %v", err)
	}
	// A segment that is no account id (ElasticMQ's /queue/<name>) names the
	// broker's own queue, in a QueueUrl and as the request path.
	if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(e.URL + "/queue/mine"), MessageBody: aws.String("x")}); err != nil {
		t.Fatalf("JSON SendMessage to an ElasticMQ-style URL: %v", err)
	}
	if resp, body := e.form("/queue/mine", vals("Action", "SendMessage", "MessageBody", "x")); resp.StatusCode != 200 {
		t.Fatalf("query SendMessage on /queue/mine: %d %s", resp.StatusCode, body)
	}

	// Query: QueueUrl parameters, queue paths, GetQueueUrl.
	for _, u := range others {
		resp, body := e.form("/", vals("Action", "SendMessage", "QueueUrl", u, "MessageBody", "x"))
		expectError(t, resp, body, 400, "AWS.SimpleQueueService.NonExistentQueue")
	}
	resp, body := e.form("/000000000000/mine", vals("Action", "SendMessage", "MessageBody", "x"))
	expectError(t, resp, body, 400, "AWS.SimpleQueueService.NonExistentQueue")
	resp, body = e.get("/?Action=GetQueueUrl&QueueName=mine&QueueOwnerAWSAccountId=000000000000")
	expectError(t, resp, body, 400, "AWS.SimpleQueueService.NonExistentQueue")
	resp, body = e.get("/?Action=GetQueueUrl&QueueName=mine&QueueOwnerAWSAccountId=111122223333")
	var gotURL struct {
		QueueURL string `xml:"GetQueueUrlResult>QueueUrl"`
	}
	decode(t, body, "GetQueueUrlResponse", &gotURL)
	if resp.StatusCode != 200 || gotURL.QueueURL != url {
		t.Fatalf("query GetQueueUrl with the broker's account: %s", body)
	}
	resp, body = e.form("/111122223333/mine", vals("Action", "SendMessage", "MessageBody", "x"))
	decode(t, body, "SendMessageResponse", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("query SendMessage on the broker's own queue path: %s", body)
	}
	if visible, _ := e.queueCounts(url); visible != "4" {
		t.Fatalf("%s messages stored, want the 4 sent to the broker's own account", visible)
	}
}
