package e2e

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// awsCLIPath is Debian's awscli 2.9 (the query protocol). The aws on PATH may
// be a pyenv shim for aws CLI v1, which speaks JSON.
const awsCLIPath = "/usr/bin/aws"

func awsCLIMissing() error {
	if _, err := os.Stat(awsCLIPath); err != nil {
		return err
	}
	return checkCommand(awsCLIPath, "--version")
}

// awsCLI runs Debian's aws CLI against one broker.
type awsCLI struct {
	t   *testing.T
	url string
	env []string
}

func newAWSCLI(t *testing.T, url string) *awsCLI {
	needClient(t, requireDebian, "the aws CLI (Debian awscli at "+awsCLIPath+")", awsCLIMissing(), aptInstall)
	return &awsCLI{t: t, url: url, env: clientEnv(t)}
}

var cliErrorRE = regexp.MustCompile(`An error occurred \(([^)]+)\) when calling the (\w+) operation`)

// try runs `aws sqs <args>` and returns its JSON output, or the error code
// the CLI printed (with stderr) when it failed.
func (a *awsCLI) try(args ...string) (out map[string]any, code, stderr string) {
	a.t.Helper()
	full := append([]string{"--endpoint-url", a.url, "--region", "us-east-1", "--output", "json",
		"--cli-read-timeout", "40", "--cli-connect-timeout", "5", "sqs"}, args...)
	stdout, stderr, err := runClientErr(a.t, 90*time.Second, "", a.env, awsCLIPath, full...)
	if err != nil {
		if m := cliErrorRE.FindStringSubmatch(stderr); m != nil {
			return nil, m[1], stderr
		}
		a.t.Fatalf("aws sqs %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	out = map[string]any{}
	if strings.TrimSpace(stdout) != "" {
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			a.t.Fatalf("aws sqs %s: output is not JSON: %v\n%s", args[0], err, stdout)
		}
	}
	return out, "", stderr
}

// run is try that fails t on an error answer.
func (a *awsCLI) run(args ...string) map[string]any {
	a.t.Helper()
	out, code, stderr := a.try(args...)
	if code != "" {
		a.t.Fatalf("aws sqs %s: %s\n%s", strings.Join(args, " "), code, stderr)
	}
	return out
}

// cliAttrs are message attributes in the CLI's JSON form (blobs in base64).
const cliAttrs = `{"trace":{"DataType":"String","StringValue":"trace-é漢"},` +
	`"count":{"DataType":"Number","StringValue":"42"},` +
	`"blob":{"DataType":"Binary","BinaryValue":"AAH+/w=="},` +
	`"kind":{"DataType":"String.custom","StringValue":"custom type"}}`

// sqsAttrMD5 is SQS's digest of message attributes, written here from the
// documented algorithm (the CLI does not check it): names sorted; each field a
// 4-byte big-endian length then bytes; the value prefixed by 1 (string) or 2
// (binary). attrs is in the JSON form the CLI prints.
func sqsAttrMD5(t *testing.T, attrs map[string]any) string {
	h := md5.New()
	field := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(b)))
		h.Write(b)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := attrs[n].(map[string]any)
		field([]byte(n))
		field([]byte(a["DataType"].(string)))
		if s, ok := a["StringValue"].(string); ok {
			h.Write([]byte{1})
			field([]byte(s))
		} else {
			b, err := base64.StdEncoding.DecodeString(a["BinaryValue"].(string))
			if err != nil {
				t.Fatalf("BinaryValue of %s: %v", n, err)
			}
			h.Write([]byte{2})
			field(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// cliLife is one part of a message's life through the aws CLI.
type cliLife struct {
	*awsCLI
	fifo   bool
	prefix string
}

func (l *cliLife) name(base string) string {
	if l.fifo {
		return l.prefix + "-" + base + ".fifo"
	}
	return l.prefix + "-" + base
}

func (l *cliLife) create(base string, attrs map[string]string) string {
	l.t.Helper()
	if attrs == nil {
		attrs = map[string]string{}
	}
	if l.fifo {
		attrs["FifoQueue"] = "true"
	}
	aj, _ := json.Marshal(attrs)
	url := l.run("create-queue", "--queue-name", l.name(base), "--attributes", string(aj))["QueueUrl"].(string)
	if got := l.run("get-queue-url", "--queue-name", l.name(base))["QueueUrl"]; got != url {
		l.t.Fatalf("get-queue-url %v, create-queue %s", got, url)
	}
	return url
}

func (l *cliLife) attrs(url string) map[string]any {
	l.t.Helper()
	return l.run("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")["Attributes"].(map[string]any)
}

func (l *cliLife) counts(url string) string {
	a := l.attrs(url)
	return fmt.Sprint(a["ApproximateNumberOfMessages"], "/", a["ApproximateNumberOfMessagesNotVisible"])
}

func (l *cliLife) send(url, body, group, dedup string) string {
	l.t.Helper()
	args := []string{"send-message", "--queue-url", url, "--message-body", body, "--message-attributes", cliAttrs}
	if l.fifo {
		args = append(args, "--message-group-id", group, "--message-deduplication-id", dedup)
	}
	out := l.run(args...)
	var attrs map[string]any
	_ = json.Unmarshal([]byte(cliAttrs), &attrs)
	if out["MD5OfMessageBody"] != md5Hex(body) || out["MD5OfMessageAttributes"] != sqsAttrMD5(l.t, attrs) {
		l.t.Fatalf("send-message MD5s %v", out)
	}
	if l.fifo && out["SequenceNumber"] == nil {
		l.t.Fatalf("FIFO send-message without SequenceNumber: %v", out)
	}
	return out["MessageId"].(string)
}

// receive runs receive-message and checks the MD5s of what it got.
func (l *cliLife) receive(url string, wait int) []map[string]any {
	l.t.Helper()
	return l.checkReceived(l.run("receive-message", "--queue-url", url, "--wait-time-seconds", fmt.Sprint(wait),
		"--max-number-of-messages", "10", "--message-attribute-names", "All", "--attribute-names", "All"))
}

func (l *cliLife) checkReceived(out map[string]any) []map[string]any {
	l.t.Helper()
	var msgs []map[string]any
	raw, _ := out["Messages"].([]any)
	for _, r := range raw {
		m := r.(map[string]any)
		if m["MD5OfBody"] != md5Hex(m["Body"].(string)) {
			l.t.Fatalf("MD5OfBody %v of %q", m["MD5OfBody"], m["Body"])
		}
		if ma, ok := m["MessageAttributes"].(map[string]any); ok && m["MD5OfMessageAttributes"] != sqsAttrMD5(l.t, ma) {
			l.t.Fatalf("MD5OfMessageAttributes %v of %v", m["MD5OfMessageAttributes"], ma)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func (l *cliLife) receiveN(url string, n int) []map[string]any {
	l.t.Helper()
	var got []map[string]any
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, l.receive(url, 5)...)
	}
	if len(got) != n {
		l.t.Fatalf("received %d messages, want %d", len(got), n)
	}
	return got
}

func (l *cliLife) expectEmpty(url, what string) {
	l.t.Helper()
	if msgs := l.receive(url, 1); len(msgs) != 0 {
		l.t.Fatalf("%s: receive got %d messages, want none", what, len(msgs))
	}
}

func sysAttr(m map[string]any, name string) string {
	a, _ := m["Attributes"].(map[string]any)
	s, _ := a[name].(string)
	return s
}

func msgAttr(m map[string]any, name, field string) string {
	a, _ := m["MessageAttributes"].(map[string]any)
	v, _ := a[name].(map[string]any)
	s, _ := v[field].(string)
	return s
}

func (l *cliLife) lifecycle() {
	t := l.t
	url := l.create("life", map[string]string{"VisibilityTimeout": "30"})
	if a := l.attrs(url); a["VisibilityTimeout"] != "30" || (l.fifo && a["FifoQueue"] != "true") {
		t.Fatalf("queue attributes %v", a)
	}
	l.expectEmpty(url, "new queue")

	// A long poll running while the message is sent returns it at once.
	polled := make(chan []map[string]any, 1)
	start := time.Now()
	go func() {
		out, code, stderr := l.try("receive-message", "--queue-url", url, "--wait-time-seconds", "20",
			"--message-attribute-names", "All", "--attribute-names", "All")
		if code != "" {
			t.Errorf("long poll: %s %s", code, stderr)
		}
		polled <- l.checkReceivedNoFatal(out)
	}()
	mid := l.send(url, "single body", "g1", "d1")
	msgs := <-polled
	took := time.Since(start)
	if len(msgs) != 1 || msgs[0]["MessageId"] != mid {
		t.Fatalf("long poll got %v after %v", msgs, took)
	}
	m := msgs[0]
	// "At once" is judged by the broker's clock: the message's first
	// receive against its send. The CLI's two processes take seconds to
	// start on a loaded machine (CI once took 15 s for both, with the
	// receive 1 ms after the send), and the poll's process may even reach
	// the broker after the send. A poll the send did not wake answers at
	// the end of its 20 s wait: many seconds after the send, and 20 s or
	// more after the poll's start.
	sent, _ := strconv.ParseInt(sysAttr(m, "SentTimestamp"), 10, 64)
	first, _ := strconv.ParseInt(sysAttr(m, "ApproximateFirstReceiveTimestamp"), 10, 64)
	if sent == 0 || first == 0 {
		t.Fatalf("long poll: a message without its timestamps: %v", m)
	}
	if first-sent > 3000 && took >= 20*time.Second {
		t.Fatalf("long poll: received %d ms after the send, %v after the poll began: the send did not wake it: %v", first-sent, took, m)
	}
	if m["Body"] != "single body" || msgAttr(m, "trace", "StringValue") != "trace-é漢" ||
		msgAttr(m, "blob", "BinaryValue") != "AAH+/w==" || msgAttr(m, "kind", "DataType") != "String.custom" ||
		sysAttr(m, "ApproximateReceiveCount") != "1" {
		t.Fatalf("received %v", m)
	}
	if l.fifo && (sysAttr(m, "MessageGroupId") != "g1" || sysAttr(m, "SequenceNumber") == "") {
		t.Fatalf("FIFO system attributes %v", m["Attributes"])
	}
	if c := l.counts(url); c != "0/1" {
		t.Fatalf("counts while leased %s, want 0/1", c)
	}
	l.run("change-message-visibility", "--queue-url", url, "--receipt-handle", m["ReceiptHandle"].(string), "--visibility-timeout", "1")
	again := l.receiveN(url, 1)
	if again[0]["MessageId"] != mid || sysAttr(again[0], "ApproximateReceiveCount") != "2" {
		t.Fatalf("after the lease ended: %v", again)
	}
	l.run("delete-message", "--queue-url", url, "--receipt-handle", again[0]["ReceiptHandle"].(string))
	if c := l.counts(url); c != "0/0" {
		t.Fatalf("counts after delete %s", c)
	}
	if l.fifo {
		if dup := l.send(url, "single body", "g1", "d1"); dup != mid {
			t.Fatalf("duplicate send answered %s, want %s", dup, mid)
		}
		l.expectEmpty(url, "after a deduplicated send")
	}

	var entries []map[string]any
	var attrs map[string]any
	_ = json.Unmarshal([]byte(cliAttrs), &attrs)
	for i := range 3 {
		e := map[string]any{"Id": fmt.Sprintf("e%d", i), "MessageBody": fmt.Sprintf("batch body %d", i), "MessageAttributes": attrs}
		if l.fifo {
			e["MessageGroupId"], e["MessageDeduplicationId"] = "g2", fmt.Sprintf("b%d", i)
		}
		entries = append(entries, e)
	}
	ej, _ := json.Marshal(entries)
	sb := l.run("send-message-batch", "--queue-url", url, "--entries", string(ej))
	if s, _ := sb["Successful"].([]any); len(s) != 3 || sb["Failed"] != nil {
		t.Fatalf("send-message-batch %v", sb)
	}
	for _, s := range sb["Successful"].([]any) {
		e := s.(map[string]any)
		if e["MD5OfMessageAttributes"] != sqsAttrMD5(t, attrs) || !strings.HasPrefix(e["Id"].(string), "e") {
			t.Fatalf("batch entry %v", e)
		}
	}
	got := l.receiveN(url, 3)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, m["Body"].(string))
	}
	if !l.fifo {
		slices.Sort(bodies)
	}
	if want := []string{"batch body 0", "batch body 1", "batch body 2"}; !slices.Equal(bodies, want) {
		t.Fatalf("batch bodies %q, want %q", bodies, want)
	}
	handles := func(msgs []map[string]any, extra map[string]any) string {
		var es []map[string]any
		for i, m := range msgs {
			e := map[string]any{"Id": fmt.Sprint(i), "ReceiptHandle": m["ReceiptHandle"]}
			for k, v := range extra {
				e[k] = v
			}
			es = append(es, e)
		}
		j, _ := json.Marshal(es)
		return string(j)
	}
	cv := l.run("change-message-visibility-batch", "--queue-url", url, "--entries", handles(got, map[string]any{"VisibilityTimeout": 0}))
	if s, _ := cv["Successful"].([]any); len(s) != 3 {
		t.Fatalf("change-message-visibility-batch %v", cv)
	}
	got = l.receiveN(url, 3)
	db := l.run("delete-message-batch", "--queue-url", url, "--entries", handles(got, nil))
	if s, _ := db["Successful"].([]any); len(s) != 3 {
		t.Fatalf("delete-message-batch %v", db)
	}
	if c := l.counts(url); c != "0/0" {
		t.Fatalf("counts after the batch delete %s", c)
	}
	l.run("delete-queue", "--queue-url", url)
	if _, code, _ := l.try("get-queue-url", "--queue-name", l.name("life")); code != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("get-queue-url of a deleted queue answered %q", code)
	}
}

// checkReceivedNoFatal is checkReceived for a goroutine other than the test's.
func (l *cliLife) checkReceivedNoFatal(out map[string]any) []map[string]any {
	raw, _ := out["Messages"].([]any)
	var msgs []map[string]any
	for _, r := range raw {
		m := r.(map[string]any)
		if m["MD5OfBody"] != md5Hex(m["Body"].(string)) {
			l.t.Errorf("MD5OfBody %v of %q", m["MD5OfBody"], m["Body"])
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func (l *cliLife) redrive() (src, dlq, body string) {
	t := l.t
	dlq = l.create("dlq", nil)
	dlqArn := l.attrs(dlq)["QueueArn"].(string)
	src = l.create("src", map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"1"}`, dlqArn)})
	body = "poison " + l.prefix
	mid := l.send(src, body, "g1", "p1")
	first := l.receiveN(src, 1)
	l.run("change-message-visibility", "--queue-url", src, "--receipt-handle", first[0]["ReceiptHandle"].(string), "--visibility-timeout", "0")
	if again := l.receive(src, 1); len(again) != 0 {
		t.Fatalf("second receive returned the message instead of moving it to the DLQ")
	}
	dead := l.receiveN(dlq, 1)
	if dead[0]["MessageId"] != mid || dead[0]["Body"] != body || msgAttr(dead[0], "count", "StringValue") != "42" ||
		sysAttr(dead[0], "DeadLetterQueueSourceArn") != l.attrs(src)["QueueArn"] {
		t.Fatalf("DLQ receive %v", dead)
	}
	l.run("change-message-visibility", "--queue-url", dlq, "--receipt-handle", dead[0]["ReceiptHandle"].(string), "--visibility-timeout", "0")
	if c := l.counts(src); c != "0/0" {
		t.Fatalf("source counts %s after the redrive", c)
	}
	if srcs := l.run("list-dead-letter-source-queues", "--queue-url", dlq); fmt.Sprint(srcs["queueUrls"]) != fmt.Sprint([]any{src}) {
		t.Fatalf("list-dead-letter-source-queues %v", srcs)
	}
	return src, dlq, body
}

func (l *cliLife) move() {
	t := l.t
	// Debian's awscli 2.9 predates the 2023 move-task API: it has no such
	// command. Asked first, so that the redrive before the move (the
	// redrive subtests run it anyway) is not run for nothing.
	if _, stderr, err := runClientErr(t, time.Minute, "", l.env, awsCLIPath, "sqs", "start-message-move-task", "help"); err != nil {
		why := err.Error()
		if i := strings.Index(stderr, "Invalid choice"); i >= 0 {
			why, _, _ = strings.Cut(stderr[i:], ",")
		}
		t.Skipf("SKIP: the move back: this aws CLI has no start-message-move-task (%s; the SQS API added it in 2023, "+
			"Debian's awscli 2.9.19 predates it); the redrive subtests run the redrive and list-dead-letter-source-queues, "+
			"and TestClientBoto3 sends the move over the query protocol", why)
	}
	src, dlq, body := l.redrive()
	dlqArn := l.attrs(dlq)["QueueArn"].(string)
	if st := l.run("start-message-move-task", "--source-arn", dlqArn); st["TaskHandle"] == nil {
		t.Fatalf("start-message-move-task %v", st)
	}
	var task map[string]any
	testutil.Eventually(t, 60*time.Second, "the move task to complete", func() bool {
		res, _ := l.run("list-message-move-tasks", "--source-arn", dlqArn)["Results"].([]any)
		if len(res) == 0 {
			t.Fatal("list-message-move-tasks lists no task")
		}
		task = res[0].(map[string]any)
		switch task["Status"] {
		case "COMPLETED":
			return true
		case "RUNNING", "CANCELLING":
			return false
		}
		t.Fatalf("move task %v", task)
		return false
	})
	if task["ApproximateNumberOfMessagesMoved"] != float64(1) {
		t.Fatalf("completed task %v", task)
	}
	back := l.receiveN(src, 1)
	if back[0]["Body"] != body || msgAttr(back[0], "count", "StringValue") != "42" {
		t.Fatalf("after the move, the source gave %v", back)
	}
	l.run("delete-message", "--queue-url", src, "--receipt-handle", back[0]["ReceiptHandle"].(string))
	if c := l.counts(dlq); c != "0/0" {
		t.Fatalf("DLQ counts %s after the move", c)
	}
}

// TestClientAWSCLI runs Debian's aws CLI (awscli 2.9, the query protocol)
// through a message's whole life on standard and FIFO queues, one CLI process
// per call. The CLI does not check MD5s, so the test does.
func TestClientAWSCLI(t *testing.T) {
	t.Parallel()
	newAWSCLI(t, "") // skip before starting a broker
	b := startClientBroker(t)
	for _, part := range clientParts {
		t.Run(part.name, func(t *testing.T) {
			t.Parallel()
			part.skipMissing(t, b.feats)
			kind, what, _ := strings.Cut(part.name, "-")
			l := &cliLife{awsCLI: newAWSCLI(t, b.p.URL), fifo: kind == "fifo", prefix: uniquePrefix("cli")}
			switch what {
			case "lifecycle":
				l.lifecycle()
			case "redrive":
				l.redrive()
			case "move":
				l.move()
			}
		})
	}
}
