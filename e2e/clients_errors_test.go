package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// errorCase is one error provoked through a query-protocol client, with the
// code SQS answers (the legacy query code) and the modeled
// exception class botocore 1.29 raises for it ("ClientError" when its model
// has none).
type errorCase struct {
	name, code, exception string
	status                int
	// cli is the aws CLI command for the case; q is a queue URL whose queue
	// exists, missing one whose queue does not, prefix the test's name prefix.
	cli func(q, missing, prefix string) []string
}

var errorCases = []errorCase{
	{"get-queue-url-missing", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400,
		func(q, missing, p string) []string { return []string{"get-queue-url", "--queue-name", p + "-missing"} }},
	{"send-to-missing-queue", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400,
		func(q, missing, p string) []string {
			return []string{"send-message", "--queue-url", missing, "--message-body", "x"}
		}},
	{"receive-from-missing-queue", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400,
		func(q, missing, p string) []string { return []string{"receive-message", "--queue-url", missing} }},
	{"delete-queue-missing", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400,
		func(q, missing, p string) []string { return []string{"delete-queue", "--queue-url", missing} }},
	{"queue-name-exists", "QueueAlreadyExists", "QueueNameExists", 400,
		func(q, missing, p string) []string {
			return []string{"create-queue", "--queue-name", p + "-q", "--attributes", `{"VisibilityTimeout":"31"}`}
		}},
	{"receipt-handle-invalid", "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404,
		func(q, missing, p string) []string {
			return []string{"delete-message", "--queue-url", q, "--receipt-handle", "not-a-receipt-handle"}
		}},
	{"batch-ids-not-distinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "BatchEntryIdsNotDistinct", 400,
		func(q, missing, p string) []string {
			return []string{"send-message-batch", "--queue-url", q, "--entries",
				`[{"Id":"a","MessageBody":"1"},{"Id":"a","MessageBody":"2"}]`}
		}},
	{"too-many-entries", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "TooManyEntriesInBatchRequest", 400,
		func(q, missing, p string) []string {
			var es []string
			for i := range 11 {
				es = append(es, fmt.Sprintf(`{"Id":"e%d","MessageBody":"x"}`, i))
			}
			return []string{"send-message-batch", "--queue-url", q, "--entries", "[" + strings.Join(es, ",") + "]"}
		}},
	{"invalid-batch-entry-id", "AWS.SimpleQueueService.InvalidBatchEntryId", "InvalidBatchEntryId", 400,
		func(q, missing, p string) []string {
			return []string{"send-message-batch", "--queue-url", q, "--entries", `[{"Id":"bad id!","MessageBody":"x"}]`}
		}},
	{"invalid-attribute-name", "InvalidAttributeName", "InvalidAttributeName", 400,
		func(q, missing, p string) []string {
			return []string{"create-queue", "--queue-name", p + "-attr", "--attributes", `{"NoSuchAttribute":"1"}`}
		}},
	{"invalid-attribute-value", "InvalidAttributeValue", "ClientError", 400,
		func(q, missing, p string) []string {
			return []string{"set-queue-attributes", "--queue-url", q, "--attributes", `{"VisibilityTimeout":"99999"}`}
		}},
	{"invalid-queue-name", "InvalidParameterValue", "ClientError", 400,
		func(q, missing, p string) []string { return []string{"create-queue", "--queue-name", "bad name!"} }},
	// boto3 sends a NUL; a command line cannot hold one, so the CLI sends U+FFFE.
	{"invalid-message-contents", "InvalidMessageContents", "InvalidMessageContents", 400,
		func(q, missing, p string) []string {
			return []string{"send-message", "--queue-url", q, "--message-body", "bad \uFFFE body"}
		}},
}

// TestClientErrorCodes checks that Debian's query-protocol clients, boto3 and
// the aws CLI, see the error codes (and, for boto3, the modeled exception
// classes and HTTP statuses) that real SQS gives them.
func TestClientErrorCodes(t *testing.T) {
	t.Parallel()
	b := startBroker(t, t.TempDir())

	t.Run("boto3", func(t *testing.T) {
		t.Parallel()
		needDebianPython(t, "boto3 (Debian python3-boto3 under /usr/bin/python3)", "boto3")
		out := runClient(t, 2*time.Minute, "testdata/clients/python", clientEnv(t), debianPython,
			"errors.py", b.URL, uniquePrefix("boto3err"))
		var got map[string]struct {
			Code, Exception, SenderFault string
			Status                       int
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("errors.py output: %v\n%s", err, out)
		}
		for _, c := range errorCases {
			g, ok := got[c.name]
			switch {
			case !ok:
				t.Errorf("%s: errors.py has no such case", c.name)
			case g.Code != c.code || g.Exception != c.exception || g.Status != c.status || g.SenderFault != "Sender":
				t.Errorf("%s: boto3 saw code %q, exception %s, HTTP %d, type %q; want %q, %s, %d, Sender",
					c.name, g.Code, g.Exception, g.Status, g.SenderFault, c.code, c.exception, c.status)
			}
		}
		if len(got) != len(errorCases) {
			t.Errorf("errors.py ran %d cases, the table has %d", len(got), len(errorCases))
		}
	})

	t.Run("awscli", func(t *testing.T) {
		t.Parallel()
		cli := newAWSCLI(t, b.URL)
		prefix := uniquePrefix("clierr")
		q := cli.run("create-queue", "--queue-name", prefix+"-q", "--attributes", `{"VisibilityTimeout":"30"}`)["QueueUrl"].(string)
		missing := q[:strings.LastIndex(q, "/")+1] + prefix + "-missing"
		for _, c := range errorCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				cli := &awsCLI{t: t, url: cli.url, env: cli.env}
				_, code, stderr := cli.try(c.cli(q, missing, prefix)...)
				if code != c.code {
					t.Errorf("aws CLI saw %q, want %q\n%s", code, c.code, stderr)
				}
			})
		}
	})
}
