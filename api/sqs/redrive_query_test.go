package sqs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// The redrive, tag and permission actions in the query protocol: flattened
// parameters in, flattened XML out.

func TestQueryTagsAndPermissions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	resp, body := e.form("/", vals("Action", "CreateQueue", "QueueName", "qt", "Tag.1.Key", "team", "Tag.1.Value", "a"))
	if resp.StatusCode != 200 {
		t.Fatalf("CreateQueue: %d %s", resp.StatusCode, body)
	}
	path := "/" + acct + "/qt"
	resp, body = e.form(path, vals("Action", "TagQueue", "Tag.1.Key", "env", "Tag.1.Value", "prod", "Tag.2.Key", "cost", "Tag.2.Value", "7"))
	if resp.StatusCode != 200 {
		t.Fatalf("TagQueue: %d %s", resp.StatusCode, body)
	}
	decode(t, body, "TagQueueResponse", nil)
	resp, body = e.form(path, vals("Action", "UntagQueue", "TagKey.1", "cost"))
	if resp.StatusCode != 200 {
		t.Fatalf("UntagQueue: %d %s", resp.StatusCode, body)
	}
	var tags struct {
		Tags []struct {
			Key   string `xml:"Key"`
			Value string `xml:"Value"`
		} `xml:"ListQueueTagsResult>Tag"`
	}
	_, body = e.get(path + "?Action=ListQueueTags")
	decode(t, body, "ListQueueTagsResponse", &tags)
	if len(tags.Tags) != 2 || tags.Tags[0].Key != "env" || tags.Tags[0].Value != "prod" || tags.Tags[1].Key != "team" {
		t.Fatalf("ListQueueTags = %+v\n%s", tags, body)
	}
	resp, body = e.form(path, vals("Action", "TagQueue", "Tag.1.Key", "aws:x", "Tag.1.Value", "v"))
	expectError(t, resp, body, 400, "InvalidParameterValue")

	resp, body = e.form(path, vals("Action", "AddPermission", "Label", "l1", "AWSAccountId.1", "111122223333", "AWSAccountId.2", "444455556666",
		"ActionName.1", "SendMessage", "ActionName.2", "ReceiveMessage"))
	if resp.StatusCode != 200 {
		t.Fatalf("AddPermission: %d %s", resp.StatusCode, body)
	}
	var attrs struct {
		Attrs []nameValue `xml:"GetQueueAttributesResult>Attribute"`
	}
	_, body = e.get(path + "?Action=GetQueueAttributes&AttributeName.1=Policy")
	decode(t, body, "GetQueueAttributesResponse", &attrs)
	if len(attrs.Attrs) != 1 || !strings.Contains(attrs.Attrs[0].Value, `"arn:aws:iam::444455556666:root"`) ||
		!strings.Contains(attrs.Attrs[0].Value, `"SQS:ReceiveMessage"`) {
		t.Fatalf("Policy = %+v", attrs)
	}
	resp, body = e.form(path, vals("Action", "AddPermission", "Label", "l1", "AWSAccountId.1", "1", "ActionName.1", "*"))
	expectError(t, resp, body, 400, "InvalidParameterValue")
	resp, body = e.form(path, vals("Action", "RemovePermission", "Label", "l1"))
	if resp.StatusCode != 200 {
		t.Fatalf("RemovePermission: %d %s", resp.StatusCode, body)
	}
	resp, body = e.form(path, vals("Action", "RemovePermission", "Label", "l1"))
	expectError(t, resp, body, 400, "InvalidParameterValue")
}

func TestQueryRedrive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.deadLetter("src", "dlq", "x", "y")
	var sources struct {
		URLs []string `xml:"ListDeadLetterSourceQueuesResult>QueueUrl"`
	}
	_, body := e.form("/", vals("Action", "ListDeadLetterSourceQueues", "QueueUrl", e.URL+"/"+acct+"/dlq"))
	decode(t, body, "ListDeadLetterSourceQueuesResponse", &sources)
	if len(sources.URLs) != 1 || sources.URLs[0] != e.URL+"/"+acct+"/src" {
		t.Fatalf("ListDeadLetterSourceQueues = %v\n%s", sources.URLs, body)
	}

	var started struct {
		Handle string `xml:"StartMessageMoveTaskResult>TaskHandle"`
	}
	resp, body := e.form("/", vals("Action", "StartMessageMoveTask", "SourceArn", qarn("dlq"), "MaxNumberOfMessagesPerSecond", "100"))
	if resp.StatusCode != 200 {
		t.Fatalf("StartMessageMoveTask: %d %s", resp.StatusCode, body)
	}
	decode(t, body, "StartMessageMoveTaskResponse", &started)
	if started.Handle == "" {
		t.Fatalf("no TaskHandle in %s", body)
	}
	type entry struct {
		TaskHandle   string `xml:"TaskHandle"`
		Status       string `xml:"Status"`
		SourceArn    string `xml:"SourceArn"`
		Rate         int    `xml:"MaxNumberOfMessagesPerSecond"`
		Moved        int64  `xml:"ApproximateNumberOfMessagesMoved"`
		ToMove       int64  `xml:"ApproximateNumberOfMessagesToMove"`
		StartedMilli int64  `xml:"StartedTimestamp"`
	}
	var list struct {
		Entries []entry `xml:"ListMessageMoveTasksResult>ListMessageMoveTasksResultEntry"`
	}
	testutil.Eventually(t, 10*time.Second, "task COMPLETED", func() bool {
		_, body = e.form("/", vals("Action", "ListMessageMoveTasks", "SourceArn", qarn("dlq"), "MaxResults", "10"))
		list.Entries = nil
		decode(t, body, "ListMessageMoveTasksResponse", &list)
		return len(list.Entries) == 1 && list.Entries[0].Status == "COMPLETED"
	})
	got := list.Entries[0]
	if got.TaskHandle != "" || got.SourceArn != qarn("dlq") || got.Rate != 100 || got.Moved != 2 || got.ToMove != 2 || got.StartedMilli == 0 {
		t.Fatalf("entry = %+v\n%s", got, body)
	}
	resp, body = e.form("/", vals("Action", "CancelMessageMoveTask", "TaskHandle", started.Handle))
	expectError(t, resp, body, 400, "InvalidParameterValue")
	resp, body = e.form("/", vals("Action", "StartMessageMoveTask", "SourceArn", qarn("dlq"), "DestinationArn", qarn("gone")))
	expectError(t, resp, body, 404, "ResourceNotFoundException")
	resp, body = e.form("/", vals("Action", "StartMessageMoveTask"))
	expectError(t, resp, body, 400, "MissingParameter")
}
