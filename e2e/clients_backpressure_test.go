package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// requirePython names the python3 on PATH (a pyenv or pip install) with a
// boto3 recent enough to speak AWS JSON to SQS, in SLUICE_REQUIRE.
const requirePython = "python"

// TestClientBackpressure proves that each real client retries a refusal by
// MaxDepth as throttling and succeeds once room is made. The broker answers
// RequestThrottled with HTTP 403, as AWS documents it for SQS; each client
// classifies it as a throttle:
//   - aws-sdk-go-v2: RequestThrottled is in retry.DefaultThrottleErrorCodes;
//   - botocore, retry mode standard: in ThrottledRetryableChecker's codes;
//   - botocore, retry mode legacy: _retry.json's SQS policy
//     request_limit_exceeded (code RequestThrottled with status 403 exactly);
//   - the JavaScript SDK v3: in @smithy's THROTTLING_ERROR_CODES.
//
// Each client sends to a queue at its MaxDepth; after the refused attempt a
// consumer without retries deletes the message that fills the queue, so the
// send succeeds only if the client retried, and the test counts the attempts.
func TestClientBackpressure(t *testing.T) {
	t.Parallel()
	p := startBroker(t, t.TempDir())

	t.Run("gosdk", func(t *testing.T) {
		t.Parallel()
		goBackpressure(t, p.URL, uniquePrefix("bp-go"))
	})
	python := func(t *testing.T, interp, mode, protocol string) {
		out := runClient(t, time.Minute, "testdata/clients/python", clientEnv(t), interp,
			"backpressure.py", p.URL, uniquePrefix("bp-py-"+mode+"-"+protocol), mode, protocol)
		wantAttempts(t, out)
	}
	for _, mode := range []string{"standard", "legacy"} {
		t.Run("boto3-json-"+mode, func(t *testing.T) {
			t.Parallel()
			interp, missing := jsonBoto3()
			needClient(t, requirePython, "boto3 speaking AWS JSON (python3 on PATH)", missing, "pip install boto3")
			python(t, interp, mode, "json")
		})
	}
	t.Run("boto3-query-legacy", func(t *testing.T) {
		t.Parallel()
		needDebianPython(t, "boto3 (Debian python3-boto3 under /usr/bin/python3)", "boto3")
		python(t, debianPython, "legacy", "query")
	})
	t.Run("jsv3", func(t *testing.T) {
		t.Parallel()
		needClient(t, requireNode, "the AWS SDK for JavaScript v3 (@aws-sdk/client-sqs)", jsClientMissing(),
			"cd e2e/"+jsDir+" && npm ci")
		out := runClient(t, time.Minute, jsDir, clientEnv(t), "node", "backpressure.mjs", p.URL, uniquePrefix("bp-js"))
		wantAttempts(t, out)
	})
}

// wantAttempts checks a client script's last line: two attempts, the first
// refused with 403 RequestThrottled, the second accepted.
func wantAttempts(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "attempts=2 statuses=403,200 codes=RequestThrottled,") {
		t.Fatalf("client attempts: %q\n%s", last, out)
	}
	t.Log(last)
}

// jsonBoto3 (once per run) finds the python3 on PATH and checks that its boto3 speaks AWS
// JSON to SQS (botocore 1.31.57 and later). It returns the interpreter's own
// path, since a pyenv shim does not work under clientEnv's HOME.
var jsonBoto3 = sync.OnceValues(findJSONBoto3)

func findJSONBoto3() (string, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("no python3 on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", `import sys, boto3
p = boto3.client("sqs", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b").meta.service_model.protocol
print(sys.executable, p, boto3.__version__)`)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s cannot import boto3: %s", py, lastLines(string(out), 2))
	}
	f := strings.Fields(strings.TrimSpace(string(out)))
	if len(f) != 3 || f[1] != "json" {
		return "", fmt.Errorf("the boto3 of %s does not speak AWS JSON to SQS: %s", py, out)
	}
	return f[0], nil
}

// attemptLog records the status of every SendMessage attempt that reaches
// the wire, and runs onRefused once, after the first 403, before the SDK
// sees the answer.
type attemptLog struct {
	next      http.RoundTripper
	onRefused func()
	mu        sync.Mutex
	statuses  []int
}

func (a *attemptLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	if err != nil || r.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessage" {
		return resp, err
	}
	a.mu.Lock()
	a.statuses = append(a.statuses, resp.StatusCode)
	first := len(a.statuses) == 1
	a.mu.Unlock()
	if resp.StatusCode == http.StatusForbidden && first {
		a.onRefused()
	}
	return resp, nil
}

func (a *attemptLog) get() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.statuses...)
}

// goBackpressure is the aws-sdk-go-v2 part: its default retryer (standard,
// 3 attempts) against a queue at its MaxDepth.
func goBackpressure(t *testing.T, url, name string) {
	ctx := ctxT(t)
	consumer := sqsClient(url)
	q, err := consumer.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{"MaxDepth": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := consumer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("first")}); err != nil {
		t.Fatal(err)
	}

	// Without retries: the modeled RequestThrottled, which the default
	// retryer's throttle check recognizes.
	_, err = consumer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("refused")},
		func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	var thr *types.RequestThrottled
	if !errors.As(err, &thr) || !strings.Contains(thr.ErrorMessage(), "full") {
		t.Fatalf("send to a full queue: %v", err)
	}
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) != aws.TrueTernary {
		t.Fatalf("aws-sdk-go-v2's default throttle check does not see %v as a throttle", err)
	}

	log := &attemptLog{next: http.DefaultTransport}
	log.onRefused = func() {
		out, err := consumer.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 5})
		if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "first" {
			t.Errorf("the consumer's receive: %+v, %v", out, err)
			return
		}
		if _, err := consumer.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
			t.Errorf("the consumer's delete: %v", err)
		}
	}
	producer := sqs.New(sqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:  &http.Client{Timeout: 40 * time.Second, Transport: sqssource.Transport(log)},
	})
	start := time.Now()
	if _, err := producer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("second")}); err != nil {
		t.Fatalf("send with the default retryer: %v (attempts %v)", err, log.get())
	}
	if got := log.get(); len(got) != 2 || got[0] != 403 || got[1] != 200 {
		t.Fatalf("attempts: %v, want [403 200]", got)
	}
	t.Logf("attempts=2 statuses=403,200 in %v", time.Since(start).Round(time.Millisecond))
	out, err := consumer.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 5})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "second" {
		t.Fatalf("the retried message: %+v, %v", out, err)
	}
}
