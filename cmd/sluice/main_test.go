package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/webhook"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// sluiceBin is this command, built once per test run.
var sluiceBin = testutil.Binary{Pkg: "."}

func TestMain(m *testing.M) {
	code := m.Run()
	sluiceBin.Remove()
	os.Exit(code)
}

var listenRE = regexp.MustCompile(`sluice listening on (\S+)`)

type proc struct {
	cmd    *exec.Cmd
	addr   string
	done   chan error
	stderr *testutil.Buffer // everything the broker logged so far
}

// logLine waits (polling, at most 10 s) for a line of the broker's log that
// contains every one of parts, and returns it.
func (p *proc) logLine(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			found := true
			for _, part := range parts {
				found = found && strings.Contains(line, part)
			}
			if found {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in:\n%s", parts, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// start runs the binary with args and env, and waits for its listening line.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(sluiceBin.Path(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errBuf := &testutil.Buffer{}
	cmd.Stderr = io.MultiWriter(testutil.Writer(t, "sluice: "), errBuf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1), stderr: errBuf}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case p.addr = <-addr:
	case err := <-p.done:
		t.Fatalf("sluice exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("sluice did not print its listening address")
	}
	return p
}

func client(url string) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(url),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:       &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(nil)},
		RetryMaxAttempts: 1,
	})
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(20 * time.Second):
		t.Fatal("sluice did not exit within 20s of SIGTERM")
		return -1
	}
}

func TestServeBinarySendReceiveSIGTERM(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p := start(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", data)
	if strings.HasSuffix(p.addr, ":0") {
		t.Fatalf("printed the requested port, not the actual one: %s", p.addr)
	}
	c := client("http://" + p.addr)
	ctx := context.Background()
	q, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bin")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hello")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 5})
	if err != nil || len(got.Messages) != 1 || *got.Messages[0].Body != "hello" {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	// A long poll in flight at SIGTERM is answered at once, empty.
	waiting := make(chan error, 1)
	go func() {
		out, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
		if err == nil && len(out.Messages) != 0 {
			err = errors.New("drained receive returned messages")
		}
		waiting <- err
	}()
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	select {
	case err := <-waiting:
		// Either answered empty by the drain, or (if the request had not
		// reached the server yet) refused by a closed listener.
		// (The in-process server test checks the drain deterministically.)
		if err != nil && !notReached(err) {
			t.Fatalf("waiting receive: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting receive not answered")
	}

	// The data survives a restart; the lock is released.
	p2 := start(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", data)
	c2 := client("http://" + p2.addr)
	if _, err := c2.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("bin")}); err != nil {
		t.Fatalf("queue after restart: %v", err)
	}
	if code := p2.stop(t); code != 0 {
		t.Fatalf("second exit code %d", code)
	}
}

func TestServeFromEnvironment(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p := start(t, []string{"SLUICE_ADDR=127.0.0.1:0", "SLUICE_DATA=" + data, "SLUICE_ACCOUNT_ID=123456789012", "SLUICE_REGION=eu-west-1"}, "serve")
	c := client("http://" + p.addr)
	ctx := context.Background()
	q, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("envq")})
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://" + p.addr + "/123456789012/envq"; *q.QueueUrl != want {
		t.Fatalf("QueueUrl %s, want %s", *q.QueueUrl, want)
	}
	attrs, err := c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil || attrs.Attributes["QueueArn"] != "arn:aws:sqs:eu-west-1:123456789012:envq" {
		t.Fatalf("ARN: %v, %v", attrs.Attributes, err)
	}
	if entries, err := os.ReadDir(data); err != nil || len(entries) == 0 {
		t.Fatalf("SLUICE_DATA not used: %v %v", entries, err)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestSecondBrokerOnSameData(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p := start(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", data)
	out, err := exec.Command(sluiceBin.Path(t), "serve", "--addr", "127.0.0.1:0", "--data", data).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("second broker on the same data: %v\n%s", err, out)
	}
	t.Logf("second broker said: %s", out)
	if !strings.Contains(string(out), "Another sluice broker may be using") {
		t.Fatalf("the error does not say what to do: %s", out)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestServeDebugLog: with --log-level debug, sluice serve logs each request
// with its action, queue, HTTP status and duration.
func TestServeDebugLog(t *testing.T) {
	t.Parallel()
	p := start(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--log-level", "debug")
	c := client("http://" + p.addr)
	ctx := context.Background()
	q, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("dbg")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: aws.String("garbage")})
	if err == nil {
		t.Fatal("DeleteMessage with a garbage receipt succeeded")
	}
	p.logLine(t, "level=DEBUG", "msg=request", "action=CreateQueue", "queue=dbg", "status=200", "duration=")
	p.logLine(t, "level=DEBUG", "msg=request", "action=DeleteMessage", "queue=dbg", "status=404", "duration=")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// At the default level (info) requests are not logged.
	p = start(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	if _, err := client("http://"+p.addr).CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("quiet")}); err != nil {
		t.Fatal(err)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if strings.Contains(p.stderr.String(), "action=CreateQueue") {
		t.Fatalf("a request logged at info level:\n%s", p.stderr.String())
	}
}

// TestUnwritableDataDirectory: a data directory that cannot be written is
// reported as such, with what to do, and not as a busy directory. The tests
// run as root, which ignores permission bits, so the directory is made
// unwritable for any user: it is a path through a regular file (creating it
// fails with ENOTDIR). broker/embedded's TestOpenSaysWhyTheDirectoryFails
// covers the permission (EACCES) and read-only (EROFS) cases.
func TestUnwritableDataDirectory(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{filepath.Join(file, "data"), file} {
		out, err := exec.Command(sluiceBin.Path(t), "serve", "--addr", "127.0.0.1:0", "--data", data).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("--data %s: %v\n%s", data, err, out)
		}
		t.Logf("--data %s: %s", data, out)
		msg := string(out)
		if !strings.Contains(msg, "The data directory "+data+" is not writable") || !strings.Contains(msg, "choose another --data") ||
			!strings.Contains(msg, "fix its permissions") || strings.Contains(msg, "Another sluice broker") {
			t.Fatalf("--data %s: the error does not say the directory is not writable and what to do:\n%s", data, msg)
		}
	}
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SLUICE_ADDR": "127.0.0.1:1111", "SLUICE_DATA": "/env", "SLUICE_ACCOUNT_ID": "111111111111",
		"SLUICE_REGION": "eu-west-1", "SLUICE_STRICT_PURGE": "true", "SLUICE_MAX_INFLIGHT": "7", "SLUICE_LOG_LEVEL": "debug"}
	getenv := func(k string) string { return env[k] }
	f, err := parseServeFlags(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.addr != "127.0.0.1:1111" || f.data != "/env" || f.account != "111111111111" || f.region != "eu-west-1" || !f.strictPurge || f.maxInFlight != 7 ||
		f.logLevel != "debug" {
		t.Fatalf("from env: %+v", f)
	}
	f, err = parseServeFlags([]string{"--addr", "127.0.0.1:2222", "--data", "/flag", "--account-id", "222222222222",
		"--region", "ap-south-1", "--strict-purge=false", "--max-inflight", "9", "--log-level", "warn"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.addr != "127.0.0.1:2222" || f.data != "/flag" || f.account != "222222222222" || f.region != "ap-south-1" || f.strictPurge || f.maxInFlight != 9 ||
		f.logLevel != "warn" {
		t.Fatalf("flags over env: %+v", f)
	}
	f, err = parseServeFlags(nil, func(string) string { return "" }, io.Discard)
	if err != nil || f.addr != "127.0.0.1:9324" || f.data != "./sluice-data" || f.account != "000000000000" || f.region != "us-east-1" || f.logLevel != "info" {
		t.Fatalf("defaults: %+v, %v", f, err)
	}
	if code := run(context.Background(), []string{"serve", "--log-level", "chatty"}, getenv, io.Discard, io.Discard); code != 2 {
		t.Fatalf("--log-level chatty: exit %d", code)
	}
	if _, err := parseServeFlags([]string{"--max-inflight", "0"}, getenv, io.Discard); err == nil {
		t.Fatal("--max-inflight 0 accepted")
	}
	if code := run(context.Background(), []string{"nope"}, getenv, io.Discard, io.Discard); code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
}

// notReached reports whether err says the request never reached a live
// server: refused, or cut while it was being written or before an answer.
func notReached(err error) bool {
	// "server closed idle connection": a request on a kept-alive connection
	// the shutting-down server closed just then (a POST is not retried).
	for _, s := range []string{"connect", "EOF", "broken pipe", "connection reset", "server closed idle connection"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

func TestWebhookFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SLUICE_WEBHOOK_SECRET": "env-secret-0123456789", "SLUICE_WEBHOOK_ALLOW_HOSTS": "a.example.com, b.example.com:8443"}
	getenv := func(k string) string { return env[k] }
	f, err := parseServeFlags(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	wc := f.webhooks()
	if wc == nil || wc.Secret != "env-secret-0123456789" || strings.Join(wc.AllowedHosts, "|") != "a.example.com, b.example.com:8443" {
		t.Fatalf("from env: %+v", wc)
	}
	// Flags replace the environment's hosts; repeated and comma-separated.
	f, err = parseServeFlags([]string{"--webhook-secret", "flag-secret-0123456789", "--webhook-allow-host", "c.example.com",
		"--webhook-allow-host", "d.example.com,e.example.com:9000"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	wc = f.webhooks()
	hosts, err := webhook.ParseHosts(wc.AllowedHosts...)
	if err != nil {
		t.Fatal(err)
	}
	if wc.Secret != "flag-secret-0123456789" || !hosts.Allowed("c.example.com:443") || !hosts.Allowed("d.example.com:80") ||
		!hosts.Allowed("e.example.com:9000") || hosts.Allowed("a.example.com:443") {
		t.Fatalf("flags over env: %+v", wc)
	}
	// Off without a secret.
	if f, err := parseServeFlags(nil, func(string) string { return "" }, io.Discard); err != nil || f.webhooks() != nil {
		t.Fatalf("no secret: %+v, %v", f.webhooks(), err)
	}
	for _, args := range [][]string{
		{"--webhook-allow-host", "a.example.com"},                                         // hosts without a secret
		{"--webhook-secret", "short"},                                                     // too short
		{"--webhook-secret", "long-enough-secret-42", "--webhook-allow-host", "http://x"}, // not a host
	} {
		if _, err := parseServeFlags(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseServeFlags(%q) accepted", args)
		}
		if code := run(context.Background(), append([]string{"serve"}, args...), func(string) string { return "" }, io.Discard, io.Discard); code != 2 {
			t.Errorf("serve %q: exit %d, want 2", args, code)
		}
	}
}

// TestHelpHidesSecrets: the webhook secret and the store URL (which may
// hold a password) from the environment never show in the flags' usage
// (printed by -h, and after a bad flag), where they would reach a terminal
// or a service's log.
func TestHelpHidesSecrets(t *testing.T) {
	t.Parallel()
	const secret, password = "env-secret-do-not-print-0123456789", "pw-do-not-print"
	env := map[string]string{"SLUICE_WEBHOOK_SECRET": secret, "SLUICE_STORE": "postgres://u:" + password + "@127.0.0.1:1/db"}
	getenv := func(k string) string { return env[k] }
	for _, args := range [][]string{{"-h"}, {"--no-such-flag"}} {
		var stderr strings.Builder
		if _, err := parseServeFlags(args, getenv, &stderr); err == nil {
			t.Fatalf("parseServeFlags(%q) accepted", args)
		}
		if strings.Contains(stderr.String(), secret) || strings.Contains(stderr.String(), password) {
			t.Errorf("serve %q prints a secret:\n%s", args, stderr.String())
		}
		if !strings.Contains(stderr.String(), "webhook-secret") {
			t.Errorf("serve %q does not list --webhook-secret:\n%s", args, stderr.String())
		}
	}
	// The environment's values still apply, and a flag still wins.
	f, err := parseServeFlags(nil, getenv, io.Discard)
	if err != nil || f.webhookSecret != secret || f.store != env["SLUICE_STORE"] {
		t.Fatalf("from the environment: %q %q, %v", f.webhookSecret, f.store, err)
	}
	f, err = parseServeFlags([]string{"--webhook-secret", "flag-secret-0123456789", "--store", ""}, getenv, io.Discard)
	if err != nil || f.webhookSecret != "flag-secret-0123456789" || f.store != "" {
		t.Fatalf("flags over the environment: %q %q, %v", f.webhookSecret, f.store, err)
	}
}
