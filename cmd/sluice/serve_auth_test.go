package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	smithy "github.com/aws/smithy-go"
)

func TestServeNonLoopbackNeedsKeys(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	env := func(string) string { return "" }
	code := serve(context.Background(), []string{"--addr", "0.0.0.0:0", "--data", t.TempDir()}, env, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--insecure-no-auth") || !strings.Contains(stderr.String(), "--keys") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	// The container's way: SLUICE_INSECURE_NO_AUTH=1.
	p := start(t, []string{"SLUICE_INSECURE_NO_AUTH=1"}, "serve", "--addr", "0.0.0.0:0", "--data", t.TempDir())
	p.logLine(t, "authentication off")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func keyedClient(addr, id, secret string) *awssqs.Client {
	c := client("http://" + addr)
	return awssqs.New(c.Options(), func(o *awssqs.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(id, secret, "")
	})
}

func TestServeKeysReloadOnSIGHUP(t *testing.T) {
	t.Parallel()
	keys := filepath.Join(t.TempDir(), "keys.json")
	write := func(s string) {
		if err := os.WriteFile(keys, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"accessKeyId":"first","secretAccessKey":"first-secret","account":"123456789012","allow":["*"]}]`)
	p := start(t, []string{"SLUICE_KEYS_FILE=" + keys}, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	p.logLine(t, "authentication on", "keys=1")
	ctx := context.Background()
	list := func(id, secret string) error {
		_, err := keyedClient(p.addr, id, secret).ListQueues(ctx, &awssqs.ListQueuesInput{})
		return err
	}
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}
	if err := list("first", "first-secret"); err != nil {
		t.Fatal(err)
	}
	if c := code(list("first", "wrong-secret")); c != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %q", c)
	}
	write(`[{"accessKeyId":"second","secretAccessKey":"second-secret","account":"123456789012","allow":["ListQueues"]}]`)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.logLine(t, "keys file reloaded", "keys=1")
	if err := list("second", "second-secret"); err != nil {
		t.Fatal(err)
	}
	if c := code(list("first", "first-secret")); c != "InvalidClientTokenId" {
		t.Fatalf("removed key: %q", c)
	}
	write(`not json`)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.logLine(t, "keys file not reloaded")
	if err := list("second", "second-secret"); err != nil {
		t.Fatalf("after a bad file: %v", err)
	}
	_, err := keyedClient(p.addr, "second", "second-secret").CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("q")})
	if c := code(err); c != "AccessDenied" {
		t.Fatalf("not allowed: %q", c)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestServeRefusesAnAccountIDBeforeTheStore: an account id that no queue
// URL can carry ("v1", "ui" with the dashboard on), an empty one, or one with
// a control character is a usage error (exit 2) found before the store is
// opened: the data directory is not even created.
func TestServeRefusesAnAccountIDBeforeTheStore(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	for _, args := range [][]string{
		{"--account-id", "v1"},
		{"--account-id", "ui", "--dashboard"},
		{"--account-id", ""},
		{"--account-id", "a\rb"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		var stdout, stderr bytes.Buffer
		code := serve(context.Background(), append([]string{"--addr", "127.0.0.1:0", "--data", data}, args...), env, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "ccount") {
			t.Errorf("serve %q: exit %d, stderr %q; want 2 and an account-id error", args, code, stderr.String())
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("serve %q: the data directory exists (%v): the store was opened", args, err)
		}
	}
}
