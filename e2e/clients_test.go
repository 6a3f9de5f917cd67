package e2e

// Shared machinery for the tests that drive the real binary with SQS clients
// written by others (clients_*_test.go): finding each client or skipping with
// how to install it, probing the broker for features that are still being
// built, and running a client's script with a bounded time.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// Requirement groups named in SLUICE_REQUIRE (a comma list). A client test
// whose group is named there fails when its client is missing instead of
// skipping; .ci/run installs the clients and names both groups.
const (
	requireNode   = "node"   // node and e2e/testdata/clients/js/node_modules (npm ci)
	requireDebian = "debian" // /usr/bin/python3 with python3-boto3, python3-celery, ...; /usr/bin/aws
)

// debianPython is Debian's interpreter. The python3 on PATH may be a pyenv shim
// whose site-packages hold a newer boto3 that speaks JSON, not query.
const debianPython = "/usr/bin/python3"

const aptInstall = "apt-get install -y --no-install-recommends python3-boto3 awscli python3-celery python3-kombu python3-pycurl"

// required reports whether SLUICE_REQUIRE names group.
func required(group string) bool {
	for _, g := range strings.Split(os.Getenv("SLUICE_REQUIRE"), ",") {
		if strings.TrimSpace(g) == group {
			return true
		}
	}
	return false
}

// needClient skips t (or fails it, when SLUICE_REQUIRE names group) if missing
// is non-nil, saying what is absent and how to install it.
func needClient(t *testing.T, group, client string, missing error, install string) {
	t.Helper()
	if missing == nil {
		return
	}
	if required(group) {
		t.Fatalf("%s is missing (%v), and SLUICE_REQUIRE=%q requires group %q; install it with: %s",
			client, missing, os.Getenv("SLUICE_REQUIRE"), group, install)
	}
	t.Skipf("SKIP: %s is missing (%v); install it with: %s (SLUICE_REQUIRE=%s turns this skip into a failure)",
		client, missing, install, group)
}

// checkCommand runs a short command that proves a client is installed.
func checkCommand(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, lastLines(string(out), 3))
	}
	return nil
}

// needDebianPython skips or fails t unless Debian's python3 imports modules.
func needDebianPython(t *testing.T, client string, modules ...string) {
	t.Helper()
	needClient(t, requireDebian, client,
		checkCommand(debianPython, "-c", "import "+strings.Join(modules, ", ")), aptInstall)
}

// clientEnv is the environment of a client process: the test's own, minus
// anything that would point a client elsewhere or read a developer's AWS
// profile, plus dummy credentials and a region.
func clientEnv(t *testing.T, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "BOTO_") || k == "PYTHONPATH" || k == "PYTHONHOME" {
			continue
		}
		env = append(env, kv)
	}
	home := t.TempDir()
	env = append(env,
		"HOME="+home,
		"AWS_ACCESS_KEY_ID=AKIDSLUICE",
		"AWS_SECRET_ACCESS_KEY=sluice-secret",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE="+filepath.Join(home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "aws-credentials"),
		"AWS_PAGER=",
		"AWS_EC2_METADATA_DISABLED=true",
		"PYTHONDONTWRITEBYTECODE=1",
	)
	return append(env, extra...)
}

// runClient runs a client process to completion within timeout and fails t
// with its output if it exits non-zero. It returns stdout.
func runClient(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, errOut, err := runClientErr(t, timeout, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n--- stdout\n%s\n--- stderr\n%s", name, strings.Join(args, " "), err, out, lastLines(errOut, 60))
	}
	if testing.Verbose() && errOut != "" {
		t.Logf("%s stderr:\n%s", filepath.Base(name), lastLines(errOut, 30))
	}
	return out
}

// runClientErr is runClient that returns the exit error instead of failing.
func runClientErr(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v (%v)", timeout, err)
	}
	return o.String(), e.String(), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// brokerFeatures says which features still being built the broker under test
// has. A nil field means present; otherwise it says how the probe failed.
type brokerFeatures struct {
	fifo      error // FIFO queues: a SendMessage to a .fifo queue
	moveTasks error // ListMessageMoveTasks and ListDeadLetterSourceQueues
}

// probeFeatures asks the broker at url, through aws-sdk-go-v2, whether it
// serves FIFO queues and message move tasks. Only an UnsupportedOperation
// answer (or a refused FIFO queue) counts as "not built yet"; anything else
// fails t, since it is a bug rather than a missing feature.
func probeFeatures(t *testing.T, url string) brokerFeatures {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := sqsClient(url)
	var f brokerFeatures

	fq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("probe-fifo.fifo"),
		Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		f.fifo = fmt.Errorf("CreateQueue(FifoQueue=true) answered %w", err)
	} else {
		_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: fq.QueueUrl, MessageBody: aws.String("probe"),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d")})
		if err != nil {
			f.fifo = fmt.Errorf("a FIFO SendMessage answered %w", err)
		}
		_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: fq.QueueUrl})
	}
	if f.fifo != nil && !isUnsupported(f.fifo, "InvalidAttributeName", "InvalidAttributeValue") {
		t.Fatalf("FIFO probe failed with something other than UnsupportedOperation: %v", f.fifo)
	}

	sq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("probe-move-dlq")})
	if err != nil {
		t.Fatalf("probe: CreateQueue: %v", err)
	}
	qa, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: sq.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("probe: GetQueueAttributes: %v", err)
	}
	_, err = c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{
		SourceArn: aws.String(qa.Attributes["QueueArn"])})
	if err != nil {
		f.moveTasks = fmt.Errorf("ListMessageMoveTasks answered %w", err)
	} else if _, err = c.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: sq.QueueUrl}); err != nil {
		f.moveTasks = fmt.Errorf("ListDeadLetterSourceQueues answered %w", err)
	}
	if f.moveTasks != nil && !isUnsupported(f.moveTasks) {
		t.Fatalf("move task probe failed with something other than UnsupportedOperation: %v", f.moveTasks)
	}
	_, _ = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: sq.QueueUrl})
	return f
}

// isUnsupported reports whether err is an UnsupportedOperation answer or has
// one of the other codes.
func isUnsupported(err error, otherCodes ...string) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	c := ae.ErrorCode()
	for _, o := range otherCodes {
		if c == o {
			return true
		}
	}
	return c == "AWS.SimpleQueueService.UnsupportedOperation" || c == "UnsupportedOperation"
}

// clientPart is one piece of a message's life that every client test runs,
// each on its own queues of one broker.
type clientPart struct {
	name       string // passed to the client's script: "<kind>-<what>"
	fifo, move bool   // needs FIFO queues / message move tasks
}

// clientParts: for a standard and a FIFO queue, the life cycle (create, send
// single and batch with attributes, long-poll receive, change visibility,
// delete), a redrive into a dead-letter queue, and a move task back.
var clientParts = []clientPart{
	{name: "standard-lifecycle"},
	{name: "standard-redrive"},
	{name: "standard-move", move: true},
	{name: "fifo-lifecycle", fifo: true},
	{name: "fifo-redrive", fifo: true},
	{name: "fifo-move", fifo: true, move: true},
}

// skipMissing skips t, with a printed reason naming the feature, when the part
// needs a feature the broker does not have yet.
func (p clientPart) skipMissing(t *testing.T, f brokerFeatures) {
	t.Helper()
	if p.fifo && f.fifo != nil {
		t.Skipf("SKIP: FIFO queues are not implemented in this broker yet (probe: %v); %s runs once they are", f.fifo, p.name)
	}
	if p.move && f.moveTasks != nil {
		t.Skipf("SKIP: message move tasks (StartMessageMoveTask, ListMessageMoveTasks, ListDeadLetterSourceQueues) are not implemented in this broker yet (probe: %v); %s runs once they are", f.moveTasks, p.name)
	}
}

// sharedBroker is one broker per client test: its parts use distinct queues.
type sharedBroker struct {
	p     *brokerProc
	feats brokerFeatures
}

func startClientBroker(t *testing.T) sharedBroker {
	t.Helper()
	p := startBroker(t, t.TempDir())
	return sharedBroker{p: p, feats: probeFeatures(t, p.URL)}
}

// uniqueNames hands out queue-name prefixes unique within the test binary.
var (
	uniqueMu sync.Mutex
	uniqueN  int
)

func uniquePrefix(client string) string {
	uniqueMu.Lock()
	defer uniqueMu.Unlock()
	uniqueN++
	return fmt.Sprintf("%s%d", client, uniqueN)
}
