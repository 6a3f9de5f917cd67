package sqs_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testutil"
)

// Tests of the redrive, tag and permission actions with aws-sdk-go-v2 (JSON).

const acct = "000000000000"

func qarn(name string) string { return "arn:aws:sqs:us-east-1:" + acct + ":" + name }

// apiErr requires err to be an SQS error with the query code and, when msg
// is not "", that message.
func apiErr(t *testing.T, what string, err error, code, msg string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code || (msg != "" && ae.ErrorMessage() != msg) {
		t.Fatalf("%s: error %v, want %s %q", what, err, code, msg)
	}
}

// deadLetter creates dlq and src (maxReceiveCount 1, visibility 0), sends
// bodies to src and receives until all of them moved to dlq.
func (e *env) deadLetter(src, dlq string, bodies ...string) string {
	e.t.Helper()
	ctx := context.Background()
	dlqURL := e.queue(dlq, nil)
	srcURL := e.queue(src, map[string]string{
		"VisibilityTimeout": "0",
		"RedrivePolicy":     `{"deadLetterTargetArn":"` + qarn(dlq) + `","maxReceiveCount":1}`,
	})
	for _, b := range bodies {
		if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &srcURL, MessageBody: aws.String(b)}); err != nil {
			e.t.Fatal(err)
		}
	}
	testutil.Eventually(e.t, 10*time.Second, "messages dead-lettered", func() bool {
		if _, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &srcURL, MaxNumberOfMessages: 10}); err != nil {
			e.t.Fatal(err)
		}
		return e.count(dlqURL) == len(bodies)
	})
	return dlqURL
}

// count is a queue's ApproximateNumberOfMessages.
func (e *env) count(url string) int {
	e.t.Helper()
	out, err := e.client.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	return n
}

func (e *env) latestTask(source string) types.ListMessageMoveTasksResultEntry {
	e.t.Helper()
	out, err := e.client.ListMessageMoveTasks(context.Background(), &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(qarn(source))})
	if err != nil || len(out.Results) != 1 {
		e.t.Fatalf("ListMessageMoveTasks(%s) = %+v, %v", source, out, err)
	}
	return out.Results[0]
}

func TestMoveTaskBackToSource(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.deadLetter("src", "dlq", "a", "b", "c")
	srcURL := e.URL + "/" + acct + "/src"
	before := time.Now()
	out, err := e.client.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(qarn("dlq"))})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(*out.TaskHandle)
	var handle map[string]string
	if err != nil || json.Unmarshal(raw, &handle) != nil || handle["sourceArn"] != qarn("dlq") || len(handle["taskId"]) != 36 {
		t.Fatalf("TaskHandle %q decodes to %s", *out.TaskHandle, raw)
	}
	var task types.ListMessageMoveTasksResultEntry
	testutil.Eventually(t, 10*time.Second, "task COMPLETED", func() bool {
		task = e.latestTask("dlq")
		return aws.ToString(task.Status) == "COMPLETED"
	})
	if task.ApproximateNumberOfMessagesMoved != 3 || aws.ToInt64(task.ApproximateNumberOfMessagesToMove) != 3 ||
		task.TaskHandle != nil || aws.ToString(task.SourceArn) != qarn("dlq") || task.DestinationArn != nil ||
		task.MaxNumberOfMessagesPerSecond != nil {
		t.Fatalf("completed task = %+v", task)
	}
	if started := time.UnixMilli(task.StartedTimestamp); started.Before(before.Add(-time.Second)) || started.After(time.Now()) {
		t.Fatalf("StartedTimestamp %v, want about %v", started, before)
	}
	if n := e.count(srcURL); n != 3 {
		t.Fatalf("src holds %d messages after the move, want 3", n)
	}
	// The completed task cannot be cancelled; a task id nobody knows is not found.
	_, err = e.client.CancelMessageMoveTask(ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: out.TaskHandle})
	apiErr(t, "cancel of a completed task", err, "InvalidParameterValue", "")
	unknown := model.EncodeTaskHandle("00000000-0000-4000-8000-000000000000", qarn("dlq"))
	_, err = e.client.CancelMessageMoveTask(ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: &unknown})
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) || rnf.ErrorMessage() != "Task does not exist." {
		t.Fatalf("cancel of an unknown task: %v", err)
	}
}

func TestMoveTaskErrorsAndCancel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.queue("plain", nil)
	dlqURL := e.deadLetter("src", "dlq", "1", "2", "3", "4", "5")
	start := func(in *awssqs.StartMessageMoveTaskInput) (*awssqs.StartMessageMoveTaskOutput, error) {
		return e.client.StartMessageMoveTask(ctx, in)
	}
	_, err := start(&awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(qarn("plain"))})
	apiErr(t, "source that is no DLQ", err, "InvalidParameterValue", "Source queue must be configured as a Dead Letter Queue.")
	_, err = start(&awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(qarn("dlq")), DestinationArn: aws.String(qarn("nope"))})
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) || rnf.ErrorMessage() != "The resource that you specified for the DestinationArn parameter doesn't exist." {
		t.Fatalf("missing destination: %v", err)
	}
	_, err = start(&awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(qarn("nope"))})
	if !errors.As(err, &rnf) {
		t.Fatalf("missing source: %v", err)
	}
	_, err = start(&awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(qarn("dlq")), MaxNumberOfMessagesPerSecond: aws.Int32(501)})
	apiErr(t, "rate 501", err, "InvalidParameterValue", "")

	// Rate 1 on the real clock: the first message moves at once, the rest
	// one per second, so the task is still running while we look.
	out, err := start(&awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(qarn("dlq")), DestinationArn: aws.String(qarn("plain")), MaxNumberOfMessagesPerSecond: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = start(&awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(qarn("dlq"))})
	apiErr(t, "a second task", err, "InvalidParameterValue", "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
	task := e.latestTask("dlq")
	if aws.ToString(task.Status) != "RUNNING" || aws.ToString(task.TaskHandle) != *out.TaskHandle ||
		aws.ToInt32(task.MaxNumberOfMessagesPerSecond) != 1 || aws.ToString(task.DestinationArn) != qarn("plain") {
		t.Fatalf("running task = %+v", task)
	}
	c, err := e.client.CancelMessageMoveTask(ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: out.TaskHandle})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "task CANCELLED", func() bool { return aws.ToString(e.latestTask("dlq").Status) == "CANCELLED" })
	task = e.latestTask("dlq")
	if task.ApproximateNumberOfMessagesMoved < c.ApproximateNumberOfMessagesMoved || task.TaskHandle != nil {
		t.Fatalf("cancelled task = %+v (cancel said %d moved)", task, c.ApproximateNumberOfMessagesMoved)
	}
	// The cancel can reach the task before its first step (CI saw 0 moved on
	// a loaded machine), so any count from 0 to 5 is right as long as every
	// message is in one of the two queues.
	if moved := int(task.ApproximateNumberOfMessagesMoved); e.count(dlqURL)+e.count(e.URL+"/"+acct+"/plain") != 5 || moved > 5 {
		t.Fatalf("after cancel: %d moved, dlq %d, plain %d", moved, e.count(dlqURL), e.count(e.URL+"/"+acct+"/plain"))
	}
	_, err = e.client.CancelMessageMoveTask(ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: aws.String("garbage")})
	apiErr(t, "garbage handle", err, "InvalidParameterValue", "Value for parameter TaskHandle is invalid.")
	other := model.EncodeTaskHandle("00000000-0000-4000-8000-000000000000", qarn("nope"))
	_, err = e.client.CancelMessageMoveTask(ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: &other})
	if !errors.As(err, &rnf) || rnf.ErrorMessage() != "The resource that you specified for the SourceArn parameter doesn't exist." {
		t.Fatalf("handle of an unknown source: %v", err)
	}
	all, err := e.client.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(qarn("dlq")), MaxResults: aws.Int32(10)})
	if err != nil || len(all.Results) != 1 {
		t.Fatalf("ListMessageMoveTasks(10) = %+v, %v", all, err)
	}
	_, err = e.client.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(qarn("dlq")), MaxResults: aws.Int32(11)})
	apiErr(t, "MaxResults 11", err, "InvalidParameterValue", "")
}

func TestListDeadLetterSourceQueues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dlq := e.queue("dlq", nil)
	rp := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + qarn("dlq") + `","maxReceiveCount":3}`}
	for _, n := range []string{"s3", "s1", "s2"} {
		e.queue(n, rp)
	}
	e.queue("unrelated", nil)
	out, err := e.client.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
	if err != nil || strings.Join(out.QueueUrls, " ") != e.URL+"/"+acct+"/s1 "+e.URL+"/"+acct+"/s2 "+e.URL+"/"+acct+"/s3" || out.NextToken != nil {
		t.Fatalf("ListDeadLetterSourceQueues = %+v, %v", out, err)
	}
	page, err := e.client.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq, MaxResults: aws.Int32(2)})
	if err != nil || len(page.QueueUrls) != 2 || page.NextToken == nil {
		t.Fatalf("page 1 = %+v, %v", page, err)
	}
	page, err = e.client.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq, MaxResults: aws.Int32(2), NextToken: page.NextToken})
	if err != nil || len(page.QueueUrls) != 1 || !strings.HasSuffix(page.QueueUrls[0], "/s3") || page.NextToken != nil {
		t.Fatalf("page 2 = %+v, %v", page, err)
	}
	none, err := e.client.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(e.URL + "/" + acct + "/unrelated")})
	if err != nil || len(none.QueueUrls) != 0 {
		t.Fatalf("no sources = %+v, %v", none, err)
	}
	_, err = e.client.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(e.URL + "/" + acct + "/nope")})
	var qdne *types.QueueDoesNotExist
	if !errors.As(err, &qdne) {
		t.Fatalf("missing queue: %v", err)
	}
}

func TestTagsAndPermissions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	out, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("tagged"), Tags: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	url := out.QueueUrl
	if _, err := e.client.TagQueue(ctx, &awssqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{"env": "prod"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.UntagQueue(ctx, &awssqs.UntagQueueInput{QueueUrl: url, TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	tags, err := e.client.ListQueueTags(ctx, &awssqs.ListQueueTagsInput{QueueUrl: url})
	if err != nil || len(tags.Tags) != 1 || tags.Tags["env"] != "prod" {
		t.Fatalf("ListQueueTags = %+v, %v", tags, err)
	}
	_, err = e.client.TagQueue(ctx, &awssqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{strings.Repeat("k", 129): "v"}})
	apiErr(t, "a 129-character key", err, "InvalidParameterValue", "")

	if _, err := e.client.AddPermission(ctx, &awssqs.AddPermissionInput{
		QueueUrl: url, Label: aws.String("senders"), AWSAccountIds: []string{"111122223333"}, Actions: []string{"SendMessage", "GetQueueUrl"},
	}); err != nil {
		t.Fatal(err)
	}
	attrs, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []types.QueueAttributeName{"Policy"}})
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Version   string
		Statement []struct {
			Sid, Effect, Resource string
			Principal             struct{ AWS []string }
			Action                []string
		}
	}
	if err := json.Unmarshal([]byte(attrs.Attributes["Policy"]), &policy); err != nil || len(policy.Statement) != 1 {
		t.Fatalf("Policy = %q (%v)", attrs.Attributes["Policy"], err)
	}
	st := policy.Statement[0]
	if st.Sid != "senders" || st.Effect != "Allow" || st.Resource != qarn("tagged") ||
		strings.Join(st.Principal.AWS, ",") != "arn:aws:iam::111122223333:root" || strings.Join(st.Action, ",") != "SQS:SendMessage,SQS:GetQueueUrl" {
		t.Fatalf("statement = %+v", st)
	}
	_, err = e.client.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: url, Label: aws.String("senders"), AWSAccountIds: []string{"1"}, Actions: []string{"*"}})
	apiErr(t, "a duplicate label", err, "InvalidParameterValue", "")
	_, err = e.client.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: url, Label: aws.String("bad label"), AWSAccountIds: []string{"1"}, Actions: []string{"*"}})
	apiErr(t, "a label with a space", err, "InvalidParameterValue", "")
	if _, err := e.client.RemovePermission(ctx, &awssqs.RemovePermissionInput{QueueUrl: url, Label: aws.String("senders")}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.RemovePermission(ctx, &awssqs.RemovePermissionInput{QueueUrl: url, Label: aws.String("senders")})
	apiErr(t, "an unknown label", err, "InvalidParameterValue", "")

	// The SSE attributes are accepted and returned.
	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: url, Attributes: map[string]string{
		"KmsMasterKeyId": "alias/aws/sqs", "KmsDataKeyReusePeriodSeconds": "600",
	}}); err != nil {
		t.Fatal(err)
	}
	attrs, err = e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil || attrs.Attributes["KmsMasterKeyId"] != "alias/aws/sqs" || attrs.Attributes["KmsDataKeyReusePeriodSeconds"] != "600" ||
		attrs.Attributes["SqsManagedSseEnabled"] != "false" || attrs.Attributes["Policy"] != "" {
		t.Fatalf("attributes = %v, %v", attrs.Attributes, err)
	}
}
