package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// allActions are the 23 SQS actions, each with the output members (paths as
// allactions.py names them: [] a list item, {} a map value) that the audit
// must have seen present, well typed, in at least one of its calls. The
// script itself fails a call on any member the model defines that is missing
// where SQS returns it, present where SQS leaves it out, of the wrong type, or
// any element or key in the raw body that the model does not define.
var allActions = []struct {
	action  string
	members []string
}{
	{"CreateQueue", []string{"QueueUrl"}},
	{"GetQueueUrl", []string{"QueueUrl"}},
	{"ListQueues", []string{"QueueUrls", "NextToken"}},
	{"DeleteQueue", nil},
	{"PurgeQueue", nil},
	{"GetQueueAttributes", []string{"Attributes"}},
	{"SetQueueAttributes", nil},
	{"TagQueue", nil},
	{"UntagQueue", nil},
	{"ListQueueTags", []string{"Tags"}},
	{"AddPermission", nil},
	{"RemovePermission", nil},
	{"SendMessage", []string{"MD5OfMessageBody", "MD5OfMessageAttributes", "MD5OfMessageSystemAttributes", "MessageId", "SequenceNumber"}},
	{"SendMessageBatch", []string{"Successful[].Id", "Successful[].MessageId", "Successful[].MD5OfMessageBody",
		"Successful[].MD5OfMessageAttributes", "Successful[].MD5OfMessageSystemAttributes", "Successful[].SequenceNumber",
		"Failed[].Id", "Failed[].SenderFault", "Failed[].Code", "Failed[].Message"}},
	{"ReceiveMessage", []string{"Messages[].MessageId", "Messages[].ReceiptHandle", "Messages[].MD5OfBody", "Messages[].Body",
		"Messages[].Attributes", "Messages[].MD5OfMessageAttributes", "Messages[].MessageAttributes",
		"Messages[].MessageAttributes{}.DataType", "Messages[].MessageAttributes{}.StringValue", "Messages[].MessageAttributes{}.BinaryValue"}},
	{"DeleteMessage", nil},
	{"DeleteMessageBatch", []string{"Successful[].Id", "Failed[].Id", "Failed[].SenderFault", "Failed[].Code", "Failed[].Message"}},
	{"ChangeMessageVisibility", nil},
	{"ChangeMessageVisibilityBatch", []string{"Successful[].Id", "Failed[].Id", "Failed[].SenderFault", "Failed[].Code", "Failed[].Message"}},
	{"ListDeadLetterSourceQueues", []string{"queueUrls", "NextToken"}},
	{"StartMessageMoveTask", []string{"TaskHandle"}},
	{"ListMessageMoveTasks", []string{"Results[].TaskHandle", "Results[].Status", "Results[].SourceArn", "Results[].DestinationArn",
		"Results[].MaxNumberOfMessagesPerSecond", "Results[].ApproximateNumberOfMessagesMoved",
		"Results[].ApproximateNumberOfMessagesToMove", "Results[].FailureReason", "Results[].StartedTimestamp"}},
	{"CancelMessageMoveTask", []string{"ApproximateNumberOfMessagesMoved"}},
}

// allActionErrors are the error cases of allactions.py: the code botocore
// reports (the query code in both protocols: JSON carries it in
// x-amzn-query-error), the exception class, the HTTP status, and for JSON the
// QueryErrorCode botocore takes from __type.
var allActionErrors = []struct {
	name, code, exception string
	status                int
	jsonType              string
}{
	{"get-queue-url-missing", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400, "QueueDoesNotExist"},
	{"send-to-missing-queue", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400, "QueueDoesNotExist"},
	{"queue-name-exists", "QueueAlreadyExists", "QueueNameExists", 400, "QueueNameExists"},
	{"receipt-handle-invalid", "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404, "ReceiptHandleIsInvalid"},
	{"empty-batch", "AWS.SimpleQueueService.EmptyBatchRequest", "EmptyBatchRequest", 400, "EmptyBatchRequest"},
	{"too-many-entries", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "TooManyEntriesInBatchRequest", 400, "TooManyEntriesInBatchRequest"},
	{"batch-ids-not-distinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "BatchEntryIdsNotDistinct", 400, "BatchEntryIdsNotDistinct"},
	{"invalid-attribute-name", "InvalidAttributeName", "InvalidAttributeName", 400, "InvalidAttributeName"},
	{"purge-in-progress", "AWS.SimpleQueueService.PurgeQueueInProgress", "PurgeQueueInProgress", 403, "PurgeQueueInProgress"},
	{"move-source-missing", "ResourceNotFoundException", "ResourceNotFoundException", 404, "ResourceNotFoundException"},
	{"list-move-tasks-missing-source", "ResourceNotFoundException", "ResourceNotFoundException", 404, "ResourceNotFoundException"},
	{"cancel-bad-handle", "InvalidParameterValue", "ClientError", 400, "InvalidParameterValueException"},
	{"receive-max-invalid", "InvalidParameterValue", "ClientError", 400, "InvalidParameterValueException"},
}

type allActionsResult struct {
	Protocol, Botocore, Fatal string
	Actions                   map[string]struct {
		Calls    int
		Seen     []string
		Problems []string
	}
	Errors map[string]struct {
		Code, QueryCode, Exception, Type string
		HasMessage                       bool
		Status                           int
	}
}

// jsonPython finds a python3 whose botocore speaks SQS's JSON protocol
// (boto3 >= 1.34.90): the python3 on PATH, typically a pyenv one.
func jsonPython() (string, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", err
	}
	return py, checkCommand(py, "-c", "import boto3, botocore.session; "+
		"p = botocore.session.get_session().get_service_model('sqs').metadata['protocol']; "+
		"assert p == 'json', 'botocore %s speaks %s' % (botocore.__version__, p)")
}

// TestClientAllActions calls every SQS action through boto3 in both wire
// protocols (testdata/clients/python/allactions.py) and audits each response
// against the client's own service model: Debian's botocore 1.29 for query,
// a JSON-protocol botocore (the python3 on PATH) for JSON.
func TestClientAllActions(t *testing.T) {
	t.Parallel()
	b := startBroker(t, t.TempDir(), "--strict-purge")
	protocols := []struct {
		name string
		py   func(t *testing.T) string
	}{
		{"query", func(t *testing.T) string {
			needDebianPython(t, "boto3 (Debian python3-boto3 under /usr/bin/python3)", "boto3")
			return debianPython
		}},
		{"json", func(t *testing.T) string {
			py, err := jsonPython()
			if err != nil {
				// Not in any SLUICE_REQUIRE group: only some machines have it.
				t.Skipf("SKIP: no python3 with a JSON-protocol boto3 (>= 1.34.90) on PATH (%v); install one with: pip install 'boto3>=1.34.90'", err)
			}
			return py
		}},
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			py := p.py(t)
			start := time.Now()
			out := runClient(t, 2*time.Minute, "testdata/clients/python", clientEnv(t), py,
				"allactions.py", b.URL, p.name, uniquePrefix("all"+p.name))
			t.Logf("allactions.py (%s) ran in %v", p.name, time.Since(start).Round(time.Millisecond))
			var r allActionsResult
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("allactions.py output: %v\n%s", err, out)
			}
			if r.Fatal != "" {
				t.Errorf("allactions.py (botocore %s) stopped: %s", r.Botocore, r.Fatal)
			}
			for _, a := range allActions {
				t.Run(a.action, func(t *testing.T) {
					got, ok := r.Actions[a.action]
					if !ok || got.Calls == 0 {
						t.Fatalf("%s was never called", a.action)
					}
					for _, pr := range got.Problems {
						t.Errorf("%s (%s, botocore %s): %s", a.action, p.name, r.Botocore, pr)
					}
					for _, m := range a.members {
						if !slices.Contains(got.Seen, m) {
							t.Errorf("%s: output member %s never seen (seen: %s)", a.action, m, strings.Join(got.Seen, ", "))
						}
					}
				})
			}
			if len(r.Actions) != len(allActions) {
				t.Errorf("allactions.py called %d actions, the table has %d", len(r.Actions), len(allActions))
			}
			for _, c := range allActionErrors {
				t.Run("error-"+c.name, func(t *testing.T) {
					g, ok := r.Errors[c.name]
					if !ok {
						t.Fatalf("allactions.py has no error case %s", c.name)
					}
					want := fmt.Sprintf("code %s, exception %s, HTTP %d, type Sender", c.code, c.exception, c.status)
					have := fmt.Sprintf("code %s, exception %s, HTTP %d, type %s", g.Code, g.Exception, g.Status, g.Type)
					if have != want || !g.HasMessage {
						t.Errorf("boto3 saw %s (message: %v); want %s with a message", have, g.HasMessage, want)
					}
					if p.name == "json" && g.QueryCode != c.jsonType {
						t.Errorf("JSON QueryErrorCode (__type) %q, want %q", g.QueryCode, c.jsonType)
					}
				})
			}
			if len(r.Errors) != len(allActionErrors) {
				t.Errorf("allactions.py ran %d error cases, the table has %d", len(r.Errors), len(allActionErrors))
			}
		})
	}
}
