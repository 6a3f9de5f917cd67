package sqs_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// keyAccounts stands in for authentication in these tests: a request whose
// SigV4 Authorization header names one of its access keys gets an
// Authenticated broker.Caller of that key's account (the signature is not
// checked). Other requests carry no Caller: they act as the broker's own
// account.
type keyAccounts map[string]string

func (k keyAccounts) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
		key, _, _ := strings.Cut(cred, "/")
		if account, ok := k[key]; ok {
			r = r.WithContext(broker.WithCaller(r.Context(), broker.Caller{Authenticated: true, Account: account, AccessKey: key}))
		}
		h.ServeHTTP(w, r)
	})
}

// accountsEnv serves the SQS API over the embedded backend behind
// keyAccounts, and returns its URL.
func accountsEnv(t *testing.T, keys keyAccounts) string {
	t.Helper()
	be, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	front, err := broker.New(be, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(keys.wrap(sqs.New(front, sqs.Config{})))
	t.Cleanup(func() {
		srv.Close()
		if err := front.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv.URL
}

func clientFor(url, key string) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(key, "SECRET", ""),
		HTTPClient:  &http.Client{Timeout: 10 * time.Second, Transport: sqssource.Transport(nil)},
	})
}

// wantAPIError fails unless err is an SQS error with the given code and
// HTTP status.
func wantAPIError(t *testing.T, what string, err error, code string, status int) {
	t.Helper()
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if !errors.As(err, &ae) || ae.ErrorCode() != code || !errors.As(err, &re) || re.HTTPStatusCode() != status {
		t.Fatalf("%s: %v, want %s (%d)", what, err, code, status)
	}
}

// TestAccountsCrossAccount: two callers in two accounts with
// aws-sdk-go-v2. B is refused on A's queue; A grants B SendMessage with
// AddPermission; B can send (single and batch) but not receive or change
// the queue; RemovePermission revokes.
func TestAccountsCrossAccount(t *testing.T) {
	t.Parallel()
	const a, b = "111111111111", "222222222222"
	const c = "333333333333"
	url := accountsEnv(t, keyAccounts{"AKIDA": a, "AKIDB": b, "AKIDC": c})
	ctx := context.Background()
	ca, cb, anon := clientFor(url, "AKIDA"), clientFor(url, "AKIDB"), clientFor(url, "AKID")

	// Queue URLs, ARNs and listings carry the owning account.
	created, err := ca.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil || *created.QueueUrl != url+"/"+a+"/jobs" {
		t.Fatalf("A's CreateQueue: %v, %v", created, err)
	}
	qa := *created.QueueUrl
	attrs, err := ca.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &qa, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil || attrs.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:"+a+":jobs" {
		t.Fatalf("A's QueueArn: %v, %v", attrs, err)
	}
	mine, err := cb.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil || *mine.QueueUrl != url+"/"+b+"/jobs" {
		t.Fatalf("B's CreateQueue of the same name: %v, %v", mine, err)
	}
	own, err := anon.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil || *own.QueueUrl != url+"/000000000000/jobs" {
		t.Fatalf("an unauthenticated CreateQueue: %v, %v", own, err)
	}
	for _, c := range []struct {
		client *awssqs.Client
		want   string
	}{{ca, qa}, {cb, *mine.QueueUrl}, {anon, *own.QueueUrl}} {
		list, err := c.client.ListQueues(ctx, &awssqs.ListQueuesInput{})
		if err != nil || len(list.QueueUrls) != 1 || list.QueueUrls[0] != c.want {
			t.Fatalf("ListQueues: %v, %v; want only %s", list, err, c.want)
		}
	}
	got, err := cb.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("jobs")})
	if err != nil || *got.QueueUrl != *mine.QueueUrl {
		t.Fatalf("B's GetQueueUrl of its own jobs: %v, %v", got, err)
	}

	// Before a grant: B is refused; GetQueueUrl says no such queue.
	send := func() error {
		_, err := cb.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &qa, MessageBody: aws.String("from B")})
		return err
	}
	wantAPIError(t, "B sends to A's queue", send(), "AccessDenied", 403)
	_, err = cb.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("jobs"), QueueOwnerAWSAccountId: aws.String(a)})
	wantAPIError(t, "B asks A's queue URL", err, "AWS.SimpleQueueService.NonExistentQueue", 400)
	_, err = anon.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &qa, MessageBody: aws.String("x")})
	wantAPIError(t, "an unauthenticated send to A's queue", err, "AWS.SimpleQueueService.NonExistentQueue", 400)

	// A grants B SendMessage.
	if _, err := ca.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: &qa, Label: aws.String("b-send"),
		AWSAccountIds: []string{b}, Actions: []string{"SendMessage"}}); err != nil {
		t.Fatal(err)
	}
	policy, err := ca.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &qa, AttributeNames: []types.QueueAttributeName{"Policy"}})
	if err != nil || !strings.Contains(policy.Attributes["Policy"], "arn:aws:iam::"+b+":root") ||
		!strings.Contains(policy.Attributes["Policy"], "arn:aws:sqs:us-east-1:"+a+":jobs") {
		t.Fatalf("A's Policy: %v, %v", policy, err)
	}
	if err := send(); err != nil {
		t.Fatalf("B sends with a grant: %v", err)
	}
	batch, err := cb.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &qa,
		Entries: []types.SendMessageBatchRequestEntry{{Id: aws.String("1"), MessageBody: aws.String("batch from B")}}})
	if err != nil || len(batch.Successful) != 1 {
		t.Fatalf("B's batch with a SendMessage grant: %v, %v", batch, err)
	}
	_, err = cb.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &qa})
	wantAPIError(t, "B receives with a SendMessage grant", err, "AccessDenied", 403)
	_, err = cb.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &qa, Attributes: map[string]string{"VisibilityTimeout": "5"}})
	wantAPIError(t, "B sets A's attributes", err, "AccessDenied", 403)
	_, err = cb.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: &qa})
	wantAPIError(t, "B deletes A's queue", err, "AccessDenied", 403)

	// The query protocol answers the same.
	req, _ := http.NewRequest(http.MethodPost, qa, strings.NewReader(vals("Action", "ReceiveMessage").Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDB/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0")
	resp, body := (&env{t: t}).do(req)
	expectError(t, resp, body, 403, "AccessDenied")

	// A's queue has B's two messages; B's own jobs has none.
	out, err := ca.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &qa, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 2 {
		t.Fatalf("A receives: %v, %v; want B's 2 messages", out, err)
	}
	empty, err := cb.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: mine.QueueUrl})
	if err != nil || len(empty.Messages) != 0 {
		t.Fatalf("B's own jobs: %v, %v", empty, err)
	}

	// Redrive and move tasks stay in the owner's account.
	dlq, err := ca.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("dlq")})
	if err != nil {
		t.Fatal(err)
	}
	dlqARN := "arn:aws:sqs:us-east-1:" + a + ":dlq"
	src, err := ca.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("src"), Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":3}`}})
	if err != nil {
		t.Fatal(err)
	}
	sources, err := ca.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: dlq.QueueUrl})
	if err != nil || len(sources.QueueUrls) != 1 || sources.QueueUrls[0] != *src.QueueUrl {
		t.Fatalf("A's dead-letter sources: %v, %v", sources, err)
	}
	_, err = cb.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("src"), Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":3}`}})
	wantAPIError(t, "B's queue with A's dead-letter queue", err, "InvalidParameterValue", 400)
	task, err := ca.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: &dlqARN})
	if err != nil || task.TaskHandle == nil {
		t.Fatalf("A starts a move task on its dlq: %v, %v", task, err)
	}
	tasks, err := ca.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: &dlqARN})
	if err != nil || len(tasks.Results) != 1 || *tasks.Results[0].SourceArn != dlqARN {
		t.Fatalf("A's move tasks: %v, %v", tasks, err)
	}
	_, err = cb.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: &dlqARN})
	wantAPIError(t, "B lists A's move tasks", err, "AccessDenied", 403)

	// C, granted "*", reads A's queue: its URL and ARN are A's.
	if _, err := ca.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: &qa, Label: aws.String("c-all"),
		AWSAccountIds: []string{c}, Actions: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	cc := clientFor(url, "AKIDC")
	shared, err := cc.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("jobs"), QueueOwnerAWSAccountId: aws.String(a)})
	if err != nil || *shared.QueueUrl != qa {
		t.Fatalf("C asks A's queue URL: %v, %v", shared, err)
	}
	cattrs, err := cc.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &qa, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil || cattrs.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:"+a+":jobs" {
		t.Fatalf("C reads A's attributes: %v, %v", cattrs, err)
	}
	_, err = cc.TagQueue(ctx, &awssqs.TagQueueInput{QueueUrl: &qa, Tags: map[string]string{"k": "v"}})
	wantAPIError(t, "C (granted *) tags A's queue", err, "AccessDenied", 403)

	// RemovePermission revokes.
	if _, err := ca.RemovePermission(ctx, &awssqs.RemovePermissionInput{QueueUrl: &qa, Label: aws.String("b-send")}); err != nil {
		t.Fatal(err)
	}
	wantAPIError(t, "B sends after RemovePermission", send(), "AccessDenied", 403)
}
