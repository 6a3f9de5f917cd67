package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sclient "github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/metrics"
	"github.com/sluicemq/sluice/server"
)

// cliEnv is a broker in-process and a client of it, for the CLI tests.
type cliEnv struct {
	t   *testing.T
	url string
	c   *sclient.Client
}

func setupCLI(t *testing.T) *cliEnv {
	t.Helper()
	t.Parallel()
	b := testbroker.Start(t, testbroker.Config{})
	c, err := sclient.New(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &cliEnv{t: t, url: b.URL, c: c}
}

// result is a run's exit code and output.
type result struct {
	code           int
	stdout, stderr string
}

// run runs sluice with args against the test's broker (SLUICE_URL).
func (e *cliEnv) run(args ...string) result {
	e.t.Helper()
	return e.runCtx(context.Background(), args...)
}

func (e *cliEnv) runCtx(ctx context.Context, args ...string) result {
	e.t.Helper()
	var out, errb testutil.Buffer
	env := func(k string) string {
		if k == "SLUICE_URL" {
			return e.url
		}
		return ""
	}
	code := run(ctx, args, env, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// ok runs args and fails the test unless they exit 0.
func (e *cliEnv) ok(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// fails runs args and fails the test unless they exit with code and
// stderr holds every one of parts.
func (e *cliEnv) fails(code int, args []string, parts ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != code {
		e.t.Fatalf("sluice %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			e.t.Errorf("sluice %s: stderr lacks %q:\n%s", strings.Join(args, " "), p, r.stderr)
		}
	}
	return r
}

func (e *cliEnv) queue(name string) sclient.Queue {
	e.t.Helper()
	q, err := e.c.GetQueue(context.Background(), name)
	if err != nil {
		e.t.Fatalf("GetQueue %s: %v", name, err)
	}
	return q
}

// squeeze is s with each line's runs of spaces made one.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func wantContains(t *testing.T, what, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("%s lacks %q:\n%s", what, p, got)
		}
	}
}

func TestCLIQueue(t *testing.T) {
	e := setupCLI(t)
	ctx := context.Background()

	e.ok("queue", "create", "orders-dlq")
	r := e.ok("queue", "create", "orders", "--dlq", "orders-dlq", "--max-receives", "3", "VisibilityTimeout=45", "--tag", "team=shop")
	wantContains(t, "create", r.stdout, "created queue orders", "arn:")
	q := e.queue("orders")
	if q.DeadLetterQueue != "orders-dlq" || q.Attributes["VisibilityTimeout"] != "45" || q.Tags["team"] != "shop" {
		t.Errorf("orders after create: dlq %q, attributes %v, tags %v", q.DeadLetterQueue, q.Attributes, q.Tags)
	}
	if !strings.Contains(q.Attributes["RedrivePolicy"], `"maxReceiveCount":3`) {
		t.Errorf("RedrivePolicy %s", q.Attributes["RedrivePolicy"])
	}
	e.ok("queue", "create", "events.fifo", "--fifo")
	if !e.queue("events.fifo").Fifo {
		t.Error("events.fifo is not FIFO")
	}
	e.fails(2, []string{"queue", "create", "events", "--fifo"}, "ends in .fifo", "events.fifo")
	e.fails(2, []string{"queue", "create", "jobs.fifo"}, "add --fifo")
	// Creating an existing queue with its own settings says so.
	r = e.ok("queue", "create", "events.fifo", "--fifo")
	wantContains(t, "create again", r.stdout, "queue events.fifo exists with these settings, unchanged")
	// --max-receives goes with a dead-letter queue: alone on create it is
	// refused rather than ignored; alone on set it changes maxReceiveCount.
	e.fails(2, []string{"queue", "create", "solo", "--max-receives", "9"}, "--max-receives needs --dlq")
	if _, err := e.c.GetQueue(ctx, "solo"); err == nil {
		t.Error("queue create solo --max-receives 9 created solo")
	}
	e.fails(1, []string{"queue", "create", "x", "--dlq", "nope"}, "nope", "sluice queue create NAME")
	e.fails(1, []string{"queue", "create", "orders", "VisibilityTimeout=99"}, "queue_exists", "sluice queue set")
	e.fails(1, []string{"queue", "create", "bad", "VisibilityTimeout=abc"}, "VisibilityTimeout", "--help")
	e.fails(2, []string{"queue", "create", "bad", "novalue"}, "NAME=VALUE")

	if _, err := e.c.Send(ctx, "orders", sclient.Message{Body: "a"}); err != nil {
		t.Fatal(err)
	}
	r = e.ok("queue", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("queue list: %q", r.stdout)
	}
	// Aligned columns: every line has VISIBLE's column at the same offset.
	col := strings.Index(lines[0], "VISIBLE")
	if f := strings.Fields(lines[2]); f[0] != "orders" || f[3] != "1" || f[6] != "0" || lines[2][col] != '1' {
		t.Errorf("queue list's orders line: %q (header %q)", lines[2], lines[0])
	}
	if f := strings.Fields(lines[3]); f[0] != "orders-dlq" || f[6] != "-" {
		t.Errorf("queue list's orders-dlq line: %q", lines[3])
	}
	r = e.ok("queue", "list", "--prefix", "ord", "--names")
	if r.stdout != "orders\norders-dlq\n" {
		t.Errorf("queue list --names: %q", r.stdout)
	}
	r = e.ok("queue", "list", "--json")
	var list []queueJSON
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 3 || list[1].Name != "orders" || list[1].Stats.Visible != 1 {
		t.Errorf("queue list --json: %v %+v", err, list)
	}

	r = e.ok("queue", "show", "orders")
	wantContains(t, "queue show", squeeze(r.stdout), "\ndead-letter queue orders-dlq\n", "\nVisibilityTimeout 45\n", "\ntag team shop\n", "\nvisible 1\n")
	r = e.ok("queue", "show", "--json", "orders")
	var qj queueJSON
	if err := json.Unmarshal([]byte(r.stdout), &qj); err != nil || qj.DeadLetterQueue != "orders-dlq" || qj.Attributes["VisibilityTimeout"] != "45" {
		t.Errorf("queue show --json: %v %+v", err, qj)
	}
	e.fails(1, []string{"queue", "show", "missing"}, "queue_not_found", "sluice queue list")

	r = e.ok("queue", "set", "orders", "VisibilityTimeout=60", "--max-depth", "100")
	wantContains(t, "queue set", r.stdout, "VisibilityTimeout = 60", "MaxDepth = 100")
	if q := e.queue("orders"); q.Attributes["VisibilityTimeout"] != "60" || q.Attributes["MaxDepth"] != "100" {
		t.Errorf("after set: %v", q.Attributes)
	}
	e.fails(2, []string{"queue", "set", "orders"}, "ATTRIBUTE=VALUE")
	e.ok("queue", "set", "orders", "--archive-expired")
	if got := e.queue("orders").Attributes["ArchiveExpired"]; got != "true" {
		t.Errorf("ArchiveExpired after set --archive-expired: %q", got)
	}
	e.ok("queue", "set", "orders", "--archive-expired=false")
	if got := e.queue("orders").Attributes["ArchiveExpired"]; got != "false" {
		t.Errorf("ArchiveExpired after set --archive-expired=false: %q", got)
	}
	e.ok("queue", "set", "orders", "--max-receives", "7")
	if got := e.queue("orders").Attributes["RedrivePolicy"]; !strings.Contains(got, `"maxReceiveCount":7`) || !strings.Contains(got, "orders-dlq") {
		t.Errorf("RedrivePolicy after set --max-receives 7: %s", got)
	}
	e.fails(2, []string{"queue", "set", "orders-dlq", "--max-receives", "7"}, "orders-dlq has no dead-letter queue", "--dlq")
	// --dlq alone keeps the queue's maxReceiveCount rather than resetting it to 5.
	e.ok("queue", "set", "orders", "--dlq", "orders-dlq")
	if got := e.queue("orders").Attributes["RedrivePolicy"]; !strings.Contains(got, `"maxReceiveCount":7`) {
		t.Errorf("RedrivePolicy after set --dlq alone: %s, want maxReceiveCount 7 kept", got)
	}
	// The rate limits' flags; 0 removes a limit; a bad value answers the
	// broker's reason.
	r = e.ok("queue", "set", "orders", "--max-in-flight", "50", "--max-receives-per-second", "2.50")
	wantContains(t, "queue set of the limits", r.stdout, "MaxInFlight = 50", "MaxReceivesPerSecond = 2.5")
	e.ok("queue", "set", "orders", "--max-in-flight", "0", "--max-receives-per-second", "0")
	if q := e.queue("orders"); q.Attributes["MaxInFlight"] != "" || q.Attributes["MaxReceivesPerSecond"] != "" {
		t.Errorf("after removing the limits: %v", q.Attributes)
	}
	e.fails(1, []string{"queue", "set", "orders", "--max-receives-per-second", "-1"}, "invalid_attribute_value", "above 0")
	// RetryPolicy's schedule form, as an attribute: read back normalized;
	// a bad one answers the broker's reason.
	e.ok("queue", "set", "orders", `RetryPolicy={"delays":[10,60,300]}`)
	if got := e.queue("orders").Attributes["RetryPolicy"]; got != `{"delays":[10,60,300],"jitter":"none"}` {
		t.Errorf("RetryPolicy after set: %s", got)
	}
	e.fails(1, []string{"queue", "set", "orders", `RetryPolicy={"delays":[10],"baseSeconds":2}`}, "invalid_attribute_value", "delays cannot be given with baseSeconds")

	e.ok("queue", "pause", "orders")
	if e.queue("orders").Attributes["Paused"] != "true" {
		t.Error("pause did not pause")
	}
	r = e.ok("queue", "resume", "orders", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &qj); err != nil || qj.Paused {
		t.Errorf("resume --json: %v %+v", err, qj)
	}

	e.ok("queue", "purge", "orders")
	if s, _ := e.c.Stats(ctx, "orders"); s.Depth != 0 {
		t.Errorf("after purge: depth %d", s.Depth)
	}
	e.ok("queue", "delete", "events.fifo")
	if _, err := e.c.GetQueue(ctx, "events.fifo"); err == nil {
		t.Error("events.fifo still exists after delete")
	}
}

func TestCLIHelpAndErrors(t *testing.T) {
	e := setupCLI(t)
	// Help asked for prints on stdout (so that | less shows it), with
	// examples everywhere; a bad flag's usage goes to stderr.
	for _, args := range [][]string{
		{"queue", "create", "--help"}, {"queue", "list", "-h"}, {"queue", "--help"}, {"--help"}, {"help"},
		{"serve", "--help"}, {"demo", "--help"}, {"store", "verify", "-h"}, {"send", "-help"},
		{"completion", "--help"}, {"version", "--help"},
	} {
		r := e.run(args...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: sluice") || r.stderr != "" {
			t.Errorf("sluice %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, args := range [][]string{{"serve"}, {"demo"}, {"queue", "create"}} {
		wantContains(t, strings.Join(args, " ")+" --help", e.run(append(args, "--help")...).stdout, "examples:", "sluice "+strings.Join(args, " "))
	}
	if r := e.run("queue", "list", "--no-such-flag"); r.code != 2 || !strings.Contains(r.stderr, "usage: sluice queue list") || r.stdout != "" {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	e.fails(2, []string{"queue", "nope"}, "unknown command", "sluice queue --help")
	// A mistyped name gets a suggestion; one far from every name none.
	e.fails(2, []string{"sned"}, `did you mean "sluice send"?`)
	e.fails(2, []string{"queue", "craete"}, `did you mean "sluice queue create"?`)
	if r := e.run("zzzzzz"); r.code != 2 || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("sluice zzzzzz: exit %d, %s", r.code, r.stderr)
	}
	e.fails(2, []string{"queue", "show"}, "takes 1 argument")

	// A broker that is not there: the error says what to do.
	var out, errb testutil.Buffer
	code := run(context.Background(), []string{"queue", "list", "--url", "http://127.0.0.1:1"}, func(string) string { return "" }, &out, &errb)
	if code != 1 {
		t.Errorf("unreachable broker: exit %d", code)
	}
	wantContains(t, "unreachable broker", errb.String(), "is `sluice serve` running? set --url or SLUICE_URL")
	code = run(context.Background(), []string{"queue", "list"}, func(k string) string {
		if k == "SLUICE_URL" {
			return "ftp://x"
		}
		return ""
	}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "SLUICE_URL") {
		t.Errorf("bad SLUICE_URL: exit %d, %s", code, errb.String())
	}
}

func TestCLISendRecvPeek(t *testing.T) {
	e := setupCLI(t)
	ctx := context.Background()
	e.ok("queue", "create", "jobs")

	r := e.ok("send", "jobs", "hello", "--attr", "kind=greeting", "--priority", "5")
	id := strings.TrimSpace(r.stdout)
	if id == "" {
		t.Fatal("send printed no id")
	}
	dir := t.TempDir()
	lines := filepath.Join(dir, "lines.txt")
	var b strings.Builder
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
		if i == 7 {
			b.WriteString("\n") // an empty line is not a message
		}
	}
	if err := os.WriteFile(lines, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.ok("send", "jobs", "--lines", lines)
	wantContains(t, "bulk send summary", r.stderr, "sent 25 messages to jobs in ")
	body := filepath.Join(dir, "body.json")
	if err := os.WriteFile(body, []byte("{\n \"multi\": \"line\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.ok("send", "jobs", "--file", body, "--json")
	var sent map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &sent); err != nil || sent["id"] == "" {
		t.Errorf("send --json: %v %q", err, r.stdout)
	}
	if s, _ := e.c.Stats(ctx, "jobs"); s.Visible != 27 {
		t.Fatalf("after sends: %d visible, want 27", s.Visible)
	}
	e.fails(2, []string{"send", "jobs", "x", "--file", body}, "give one of")
	e.fails(1, []string{"send", "nope", "x"}, "queue_not_found")

	// peek: nothing leased.
	r = e.ok("peek", "jobs", "--max", "3")
	out := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(out) != 4 || !strings.HasPrefix(out[0], "ID") || !strings.Contains(out[1], id) || !strings.Contains(out[1], "kind=greeting") || !strings.Contains(out[1], "visible") {
		t.Errorf("peek: %q", r.stdout)
	}
	r = e.ok("peek", "jobs", "--attr", "kind=greeting", "--json")
	var m messageJSON
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.ID != id || m.Body != "hello" || m.Attributes["kind"].Value != "greeting" {
		t.Errorf("peek --attr --json: %v %q", err, r.stdout)
	}
	r = e.ok("peek", "jobs", "--max", "1000", "--json")
	if n := strings.Count(r.stdout, "\n"); n != 27 {
		t.Errorf("peek --max 1000: %d messages, want 27 (across pages)", n)
	}
	if s, _ := e.c.Stats(ctx, "jobs"); s.Visible != 27 || s.InFlight != 0 {
		t.Errorf("peek leased messages: %+v", s)
	}

	// recv without --ack leases; with --ack deletes.
	r = e.ok("recv", "jobs", "--max", "2", "--json")
	var got []messageJSON
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m messageJSON
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("recv --json line %q: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 2 || got[0].ID != id || got[0].Receipt == "" || got[0].ReceiveCount != 1 {
		t.Errorf("recv --json: %+v", got)
	}
	if s, _ := e.c.Stats(ctx, "jobs"); s.InFlight != 2 || s.Visible != 25 {
		t.Errorf("after recv: %+v", s)
	}
	r = e.ok("recv", "jobs", "--max", "15", "--ack")
	if n := strings.Count(r.stdout, "\n"); n != 16 {
		t.Errorf("recv --max 15: %d lines, want a header and 15:\n%s", n, r.stdout)
	}
	wantContains(t, "recv --ack", r.stderr, "received 15, acked 15")
	if s, _ := e.c.Stats(ctx, "jobs"); s.InFlight != 2 || s.Visible != 10 {
		t.Errorf("after recv --ack: %+v", s)
	}

	e.ok("queue", "create", "empty")
	r = e.ok("recv", "empty")
	wantContains(t, "recv of an empty queue", r.stderr, "no message in empty; wait for one with --wait 20s")
	if r.stdout != "" {
		t.Errorf("recv of an empty queue wrote %q to stdout, want nothing (the note goes to stderr)", r.stdout)
	}
	// An empty queue's oldest message is "-", not 0s.
	if f := strings.Fields(strings.Split(e.ok("queue", "list", "--prefix", "empty").stdout, "\n")[1]); f[len(f)-1] != "-" {
		t.Errorf("queue list of an empty queue: oldest %q, want -", f[len(f)-1])
	}
	// A paused queue holding messages says so, and how to resume it.
	for range 3 {
		if _, err := e.c.Send(ctx, "empty", sclient.Message{Body: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	e.ok("queue", "pause", "empty")
	r = e.ok("recv", "empty")
	wantContains(t, "recv of a paused queue", r.stderr, "empty is paused (3 messages visible", "sluice queue resume empty")
	e.ok("queue", "resume", "empty")
	// Messages in flight are named rather than "no message".
	e.ok("recv", "empty", "--max", "3")
	r = e.ok("recv", "empty")
	wantContains(t, "recv with every message in flight", r.stderr, "no visible message in empty (3 in flight)")

	// FIFO: the group and dedup id go through.
	e.ok("queue", "create", "ev.fifo", "--fifo")
	e.ok("send", "ev.fifo", "a", "--group", "g1", "--dedup", "d1")
	e.ok("send", "ev.fifo", "a", "--group", "g1", "--dedup", "d1") // deduplicated
	r = e.ok("peek", "ev.fifo", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.GroupID != "g1" || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("FIFO peek: %v %q", err, r.stdout)
	}
	e.fails(1, []string{"send", "ev.fifo", "b"}, "MessageGroupId", "--help")
}

// deadLetters sends one message a body to queue and dead-letters each one
// with the reason of the same index.
func (e *cliEnv) deadLetters(queue string, msgs []sclient.Message, reasons []string) {
	e.t.Helper()
	ctx := context.Background()
	for i, m := range msgs {
		if _, err := e.c.Send(ctx, queue, m); err != nil {
			e.t.Fatal(err)
		}
		ds, err := e.c.Receive(ctx, queue)
		if err != nil || len(ds) != 1 {
			e.t.Fatalf("receive: %v, %d messages", err, len(ds))
		}
		if err := e.c.DeadLetter(ctx, queue, ds[0].Receipt, reasons[i]); err != nil {
			e.t.Fatal(err)
		}
	}
}

func TestCLIDeadLetters(t *testing.T) {
	e := setupCLI(t)
	ctx := context.Background()
	e.ok("queue", "create", "orders-dlq")
	e.ok("queue", "create", "orders", "--dlq", "orders-dlq", "--max-receives", "3")
	e.ok("queue", "create", "plain")
	e.ok("queue", "create", "arch")
	msgs := []sclient.Message{
		{Body: `{"order": 1}`, Attributes: map[string]sclient.Attribute{"kind": sclient.String("new"), "amount": sclient.Number("12.5")}, CorrelationID: "c-1"},
		{Body: "second\nwith a newline", Attributes: map[string]sclient.Attribute{"blob": sclient.Binary([]byte{0, 1, 2, 255})}},
		{Body: `{"order": 3}`, Priority: 7},
	}
	e.deadLetters("orders", msgs, []string{"bad currency", "timeout", "bad currency EUR"})

	r := e.ok("dlq", "list", "orders")
	out := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(out) != 4 || !strings.HasPrefix(out[0], "ID") || !strings.Contains(out[1], "bad currency") || !strings.Contains(out[2], `second\nwith a newline`) {
		t.Errorf("dlq list:\n%s", r.stdout)
	}
	r = e.ok("dlq", "list", "orders", "--reason", "currency", "--json")
	var dead []messageJSON
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m messageJSON
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("dlq list --json line %q: %v", l, err)
		}
		dead = append(dead, m)
	}
	if len(dead) != 2 || dead[0].Reason != "bad currency" || dead[0].DeadLetterSource != "orders" || dead[0].ReceiveCount != 1 {
		t.Errorf("dlq list --reason --json: %+v", dead)
	}
	r = e.ok("dlq", "show", "orders", dead[0].ID)
	wantContains(t, "dlq show", squeeze(r.stdout), "\nreason bad currency\n", "\ncorrelation id c-1\n", "\nattribute kind String new\n", `{"order": 1}`)
	e.fails(1, []string{"dlq", "show", "orders", "no-such-id"}, "no dead letter no-such-id", "sluice dlq list")
	e.fails(1, []string{"dlq", "list", "plain"}, "conflict", "--dlq")

	// export → delete → send --from-export keeps bodies and attributes.
	file := filepath.Join(t.TempDir(), "dead.jsonl")
	r = e.ok("dlq", "export", "orders", "--out", file)
	wantContains(t, "export summary", r.stderr, "exported 3 dead letters of orders to "+file)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 {
		t.Fatalf("export: %d lines:\n%s", len(lines), data)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "body", "attributes", "reason", "receiveCount", "attempts", "createdAt", "deadLetterSource"} {
		if _, ok := first[k]; !ok {
			t.Errorf("an export line lacks %q: %s", k, lines[0])
		}
	}
	r = e.ok("dlq", "delete", "orders", "--all")
	wantContains(t, "dlq delete --all", r.stdout, "deleted 3 dead letters of orders")
	if s, _ := e.c.Stats(ctx, "orders"); *s.DeadLetters != 0 {
		t.Errorf("after delete --all: %d dead letters", *s.DeadLetters)
	}
	r = e.ok("send", "orders", "--from-export", file)
	wantContains(t, "send --from-export", r.stderr, "sent 3 messages to orders")
	page, err := e.c.Browse(ctx, "orders", sclient.Limit(10))
	if err != nil || len(page.Messages) != 3 {
		t.Fatalf("browse after --from-export: %v, %d", err, len(page.Messages))
	}
	// The same lines gzip-compressed in two members, as a file of the
	// broker's archive holds its batches, replay the same way.
	var gz bytes.Buffer
	for _, part := range [][]string{lines[:2], lines[2:]} {
		zw := gzip.NewWriter(&gz)
		if _, err := zw.Write([]byte(strings.Join(part, "\n") + "\n")); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	gzFile := file + ".gz"
	if err := os.WriteFile(gzFile, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.ok("send", "arch", "--from-export", gzFile)
	wantContains(t, "send --from-export of a gzip file", r.stderr, "sent 3 messages to arch")
	byBody := map[string]sclient.Delivery{}
	for _, d := range page.Messages {
		byBody[d.Body] = d
	}
	for _, m := range msgs {
		d, ok := byBody[m.Body]
		if !ok {
			t.Errorf("body %q did not come back", m.Body)
			continue
		}
		for k, a := range m.Attributes {
			got := d.Attributes[k]
			if got.Type != a.Type || got.Value != a.Value || string(got.Binary) != string(a.Binary) {
				t.Errorf("body %q: attribute %s = %+v, want %+v", m.Body, k, got, a)
			}
		}
		if d.CorrelationID != m.CorrelationID || d.Priority != m.Priority {
			t.Errorf("body %q: correlation id %q, priority %d; want %q, %d", m.Body, d.CorrelationID, d.Priority, m.CorrelationID, m.Priority)
		}
	}

	// replay: one by id, then the rest.
	if err := e.c.PurgeQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	e.deadLetters("orders", msgs, []string{"a", "b", "c"})
	dl, err := e.c.DeadLetters(ctx, "orders")
	if err != nil || len(dl.Messages) != 3 {
		t.Fatalf("dead letters: %v %d", err, len(dl.Messages))
	}
	r = e.ok("dlq", "replay", "orders", dl.Messages[0].ID, "--body", "fixed")
	wantContains(t, "replay by id", r.stderr, "replayed 1 dead letter into orders")
	r = e.ok("dlq", "replay", "orders", "--json")
	wantContains(t, "replay all", r.stderr, "replayed 2 dead letters into orders")
	var task sclient.ReplayTask
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil || task.Status != "COMPLETED" || task.Moved != 2 {
		t.Errorf("replay --json: %v %q", err, r.stdout)
	}
	if s, _ := e.c.Stats(ctx, "orders"); s.Visible != 3 || *s.DeadLetters != 0 {
		t.Errorf("after replays: %+v", s)
	}
	if page, _ := e.c.Browse(ctx, "orders", sclient.WithAttributeValue("kind", "new")); len(page.Messages) != 1 || page.Messages[0].Body != "fixed" {
		t.Errorf("the edited replay: %+v, want body \"fixed\" with its attributes", page.Messages)
	}
	r = e.ok("dlq", "replay", "orders", "--status")
	if n := strings.Count(r.stdout, "COMPLETED"); n != 2 {
		t.Errorf("replay --status: %d completed:\n%s", n, r.stdout)
	}
	e.fails(2, []string{"dlq", "replay", "orders", "--body", "x"}, "give their ids")
	e.fails(1, []string{"dlq", "delete", "orders", "no-such-id"}, "not found")
	e.fails(2, []string{"dlq", "delete", "orders"}, "--all")
}

func TestCLIStats(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	b := testbroker.Start(t, testbroker.Config{Observer: m, Server: func(c *server.Config) { c.Metrics = m }})
	m.Attach(b.Front)
	c, err := sclient.New(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &cliEnv{t: t, url: b.URL, c: c}
	ctx := context.Background()
	e.ok("queue", "create", "a-dlq")
	e.ok("queue", "create", "a", "--dlq", "a-dlq")
	e.ok("send", "a", "x")
	e.ok("send", "a", "y")

	r := e.ok("stats", "--once")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || strings.Fields(lines[0])[0] != "QUEUE" || strings.Join(strings.Fields(lines[1]), " ") != "a 2 0 0 0 0s" || strings.Join(strings.Fields(lines[2]), " ") != "a-dlq 0 0 0 - -" {
		t.Errorf("stats --once:\n%s", r.stdout)
	}
	r = e.ok("stats", "--once", "--sort", "depth", "--json")
	var frame struct {
		Queues []statsRow `json:"queues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &frame); err != nil || len(frame.Queues) != 2 || frame.Queues[0].Name != "a" || frame.Queues[0].Depth != 2 {
		t.Errorf("stats --once --json: %v %q", err, r.stdout)
	}
	e.fails(2, []string{"stats", "--sort", "size"}, "use name, depth")

	// The live view: frames until the context ends; sends show in IN/s.
	lctx, cancel := context.WithCancel(ctx)
	var out, errb testutil.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(lctx, []string{"stats", "--json", "--interval", "20ms"}, func(k string) string {
			if k == "SLUICE_URL" {
				return b.URL
			}
			return ""
		}, &out, &errb)
	}()
	testutil.Eventually(t, 10*time.Second, "two frames", func() bool { return strings.Count(out.String(), "\n") >= 2 })
	e.ok("send", "a", "z")
	testutil.Eventually(t, 10*time.Second, "a frame with a's sends a second above 0", func() bool {
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var f struct{ Queues []statsRow }
			if json.Unmarshal([]byte(l), &f) != nil {
				continue
			}
			for _, q := range f.Queues {
				if q.Name == "a" && q.InPerSecond != nil && *q.InPerSecond > 0 {
					return true
				}
			}
		}
		return false
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("live stats ended with %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("live stats did not end when its context did")
	}
}

func TestStatsRowsRates(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	q := func(depth int64) []sclient.QueueSummary {
		return []sclient.QueueSummary{{Name: "q", Stats: sclient.Stats{Visible: depth, Depth: depth}}}
	}
	prev := &statsSample{at: t0, queues: q(10), counters: map[string]map[string]float64{"in": {"q": 100}, "out": {"q": 50}}}
	now := &statsSample{at: t0.Add(2 * time.Second), queues: q(4), counters: map[string]map[string]float64{"in": {"q": 110}, "out": {"q": 66}}}
	rows := statsRows(prev, now)
	if len(rows) != 1 || rows[0].InPerSecond == nil || *rows[0].InPerSecond != 5 || *rows[0].OutPerSecond != 8 || *rows[0].DepthPerSecond != -3 {
		t.Fatalf("rates: %+v", rows)
	}
	if rows := statsRows(nil, now); rows[0].InPerSecond != nil || rows[0].DepthPerSecond != nil {
		t.Errorf("a first frame has rates: %+v", rows[0])
	}
	now.counters = nil // a broker without /metrics: only the depth's rate
	if rows := statsRows(prev, now); rows[0].InPerSecond != nil || rows[0].DepthPerSecond == nil {
		t.Errorf("without counters: %+v", rows[0])
	}
}

func TestCLICompletion(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "orders")
	e.ok("queue", "create", "other")
	e.fails(2, []string{"completion", "tcsh"}, "use bash, zsh or fish")
	e.fails(2, []string{"completion"}, "usage: sluice completion")
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := e.ok("completion", sh)
		scripts[sh] = r.stdout
		wantContains(t, sh+" script", r.stdout, "queue", "dlq", "from-export", "max-receives", "sluice queue list --names")
	}
	dir := t.TempDir()
	for sh, s := range scripts {
		if err := os.WriteFile(filepath.Join(dir, sh), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		t.Run(sh, func(t *testing.T) {
			path, err := exec.LookPath(sh)
			if err != nil {
				testutil.Missing(t, sh, sh+" is not installed, so its completion script is not checked (apt-get install "+sh+")")
			}
			script := filepath.Join(dir, sh)
			if out, err := exec.Command(path, "-n", script).CombinedOutput(); err != nil {
				t.Fatalf("%s -n rejects the script: %v\n%s", sh, err, out)
			}
			// Complete as the shell would, with this test's binary as sluice
			// on PATH and the broker at SLUICE_URL.
			complete := func(words ...string) []string {
				t.Helper()
				var cmd *exec.Cmd
				switch sh {
				case "fish":
					cmd = exec.Command(path, "-c", fmt.Sprintf("source %s; complete -C %s", script, fishQuote(strings.Join(words, " "))))
				default:
					prog := fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _sluice; echo "${COMPREPLY[*]}"`,
						script, strings.Join(words, " "), len(words)-1)
					if sh == "zsh" {
						prog = "autoload -U compinit && compinit -u; " + prog
					}
					cmd = exec.Command(path, "-c", prog)
				}
				cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(sluiceBin.Path(t))+":"+os.Getenv("PATH"), "SLUICE_URL="+e.url)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("completing %v: %v\n%s", words, err, out)
				}
				var got []string
				for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					for _, w := range strings.Fields(l) {
						got = append(got, w)
						if sh == "fish" {
							break // fish prints "candidate<TAB>description"
						}
					}
				}
				return got
			}
			for _, c := range []struct {
				words []string
				want  []string
			}{
				{[]string{"sluice", "qu"}, []string{"queue"}},
				{[]string{"sluice", "queue", "cr"}, []string{"create"}},
				{[]string{"sluice", "dlq", "re"}, []string{"replay"}},
				{[]string{"sluice", "send", "--from"}, []string{"--from-export"}},
				{[]string{"sluice", "queue", "create", "x", "--max-r"}, []string{"--max-receives", "--max-receives-per-second"}},
				{[]string{"sluice", "queue", "set", "x", "--max-i"}, []string{"--max-in-flight"}},
				{[]string{"sluice", "send", "o"}, []string{"orders", "other"}},
				{[]string{"sluice", "dlq", "list", "or"}, []string{"orders"}},
				{[]string{"sluice", "queue", "cons"}, []string{"consumers"}},
				{[]string{"sluice", "queue", "consumers", "or"}, []string{"orders"}},
				{[]string{"sluice", "completion", "f"}, []string{"fish"}},
			} {
				got := complete(c.words...)
				// bash and fish filter by the word typed; zsh's bashcompinit
				// answers every candidate and lets zsh filter.
				if sh != "zsh" && len(got) != len(c.want) {
					t.Errorf("completing %v: %q, want %q", c.words, got, c.want)
				}
				for _, w := range c.want {
					if !slices.Contains(got, w) {
						t.Errorf("completing %v: %q lacks %q", c.words, got, w)
					}
				}
			}
		})
	}
}

func TestCLISendStdin(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "lines")
	var in strings.Builder
	for i := 1; i <= 23; i++ {
		fmt.Fprintf(&in, "message %d\n", i)
	}
	cmd := exec.Command(sluiceBin.Path(t), "send", "lines")
	cmd.Env = append(os.Environ(), "SLUICE_URL="+e.url)
	cmd.Stdin = strings.NewReader(in.String())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice send lines < 23 lines: %v\n%s", err, errb.String())
	}
	wantContains(t, "stdin send summary", errb.String(), "sent 23 messages to lines in ")
	page, err := e.c.Browse(context.Background(), "lines", sclient.Limit(100))
	if err != nil || len(page.Messages) != 23 || page.Messages[0].Body != "message 1" || page.Messages[22].Body != "message 23" {
		t.Fatalf("after the stdin send: %v, %d messages", err, len(page.Messages))
	}
}

// TestCLISendTTL: send --ttl gives the message its time to live (whole
// seconds, as Sluice.TimeToLive), and one past the queue's retention is
// refused with the broker's reason.
func TestCLISendTTL(t *testing.T) {
	e := setupCLI(t)
	ctx := context.Background()
	e.ok("queue", "create", "jobs", "MessageRetentionPeriod=3600")
	e.ok("send", "jobs", "soon", "--ttl", "90s")
	page, err := e.c.Browse(ctx, "jobs")
	if err != nil || len(page.Messages) != 1 || page.Messages[0].TTL != 90*time.Second {
		t.Fatalf("Browse = %+v, %v; want one message with a time to live of 90 s", page, err)
	}
	e.fails(1, []string{"send", "jobs", "never", "--ttl", "2h"}, "invalid_parameter", "MessageRetentionPeriod")
	// The queue's default, as queue set --ttl gives it.
	e.ok("queue", "set", "jobs", "--ttl", "10m")
	q, err := e.c.GetQueue(ctx, "jobs")
	if err != nil || q.Attributes["MessageTimeToLive"] != "600" {
		t.Fatalf("after queue set --ttl 10m: %v, %v", q.Attributes, err)
	}
	e.fails(1, []string{"queue", "set", "jobs", "--ttl", "2h"}, "invalid_attribute_value", "MessageRetentionPeriod")
}
