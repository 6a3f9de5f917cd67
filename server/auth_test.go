package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithy "github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// The keys of the authentication tests: an admin, a producer that may only
// send and a read-only key, all of one account, and a read-only key of
// another account (which sees none of the first account's queues).
var testKeys = []auth.Key{
	{AccessKeyID: "admin", SecretAccessKey: "admin-secret", Account: "111111111111", Allow: []string{"*"}},
	{AccessKeyID: "producer", SecretAccessKey: "producer-secret", Account: "111111111111", Allow: []string{"SendMessage", "GetQueueUrl"}},
	{AccessKeyID: "reader", SecretAccessKey: "reader-secret", Account: "111111111111", Allow: []string{"read-only"}},
	{AccessKeyID: "outsider", SecretAccessKey: "outsider-secret", Account: "222222222222", Allow: []string{"read-only"}},
}

func withKeys(t *testing.T) func(*server.Config) {
	keys, err := auth.NewKeys(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *server.Config) { c.Keys = keys }
}

func sqsClient(url, id, secret string) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, ""),
		HTTPClient:  &http.Client{Timeout: 10 * time.Second, Transport: sqssource.Transport(nil)}, RetryMaxAttempts: 1,
	})
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestAuthSQS(t *testing.T) {
	e := setup(t, withKeys(t))
	ctx := context.Background()
	admin := sqsClient(e.URL, "admin", "admin-secret")
	q, err := admin.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("orders")})
	if err != nil {
		t.Fatal(err)
	}
	producer := sqsClient(e.URL, "producer", "producer-secret")
	if _, err := producer.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hi")}); err != nil {
		t.Fatalf("producer send: %v", err)
	}
	cases := []struct {
		name string
		err  error
		code string
	}{
		{"producer receive", func() error {
			_, err := producer.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
			return err
		}(), "AccessDenied"},
		{"wrong secret", func() error {
			_, err := sqsClient(e.URL, "admin", "wrong-secret").ListQueues(ctx, &awssqs.ListQueuesInput{})
			return err
		}(), "SignatureDoesNotMatch"},
		{"unknown key", func() error {
			_, err := sqsClient(e.URL, "nobody", "admin-secret").ListQueues(ctx, &awssqs.ListQueuesInput{})
			return err
		}(), "InvalidClientTokenId"},
		{"reader purge", func() error {
			_, err := sqsClient(e.URL, "reader", "reader-secret").PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: q.QueueUrl})
			return err
		}(), "AccessDenied"},
	}
	for _, c := range cases {
		if got := apiCode(c.err); got != c.code {
			t.Errorf("%s: code %q (%v), want %s", c.name, got, c.err, c.code)
		}
	}
	if _, err := sqsClient(e.URL, "reader", "reader-secret").GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl}); err != nil {
		t.Fatalf("reader GetQueueAttributes: %v", err)
	}

	// Unsigned, in both protocols: MissingAuthenticationToken, 403, in the
	// protocol's shape.
	status, body, h := e.call(nil, "ListQueues", "{}")
	if status != 403 || !strings.Contains(body, "MissingAuthenticationTokenException") || h.Get("X-Amzn-Query-Error") != "MissingAuthenticationToken;Sender" {
		t.Fatalf("unsigned JSON: %d %s %v", status, body, h)
	}
	resp, err := http.Get(e.URL + "/?Action=ListQueues")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "<Code>MissingAuthenticationToken</Code>") {
		t.Fatalf("unsigned query: %d %s", resp.StatusCode, b)
	}
}

func TestAuthCallerIdentity(t *testing.T) {
	e := setup(t, withKeys(t))
	for _, k := range testKeys[:1] {
		c := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.URL),
			Credentials: credentials.NewStaticCredentialsProvider(k.AccessKeyID, k.SecretAccessKey, ""), RetryMaxAttempts: 1,
			HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: sqssource.Transport(nil)}})
		out, err := c.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.Account) != k.Account || aws.ToString(out.Arn) != "arn:aws:iam::"+k.Account+":user/"+k.AccessKeyID || aws.ToString(out.UserId) != k.AccessKeyID {
			t.Fatalf("%s: %s %s %s", k.AccessKeyID, aws.ToString(out.Account), aws.ToString(out.Arn), aws.ToString(out.UserId))
		}
	}
	// The read-only keys may call it too (it is in the read-only preset),
	// each answered with its own account.
	for _, k := range []struct{ id, secret, account string }{{"reader", "reader-secret", "111111111111"}, {"outsider", "outsider-secret", "222222222222"}} {
		c := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.URL),
			Credentials: credentials.NewStaticCredentialsProvider(k.id, k.secret, ""), RetryMaxAttempts: 1,
			HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: sqssource.Transport(nil)}})
		out, err := c.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
		if err != nil || aws.ToString(out.Account) != k.account {
			t.Fatalf("%s: %v %v", k.id, out, err)
		}
	}
}

func TestAuthNativeAndOpenPaths(t *testing.T) {
	e := setup(t, withKeys(t), withDashboard(t))
	do := func(method, path, token, body string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, e.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for _, p := range []string{"/healthz", "/readyz", "/ui/", "/ui/app.js"} {
		if status, body, _ := do(http.MethodGet, p, "", ""); status != 200 {
			t.Errorf("GET %s without a key: %d %s", p, status, body)
		}
	}
	if status, body, h := do(http.MethodGet, "/v1/queues", "", ""); status != 401 || !strings.Contains(body, `"unauthenticated"`) || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("GET /v1/queues without a key: %d %s %v", status, body, h)
	}
	if status, body, _ := do(http.MethodGet, "/v1/queues", "admin:wrong", ""); status != 401 || !strings.Contains(body, `"signature_mismatch"`) {
		t.Fatalf("wrong secret: %d %s", status, body)
	}
	if status, body, _ := do(http.MethodGet, "/v1/queues", "nobody:admin-secret", ""); status != 401 || !strings.Contains(body, `"invalid_key"`) {
		t.Fatalf("unknown key: %d %s", status, body)
	}
	if status, body, _ := do(http.MethodPost, "/v1/queues", "admin:admin-secret", `{"name":"jobs"}`); status/100 != 2 {
		t.Fatalf("admin create: %d %s", status, body)
	}
	if status, body, _ := do(http.MethodGet, "/v1/queues", "reader:reader-secret", ""); status != 200 || !strings.Contains(body, "jobs") {
		t.Fatalf("reader list: %d %s", status, body)
	}
	if status, body, _ := do(http.MethodGet, "/v1/queues", "outsider:outsider-secret", ""); status != 200 || strings.Contains(body, "jobs") {
		t.Fatalf("a key of another account lists the first account's queues: %d %s", status, body)
	}
	if status, body, _ := do(http.MethodPost, "/v1/queues/jobs/purge", "reader:reader-secret", ""); status != 403 || !strings.Contains(body, `"access_denied"`) {
		t.Fatalf("reader purge: %d %s", status, body)
	}
	// The native API takes SigV4 too.
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/v1/queues", nil)
	sum := sha256.Sum256(nil)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "reader", SecretAccessKey: "reader-secret"},
		req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("SigV4 on the native API: %d", resp.StatusCode)
	}
	// Bearer tokens are for the native API: the SQS API wants SigV4.
	q := url.Values{"Action": {"ListQueues"}}
	if status, body, _ := do(http.MethodGet, "/?"+q.Encode(), "admin:admin-secret", ""); status != 400 || !strings.Contains(body, "IncompleteSignature") {
		t.Fatalf("bearer on SQS: %d %s", status, body)
	}
}

func TestAuthNonLoopbackNeedsKeys(t *testing.T) {
	cfg := server.DefaultConfig()
	for addr, ok := range map[string]bool{
		"127.0.0.1:9324": true, "localhost:9324": true, "[::1]:9324": true, "127.0.0.2:0": true,
		"0.0.0.0:9324": false, ":9324": false, "10.0.0.1:9324": false, "example.com:9324": false,
	} {
		cfg.Addr = addr
		err := cfg.Validate()
		if ok != (err == nil) || !ok && !errors.Is(err, server.ErrNoAuth) {
			t.Errorf("Addr %s: %v", addr, err)
		}
	}
	cfg.Addr = "0.0.0.0:9324"
	cfg.InsecureNoAuth = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("InsecureNoAuth: %v", err)
	}
	cfg.InsecureNoAuth = false
	withKeys(t)(&cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("with keys: %v", err)
	}
}

// metricsStub is a Metrics that serves a fixed text, to check that GET
// /metrics needs a key when authentication is on.
type metricsStub struct{}

func (metricsStub) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "sluice_up 1\n") })
}
func (metricsStub) Request(string, string, int, time.Duration) {}

func TestAuthMetricsNeedsAKey(t *testing.T) {
	e := setup(t, withKeys(t), func(c *server.Config) { c.Metrics = metricsStub{} })
	get := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for token, want := range map[string]int{"": 401, "reader:reader-secret": 200, "producer:producer-secret": 403, "reader:nope": 401} {
		if got := get(token); got != want {
			t.Errorf("GET /metrics with %q: %d, want %d", token, got, want)
		}
	}
}
