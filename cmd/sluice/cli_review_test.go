package main

import (
	"context"
	"errors"
	"fmt"
	sclient "github.com/sluicemq/sluice/client"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// failWriter refuses every write (a full disk, a closed pipe).
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestCLIRecvAckUnprinted: recv --ack must not delete messages whose
// printing failed: they were never handed to the reader.
func TestCLIRecvAckUnprinted(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "unprinted")
	for _, b := range []string{"a", "b", "c"} {
		e.ok("send", "unprinted", b)
	}
	for _, args := range [][]string{
		{"recv", "unprinted", "--max", "3", "--ack", "--visibility", "1h"},
		{"recv", "unprinted", "--max", "3", "--ack", "--visibility", "1h", "--json"},
	} {
		var errb testutil.Buffer
		env := func(k string) string {
			if k == "SLUICE_URL" {
				return e.url
			}
			return ""
		}
		code := run(context.Background(), args, env, failWriter{}, &errb)
		if code == 0 {
			t.Errorf("sluice %s with a failing stdout: exit 0\nstderr: %s", strings.Join(args, " "), errb.String())
		}
		s, err := e.c.Stats(context.Background(), "unprinted")
		if err != nil {
			t.Fatal(err)
		}
		if s.Depth != 3 {
			t.Fatalf("sluice %s with a failing stdout: depth %d after, want 3 (unprinted messages acked)\nstderr: %s", strings.Join(args, " "), s.Depth, errb.String())
		}
		wantContains(t, "stderr", errb.String(), "not acked")
		// Make them visible again for the next run.
		e.ok("queue", "purge", "unprinted")
		for _, b := range []string{"a", "b", "c"} {
			e.ok("send", "unprinted", b)
		}
	}
}

// TestCLISendFromExportBadLine: a bad line of an export is reported with its
// number and the rest are sent, as the other failed lines are; the lines
// before it in the same batch are not silently dropped.
func TestCLISendFromExportBadLine(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "badline")
	lines := []string{
		`{"id":"1","body":"one"}`,
		`{"id":"2","body":"two"}`,
		`{"id":"3","body":"three"}`,
		`not json`,
		`{"id":"5","body":"five"}`,
	}
	path := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("send", "badline", "--from-export", path)
	if r.code != 1 {
		t.Errorf("exit %d, want 1\nstderr: %s", r.code, r.stderr)
	}
	wantContains(t, "stderr", r.stderr, "line 4")
	s, err := e.c.Stats(context.Background(), "badline")
	if err != nil {
		t.Fatal(err)
	}
	if s.Depth != 4 {
		t.Errorf("depth %d, want 4 (every good line sent)\nstderr: %s", s.Depth, r.stderr)
	}
}

// TestCLISendBatchFailureSaysWhereToResume: a bulk send whose request fails
// says how many were sent and from which line to send again.
func TestCLISendBatchFailureSaysWhereToResume(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb testutil.Buffer
	env := func(string) string { return "" }
	// Port 1 on loopback: nothing listens there.
	code := run(context.Background(), []string{"send", "q", "--lines", path, "--url", "http://127.0.0.1:1"}, env, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d, want 1\nstderr: %s", code, errb.String())
	}
	wantContains(t, "stderr", errb.String(), "0 messages sent before line 1", "send again from line 1")
}

// TestCLIRecvErrorAfterSomeReceived: when a later receive of a recv --max
// fails, the messages already received (and leased) are printed, not
// hidden until their visibility timeout ends.
func TestCLIRecvErrorAfterSomeReceived(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "halfway")
	for i := range 12 {
		e.ok("send", "halfway", fmt.Sprintf("m%d", i))
	}
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var receives atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/receive") && receives.Add(1) > 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"code":"invalid_parameter","message":"injected failure"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	var out, errb testutil.Buffer
	env := func(string) string { return "" }
	code := run(context.Background(), []string{"recv", "halfway", "--max", "20", "--visibility", "1h", "--json", "--url", proxy.URL}, env, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d, want 1\nstderr: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), `"body"`); n != 10 {
		t.Errorf("printed %d messages, want the 10 received before the failure\nstdout: %s\nstderr: %s", n, out.String(), errb.String())
	}
	wantContains(t, "stderr", errb.String(), "injected failure")
}

// TestCLIMaxOutOfRange: peek and dlq list refuse a --max below 1 (0 said
// "no message" of a queue that had some; a negative one listed them all).
func TestCLIMaxOutOfRange(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "maxed")
	e.ok("send", "maxed", "x")
	for _, args := range [][]string{
		{"peek", "maxed", "--max", "0"},
		{"peek", "maxed", "--max", "-1"},
		{"dlq", "list", "maxed", "--max", "0"},
	} {
		e.fails(2, args, "--max must be at least 1")
	}
}

// TestCLISendLinesFifoDedup: a bulk send to a FIFO queue with --dedup stores
// every line (each gets the id with its line number), rather than one line
// and the rest dropped as duplicates while reported sent.
func TestCLISendLinesFifoDedup(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "lines.fifo", "--fifo")
	path := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.ok("send", "lines.fifo", "--lines", path, "--group", "g", "--dedup", "run1")
	s, err := e.c.Stats(context.Background(), "lines.fifo")
	if err != nil {
		t.Fatal(err)
	}
	if s.Depth != 3 {
		t.Fatalf("depth %d after sending 3 lines with --dedup, want 3", s.Depth)
	}
	// The same file again within the deduplication window: nothing new.
	e.ok("send", "lines.fifo", "--lines", path, "--group", "g", "--dedup", "run1")
	if s, _ := e.c.Stats(context.Background(), "lines.fifo"); s.Depth != 3 {
		t.Fatalf("depth %d after sending the same lines again, want 3 (deduplicated)", s.Depth)
	}
}

// TestCLIReplayTaskVanishes: dlq replay stops following a task that the
// broker no longer lists (it followed it forever).
func TestCLIReplayTaskVanishes(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "gone-dlq")
	e.ok("queue", "create", "gone", "--dlq", "gone-dlq", "--max-receives", "3")
	e.deadLetters("gone", []sclient.Message{{Body: "x"}, {Body: "y"}}, []string{"a", "b"})
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/dead-letters/replays") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"replays":[]}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb testutil.Buffer
	code := run(ctx, []string{"dlq", "replay", "gone", "--rate", "1", "--url", proxy.URL}, func(string) string { return "" }, &out, &errb)
	if ctx.Err() != nil {
		t.Fatalf("dlq replay still following a task the broker does not list after 20 s\nstderr: %s", errb.String())
	}
	if code != 1 {
		t.Errorf("exit %d, want 1\nstderr: %s", code, errb.String())
	}
	wantContains(t, "stderr", errb.String(), "no longer among", "--status")
}

// TestCLIDeleteFromExport: after an export, dlq delete --from-export deletes
// the exported dead letters only; one that arrived after the export stays
// (the documented "export && delete --all" lost it).
func TestCLIDeleteFromExport(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "arch-dlq")
	e.ok("queue", "create", "arch", "--dlq", "arch-dlq", "--max-receives", "3")
	e.deadLetters("arch", []sclient.Message{{Body: "x"}, {Body: "y"}}, []string{"a", "b"})
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	e.ok("dlq", "export", "arch", "--out", path)
	e.deadLetters("arch", []sclient.Message{{Body: "late"}}, []string{"c"})
	e.ok("dlq", "delete", "arch", "--from-export", path)
	page, err := e.c.DeadLetters(context.Background(), "arch")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].Body != "late" {
		t.Fatalf("dead letters after delete --from-export: %+v, want the late one only", page.Messages)
	}
	e.fails(2, []string{"dlq", "delete", "arch", "--all", "--from-export", path}, "give one of")
}
