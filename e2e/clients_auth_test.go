package e2e

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// The key of TestClientsAuth: the credentials clientEnv gives every client.
const (
	authKeyID   = "AKIDSLUICE"
	authSecret  = "sluice-secret"
	authAccount = "123456789012"
)

// startAuthBroker starts a broker with a keys file holding the clients' key.
func startAuthBroker(t *testing.T) *brokerProc {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "keys.json")
	err := os.WriteFile(keys, []byte(`[{"accessKeyId":"`+authKeyID+`","secretAccessKey":"`+authSecret+`","account":"`+authAccount+`","allow":["*"]}]`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return startBroker(t, t.TempDir(), "--keys", keys)
}

// The three credentials every client runs with, and what each must get.
var authCases = []struct {
	name   string
	env    []string // added to clientEnv
	expect string   // "ok" or the error code
}{
	{"right-key", nil, "ok"},
	{"wrong-secret", []string{"AWS_SECRET_ACCESS_KEY=not-the-secret"}, "SignatureDoesNotMatch"},
	{"unknown-key", []string{"AWS_ACCESS_KEY_ID=AKIDNOBODY"}, "InvalidClientTokenId"},
}

// TestClientsAuth runs real SQS clients against a broker with access keys:
// with the right key each works, and with a wrong secret or an unknown key
// each is refused with the right code. aws-sdk-go-v2 (AWS JSON), boto3 in
// both protocols (Debian's, query; a newer one on PATH, JSON), the aws CLI
// (query), kombu's presigned GETs, and the AWS SDK for JavaScript v3.
func TestClientsAuth(t *testing.T) {
	t.Parallel()
	b := startAuthBroker(t)

	t.Run("aws-sdk-go-v2", func(t *testing.T) {
		t.Parallel()
		for _, c := range authCases {
			id, secret := authKeyID, authSecret
			if c.name == "wrong-secret" {
				secret = "not-the-secret"
			} else if c.name == "unknown-key" {
				id = "AKIDNOBODY"
			}
			creds := credentials.NewStaticCredentialsProvider(id, secret, "")
			client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(b.URL), Credentials: creds,
				HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(nil)}, RetryMaxAttempts: 1})
			ctx := ctxT(t)
			q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(uniquePrefix("go") + "-auth")})
			if got := errorCode(err); got != strings.TrimPrefix(c.expect, "ok") {
				t.Fatalf("%s: CreateQueue: %v (code %q), want %s", c.name, err, got, c.expect)
			}
			if err != nil {
				continue
			}
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hi")}); err != nil {
				t.Fatal(err)
			}
			id2, err := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(b.URL), Credentials: creds,
				HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(nil)}}).
				GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			if err != nil || aws.ToString(id2.Account) != authAccount {
				t.Fatalf("GetCallerIdentity: %v %v", id2, err)
			}
		}
	})

	type runner struct {
		name string
		need func(t *testing.T) (cmd string, dir string, args []string, env []string)
	}
	runners := []runner{
		{"boto3-query", func(t *testing.T) (string, string, []string, []string) {
			needDebianPython(t, "boto3 (Debian python3-boto3 under /usr/bin/python3)", "boto3")
			return debianPython, "testdata/clients/python", []string{"auth.py", b.URL, uniquePrefix("boto3q")}, nil
		}},
		{"boto3-json", func(t *testing.T) (string, string, []string, []string) {
			py, err := jsonPython()
			if err != nil {
				t.Skipf("SKIP: no python3 with a JSON-protocol boto3 (>= 1.34.90) on PATH (%v); install one with: pip install 'boto3>=1.34.90'", err)
			}
			return py, "testdata/clients/python", []string{"auth.py", b.URL, uniquePrefix("boto3j")}, nil
		}},
		{"javascript-v3", func(t *testing.T) (string, string, []string, []string) {
			needClient(t, requireNode, "the AWS SDK for JavaScript v3 (@aws-sdk/client-sqs)", jsClientMissing(), "cd e2e/"+jsDir+" && npm ci")
			return "node", jsDir, []string{"auth.mjs", b.URL, uniquePrefix("js")}, nil
		}},
		{"kombu-presigned-get", func(t *testing.T) (string, string, []string, []string) {
			needDebianPython(t, "kombu (Debian python3-kombu, python3-pycurl)", "kombu", "pycurl", "boto3")
			q, err := authClient(b.URL).CreateQueue(ctxT(t), &sqs.CreateQueueInput{QueueName: aws.String(uniquePrefix("kombu") + "-auth")})
			if err != nil {
				t.Fatal(err)
			}
			// BOTO_DISABLE_CRT: see TestClientCelery's kombu-async-get.
			return debianPython, celeryDir, []string{"auth_kombu.py", aws.ToString(q.QueueUrl)}, []string{"BOTO_DISABLE_CRT=true"}
		}},
	}
	for _, r := range runners {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			cmd, dir, args, env := r.need(t)
			for _, c := range authCases {
				out := runClient(t, 2*time.Minute, dir, clientEnv(t, append(env, c.env...)...), cmd, append(args, c.expect)...)
				t.Logf("%s: %s", c.name, strings.TrimSpace(out))
			}
		})
	}

	t.Run("aws-cli", func(t *testing.T) {
		t.Parallel()
		needClient(t, requireDebian, "the aws CLI (Debian awscli at "+awsCLIPath+")", awsCLIMissing(), aptInstall)
		for _, c := range authCases {
			env := clientEnv(t, c.env...)
			calls := [][]string{{"sqs", "list-queues"}}
			if c.expect == "ok" {
				calls = [][]string{{"sqs", "create-queue", "--queue-name", uniquePrefix("cli") + "-auth"}, {"sts", "get-caller-identity"}}
			}
			for _, args := range calls {
				out, stderr, err := runClientErr(t, time.Minute, ".", env, awsCLIPath, append([]string{"--endpoint-url", b.URL, "--output", "json"}, args...)...)
				switch {
				case c.expect == "ok" && err != nil:
					t.Fatalf("%s: aws %s: %v\n%s", c.name, args, err, stderr)
				case c.expect == "ok" && args[0] == "sts" && !strings.Contains(out, authAccount):
					t.Fatalf("aws sts get-caller-identity: %s", out)
				case c.expect != "ok" && (err == nil || !strings.Contains(stderr, "("+c.expect+")")):
					t.Fatalf("%s: aws %s: %v, stderr %q, want (%s)", c.name, args, err, stderr, c.expect)
				}
			}
		}
	})
}

func authClient(url string) *sqs.Client {
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider(authKeyID, authSecret, ""),
		HTTPClient:  &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(nil)}})
}

// errorCode is an SDK error's code, "" for nil.
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}
