package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testutil"
)

// These tests drive the JSON protocol with aws-sdk-go-v2 (body MD5 checks on).

func TestQueueLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("life", map[string]string{"VisibilityTimeout": "40"})
	if want := e.URL + "/000000000000/life"; url != want {
		t.Fatalf("QueueUrl = %s, want %s", url, want)
	}
	// Same attributes again: the same queue. Different: QueueNameExists.
	if again := e.queue("life", map[string]string{"VisibilityTimeout": "40"}); again != url {
		t.Fatalf("re-create returned %s", again)
	}
	_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("life"), Attributes: map[string]string{"VisibilityTimeout": "41"}})
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) || exists.ErrorCode() != "QueueAlreadyExists" {
		t.Fatalf("differing re-create: %v", err)
	}

	got, err := e.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("life")})
	if err != nil || *got.QueueUrl != url {
		t.Fatalf("GetQueueUrl = %v, %v", got, err)
	}

	all, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible",
		"CreatedTimestamp", "DelaySeconds", "LastModifiedTimestamp", "MaximumMessageSize", "MessageRetentionPeriod",
		"QueueArn", "ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled", "VisibilityTimeout"} {
		if _, ok := all.Attributes[k]; !ok {
			t.Errorf("All lacks %s: %v", k, all.Attributes)
		}
	}
	if all.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:000000000000:life" || all.Attributes["VisibilityTimeout"] != "40" {
		t.Errorf("attributes: %v", all.Attributes)
	}

	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"DelaySeconds": "5"}}); err != nil {
		t.Fatal(err)
	}
	one, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"DelaySeconds", "QueueArn"}})
	if err != nil || len(one.Attributes) != 2 || one.Attributes["DelaySeconds"] != "5" {
		t.Fatalf("named attributes = %v, %v", one.Attributes, err)
	}
	none, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url})
	if err != nil || len(none.Attributes) != 0 {
		t.Fatalf("no names = %v, %v", none.Attributes, err)
	}

	_, err = e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"Foobar"}})
	var badName *types.InvalidAttributeName
	if !errors.As(err, &badName) {
		t.Fatalf("unknown attribute: %v", err)
	}
	_, err = e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"VisibilityTimeout": "99999"}})
	var badValue *types.InvalidAttributeValue
	if !errors.As(err, &badValue) {
		t.Fatalf("bad attribute value: %v", err)
	}

	if _, err := e.client.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("life")})
	var gone *types.QueueDoesNotExist
	if !errors.As(err, &gone) || gone.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("after delete: %v", err)
	}
}

func TestQueueURLFromAnyHost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("anyhost", nil)
	// Any host: the last two path segments (<account>/<queue>) name the queue.
	foreign := "https://sqs.eu-west-1.amazonaws.com/000000000000/anyhost"
	if _, err := e.client.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: &foreign, MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	// Another account is not served here (TestOtherAccountIsNotServed).
}

func TestListQueuesPagination(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		e.queue(fmt.Sprintf("pg-%02d", i), nil)
	}
	e.queue("other", nil)

	all, err := e.client.ListQueues(ctx, &awssqs.ListQueuesInput{QueueNamePrefix: aws.String("pg-")})
	if err != nil || len(all.QueueUrls) != 7 || all.NextToken != nil {
		t.Fatalf("no MaxResults: %v (token %v), %v", all.QueueUrls, all.NextToken, err)
	}
	everything, err := e.client.ListQueues(ctx, &awssqs.ListQueuesInput{})
	if err != nil || len(everything.QueueUrls) != 8 {
		t.Fatalf("all queues: %v, %v", everything.QueueUrls, err)
	}

	var seen []string
	var token *string
	for page := 0; ; page++ {
		out, err := e.client.ListQueues(ctx, &awssqs.ListQueuesInput{QueueNamePrefix: aws.String("pg-"), MaxResults: aws.Int32(3), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, out.QueueUrls...)
		if page == 0 {
			// Queues coming and going between pages do not disturb paging.
			if _, err := e.client.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(out.QueueUrls[2])}); err != nil {
				t.Fatal(err)
			}
			e.queue("pg-00a", nil) // sorts before the cursor: not seen
			e.queue("pg-99", nil)  // after: seen
		}
		if out.NextToken == nil {
			break
		}
		token = out.NextToken
		if page > 5 {
			t.Fatal("too many pages")
		}
	}
	var names []string
	for _, u := range seen {
		names = append(names, u[strings.LastIndexByte(u, '/')+1:])
	}
	want := "pg-00 pg-01 pg-02 pg-03 pg-04 pg-05 pg-06 pg-99"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("paged = %s, want %s", got, want)
	}

	_, err = e.client.ListQueues(ctx, &awssqs.ListQueuesInput{MaxResults: aws.Int32(3), NextToken: aws.String("garbage!")})
	if err == nil || !strings.Contains(err.Error(), "InvalidParameterValue") {
		t.Fatalf("bad token: %v", err)
	}
	_, err = e.client.ListQueues(ctx, &awssqs.ListQueuesInput{MaxResults: aws.Int32(1001)})
	if err == nil || !strings.Contains(err.Error(), "InvalidParameterValue") {
		t.Fatalf("MaxResults 1001: %v", err)
	}
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func TestSendReceiveMD5s(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("md5", nil)
	trace := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	sent, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{
		QueueUrl:    &url,
		MessageBody: aws.String(`{"message_index":1}`),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"test-key": strAttr("test-value"), "test-key-alt": strAttr("test-value-alt"),
		},
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(trace)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if *sent.MD5OfMessageBody != "4504dd781f625d681c31cda87e260702" ||
		aws.ToString(sent.MD5OfMessageAttributes) != "2256c3b617e2b4b3ae4f2d455dcf54d0" ||
		aws.ToString(sent.MD5OfMessageSystemAttributes) != "5ae4d5d7636402d80f4eb6d213245a88" {
		t.Fatalf("send MD5s: body %s attrs %s sys %s", *sent.MD5OfMessageBody, aws.ToString(sent.MD5OfMessageAttributes), aws.ToString(sent.MD5OfMessageSystemAttributes))
	}

	// Only test-key is asked for: its MD5 alone is returned.
	got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:                    &url,
		MessageAttributeNames:       []string{"test-key"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
		VisibilityTimeout:           30, // released below; a short lease could end first on a loaded machine
		WaitTimeSeconds:             5,
	})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %v, %v", got, err)
	}
	m := got.Messages[0]
	if *m.MessageId != *sent.MessageId || *m.Body != `{"message_index":1}` || *m.MD5OfBody != "4504dd781f625d681c31cda87e260702" {
		t.Fatalf("message: %+v", m)
	}
	if aws.ToString(m.MD5OfMessageAttributes) != "befa18540a897f7d022bf07057754a03" || len(m.MessageAttributes) != 1 {
		t.Fatalf("subset attributes: %v md5 %s", m.MessageAttributes, aws.ToString(m.MD5OfMessageAttributes))
	}
	a := m.Attributes
	if a["SenderId"] != "AKID" || a["ApproximateReceiveCount"] != "1" || a["AWSTraceHeader"] != trace ||
		a["SentTimestamp"] == "" || a["ApproximateFirstReceiveTimestamp"] == "" {
		t.Fatalf("system attributes: %v", a)
	}
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}

	// No attribute names: no attributes and no attribute MD5.
	got, err = e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("second receive: %v, %v", got, err)
	}
	m = got.Messages[0]
	if m.MD5OfMessageAttributes != nil || len(m.MessageAttributes) != 0 || len(m.Attributes) != 0 {
		t.Fatalf("unrequested attributes returned: %+v", m)
	}
	// Old-style AttributeNames with one name; unknown names are ignored.
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	got, err = e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5,
		//lint:ignore SA1019 older SDKs still send the deprecated AttributeNames: the broker must honour it
		AttributeNames:              []types.QueueAttributeName{"ApproximateReceiveCount"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"not-a-real-name"},
		MessageAttributeNames:       []string{"All"}})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("third receive: %v, %v", got, err)
	}
	m = got.Messages[0]
	if len(m.Attributes) != 1 || m.Attributes["ApproximateReceiveCount"] != "3" {
		t.Fatalf("AttributeNames: %v", m.Attributes)
	}
	if aws.ToString(m.MD5OfMessageAttributes) != "2256c3b617e2b4b3ae4f2d455dcf54d0" {
		t.Fatalf("All attributes MD5 = %s", aws.ToString(m.MD5OfMessageAttributes))
	}

	// No attributes sent: no MD5OfMessageAttributes.
	plain, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("plain")})
	if err != nil || plain.MD5OfMessageAttributes != nil || plain.MD5OfMessageSystemAttributes != nil {
		t.Fatalf("plain send: %+v, %v", plain, err)
	}
}

func TestBinaryAndNumberAttributes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("bin", nil)
	attrs := map[string]types.MessageAttributeValue{
		"timestamp": {DataType: aws.String("Number"), StringValue: aws.String("1493147359900")},
		"blob":      {DataType: aws.String("Binary.png"), BinaryValue: []byte{0, 1, 2, 0xff}},
	}
	sent, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("b"), MessageAttributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	want := sqs.MD5OfAttributes(map[string]model.MessageAttribute{
		"timestamp": {DataType: "Number", StringValue: "1493147359900"},
		"blob":      {DataType: "Binary.png", BinaryValue: []byte{0, 1, 2, 0xff}},
	})
	if aws.ToString(sent.MD5OfMessageAttributes) != want {
		t.Fatalf("send md5 %s, want %s", aws.ToString(sent.MD5OfMessageAttributes), want)
	}
	got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: []string{".*"}, WaitTimeSeconds: 5})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %v, %v", got, err)
	}
	m := got.Messages[0]
	if string(m.MessageAttributes["blob"].BinaryValue) != "\x00\x01\x02\xff" || *m.MessageAttributes["blob"].DataType != "Binary.png" ||
		*m.MessageAttributes["timestamp"].StringValue != "1493147359900" || aws.ToString(m.MD5OfMessageAttributes) != want {
		t.Fatalf("attributes: %+v md5 %s", m.MessageAttributes, aws.ToString(m.MD5OfMessageAttributes))
	}
	// Only the timestamp (by exact name): its vector.
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	got, err = e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: []string{"timestamp"}, WaitTimeSeconds: 5})
	if err != nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].MD5OfMessageAttributes) != "235c5c510d26fb653d073faed50ae77c" {
		t.Fatalf("prefix receive: %+v, %v", got, err)
	}
}

func TestSendMessageBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("batch", map[string]string{"MaximumMessageSize": "1024"})
	out, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("one"), MessageAttributes: map[string]types.MessageAttributeValue{"MyAttribute": strAttr("foobar")}},
		{Id: aws.String("b"), MessageBody: aws.String(strings.Repeat("x", 2000))},
		{Id: aws.String("c"), MessageBody: aws.String("three"), DelaySeconds: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 2 || len(out.Failed) != 1 {
		t.Fatalf("batch: %+v", out)
	}
	for _, s := range out.Successful {
		if *s.Id == "a" && aws.ToString(s.MD5OfMessageAttributes) != "adb59cd4678ea5a855436b949cd07ab6" {
			t.Errorf("entry a md5 %s", aws.ToString(s.MD5OfMessageAttributes))
		}
		if *s.Id == "c" && s.MD5OfMessageAttributes != nil {
			t.Errorf("entry c has attribute md5")
		}
	}
	f := out.Failed[0]
	if *f.Id != "b" || !f.SenderFault || *f.Code != "InvalidParameterValue" || !strings.Contains(aws.ToString(f.Message), "shorter than 1024") {
		t.Fatalf("failed entry: %+v", f)
	}

	entries := func(ids ...string) []types.SendMessageBatchRequestEntry {
		var es []types.SendMessageBatchRequestEntry
		for _, id := range ids {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String("x")})
		}
		return es
	}
	_, err = e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries("x", "x")})
	var notDistinct *types.BatchEntryIdsNotDistinct
	if !errors.As(err, &notDistinct) {
		t.Fatalf("duplicate ids: %v", err)
	}
	_, err = e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11")})
	var tooMany *types.TooManyEntriesInBatchRequest
	if !errors.As(err, &tooMany) {
		t.Fatalf("11 entries: %v", err)
	}
	_, err = e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{}})
	var empty *types.EmptyBatchRequest
	if !errors.As(err, &empty) {
		t.Fatalf("no entries: %v", err)
	}
	_, err = e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries("bad id!")})
	var badID *types.InvalidBatchEntryId
	if !errors.As(err, &badID) {
		t.Fatalf("bad id: %v", err)
	}
}

func TestBatchRequestTooLong(t *testing.T) {
	t.Parallel()
	e := setup(t)
	url := e.queue("toolong", nil)
	var es []types.SendMessageBatchRequestEntry
	for i := 0; i < 5; i++ {
		es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(strings.Repeat("y", 300<<10))})
	}
	_, err := e.client.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: es})
	var tooLong *types.BatchRequestTooLong
	if !errors.As(err, &tooLong) {
		t.Fatalf("1.5 MiB batch: %v", err)
	}
}

func TestDeleteAndVisibility(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("dv", nil)
	for i := 0; i < 3; i++ {
		if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []types.Message
	testutil.Eventually(t, 10*time.Second, "3 messages", func() bool {
		got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, got.Messages...)
		return len(msgs) >= 3
	})
	if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: msgs[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	// Deleting again with the same (now stale) handle succeeds.
	if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: msgs[0].ReceiptHandle}); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	_, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage")})
	var invalid *types.ReceiptHandleIsInvalid
	if !errors.As(err, &invalid) {
		t.Fatalf("garbage handle: %v", err)
	}
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 404 {
		t.Fatalf("garbage handle status: %v", err)
	}
	// ChangeMessageVisibility on the deleted message: InvalidParameterValue.
	_, err = e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 10})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "InvalidParameterValue" {
		t.Fatalf("visibility of deleted message: %v", err)
	}

	cv, err := e.client.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("ok"), ReceiptHandle: msgs[1].ReceiptHandle, VisibilityTimeout: 0},
		{Id: aws.String("bad"), ReceiptHandle: aws.String("garbage")},
	}})
	if err != nil || len(cv.Successful) != 1 || len(cv.Failed) != 1 || *cv.Failed[0].Code != "ReceiptHandleIsInvalid" {
		t.Fatalf("visibility batch: %+v, %v", cv, err)
	}
	// msgs[1] is visible again at once.
	var again []types.Message
	testutil.Eventually(t, 10*time.Second, "message visible again", func() bool {
		got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, got.Messages...)
		return len(again) > 0
	})
	if *again[0].MessageId != *msgs[1].MessageId {
		t.Fatalf("got %s, want %s", *again[0].MessageId, *msgs[1].MessageId)
	}

	db, err := e.client.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: again[0].ReceiptHandle},
		{Id: aws.String("b"), ReceiptHandle: msgs[2].ReceiptHandle},
		{Id: aws.String("c"), ReceiptHandle: aws.String("garbage")},
	}})
	if err != nil || len(db.Successful) != 2 || len(db.Failed) != 1 || *db.Failed[0].Id != "c" || !db.Failed[0].SenderFault {
		t.Fatalf("delete batch: %+v, %v", db, err)
	}
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil || attrs.Attributes["ApproximateNumberOfMessages"] != "0" || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Fatalf("counts after deletes: %v, %v", attrs.Attributes, err)
	}
}

func TestLongPollWakesOnSend(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("lp", nil)
	type result struct {
		out *awssqs.ReceiveMessageOutput
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
		done <- result{out, err, time.Now()}
	}()
	testutil.Eventually(t, 10*time.Second, "the receive to wait", func() bool { return e.srv.WaitingReceives() == 1 })
	sentAt := time.Now()
	if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("wake")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.out.Messages) != 1 || *r.out.Messages[0].Body != "wake" {
			t.Fatalf("receive: %+v, %v", r.out, r.err)
		}
		if d := r.at.Sub(sentAt); d > 2*time.Second {
			t.Fatalf("receive woke %v after the send", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("long poll did not wake on send")
	}
}

func TestReceiveOnDeletedQueueEnds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	url := e.queue("gone", nil)
	done := make(chan error, 1)
	go func() {
		_, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
		done <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the receive to wait", func() bool { return e.srv.WaitingReceives() == 1 })
	if _, err := e.client.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var gone *types.QueueDoesNotExist
		if !errors.As(err, &gone) {
			t.Fatalf("waiting receive on a deleted queue: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("waiting receive did not end when its queue was deleted")
	}
}

// jsonCall posts a raw JSON 1.0 request.
func (e *env) jsonCall(op, body string) (*http.Response, string) {
	return e.post("/", "application/x-amz-json-1.0", "AmazonSQS."+op, body)
}

func TestJSONErrorsOnTheWire(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("wire", nil)
	qurl := e.URL + "/000000000000/wire"
	cases := []struct {
		op, body   string
		status     int
		typ, query string
	}{
		{"GetQueueUrl", `{"QueueName":"nope"}`, 400, "com.amazonaws.sqs#QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender"},
		{"SendMessage", `{"QueueUrl":"` + qurl + `"}`, 400, "com.amazon.coral.service#MissingRequiredParameterException", "MissingParameter;Sender"},
		{"SendMessage", `{"QueueUrl":"` + qurl + `","MessageBody":"a\u0001b"}`, 400, "com.amazonaws.sqs#InvalidMessageContents", "InvalidMessageContents;Sender"},
		{"ReceiveMessage", `{"QueueUrl":"` + qurl + `","MaxNumberOfMessages":"abc"}`, 400, "com.amazon.coral.service#SerializationException", "SerializationException;Sender"},
		{"ReceiveMessage", `{"QueueUrl":"` + qurl + `","MaxNumberOfMessages":11}`, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue;Sender"},
		{"ReceiveMessage", `{"QueueUrl":"` + qurl + `","WaitTimeSeconds":21}`, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue;Sender"},
		{"ReceiveMessage", `{"QueueUrl":"` + qurl + `","VisibilityTimeout":99999999999999}`, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue;Sender"},
		{"DeleteMessage", `{"QueueUrl":"` + qurl + `","ReceiptHandle":"garbage"}`, 404, "com.amazonaws.sqs#ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender"},
		{"DeleteQueue", `{}`, 400, "com.amazon.coral.service#MissingRequiredParameterException", "MissingParameter;Sender"},
		{"CreateQueue", `{"QueueName":"bad name!"}`, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue;Sender"},
		{"CreateQueue", `{"QueueName":"x","Attributes":{"Foo":"1"}}`, 400, "com.amazonaws.sqs#InvalidAttributeName", "InvalidAttributeName;Sender"},
		{"TagQueue", `{"QueueUrl":"` + qurl + `","Tags":{"aws:a":"b"}}`, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue;Sender"},
		{"CancelMessageMoveTask", `{"TaskHandle":"garbage"}`, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue;Sender"},
		{"ListMessageMoveTasks", `{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:nope"}`, 404, "com.amazonaws.sqs#ResourceNotFoundException", "ResourceNotFoundException;Sender"},
		{"FooBar", `{}`, 400, "com.amazon.coral.service#UnknownOperationException", "UnknownOperationException;Sender"},
		{"SendMessage", `{not json`, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue;Sender"},
	}
	for _, c := range cases {
		resp, body := e.jsonCall(c.op, c.body)
		var got struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Errorf("%s %s: body %q: %v", c.op, c.body, body, err)
			continue
		}
		if resp.StatusCode != c.status || got.Type != c.typ || resp.Header.Get("X-Amzn-Query-Error") != c.query || got.Message == "" ||
			resp.Header.Get("X-Amzn-Requestid") == "" || resp.Header.Get("Content-Type") != "application/x-amz-json-1.0" {
			t.Errorf("%s %s: status %d, header %q, body %s", c.op, c.body, resp.StatusCode, resp.Header.Get("X-Amzn-Query-Error"), body)
		}
	}
	// UnsupportedOperation (a backend without an optional capability) is
	// tested in redrive_test.go.
}

func TestJSONEmptyOutput(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("empty", nil)
	qurl := e.URL + "/000000000000/empty"
	for _, op := range []string{"PurgeQueue", "DeleteQueue"} {
		resp, body := e.jsonCall(op, `{"QueueUrl":"`+qurl+`"}`)
		if resp.StatusCode != 200 || body != "" || resp.Header.Get("Content-Length") != "0" {
			t.Fatalf("%s: %d %q", op, resp.StatusCode, body)
		}
	}
}

func TestDeadLetterSourceArn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dlq := e.queue("dlq", nil)
	src := e.queue("src", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`,
	})
	if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &src, MessageBody: aws.String("poison")}); err != nil {
		t.Fatal(err)
	}
	// Receive #1 with a zero lease; receive #2 moves the message to the DLQ.
	first, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &src, WaitTimeSeconds: 5})
	if err != nil || len(first.Messages) != 1 {
		t.Fatalf("first receive: %+v, %v", first, err)
	}
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: first.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if second, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &src}); err != nil || len(second.Messages) != 0 {
		t.Fatalf("second receive should move the message: %+v, %v", second, err)
	}
	got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &dlq, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("DLQ receive: %+v, %v", got, err)
	}
	a := got.Messages[0].Attributes
	if a["DeadLetterQueueSourceArn"] != "arn:aws:sqs:us-east-1:000000000000:src" || a["ApproximateReceiveCount"] != "2" ||
		*got.Messages[0].MessageId != *first.Messages[0].MessageId {
		t.Fatalf("dead letter attributes: %v", a)
	}
}
