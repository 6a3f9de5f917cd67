package native_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/api/native"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/server"
)

// docHost is the address the examples of docs/api.md name.
const docHost = "http://127.0.0.1:9324"

// block is one fenced block of a Markdown file.
type block struct {
	lang, text string
	line       int
}

// fencedBlocks returns the ``` blocks of a Markdown text, in order.
func fencedBlocks(doc string) []block {
	var out []block
	var cur *block
	sc := bufio.NewScanner(strings.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimPrefix(trimmed, "```"), line: n}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// TestDocsExamples runs the sh blocks of docs/api.md in order against a
// real broker (the server over the embedded backend, on a random port):
// each must exit 0, with every curl failing on an HTTP error status, and
// print only JSON. Values of earlier answers go to the later blocks as the
// shell variables the page names (RECEIPT, RECEIPT2, MESSAGE_ID,
// DEAD_LETTER_ID). Every route must be called, successfully, by some
// example; the json blocks must parse.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh is not installed: the curl examples need a POSIX shell")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (apt-get install curl): the examples of docs/api.md are not run")
	}
	if help, err := exec.Command("curl", "--help", "all").Output(); err != nil || !bytes.Contains(help, []byte("--fail-with-body")) {
		t.Skip("this curl has no --fail-with-body (curl 7.76 or later has): the examples of docs/api.md are not run")
	}
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	lv, err := live.New(live.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Options: storage.Options{Logger: log, Observer: lv}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := broker.New(backend, broker.Config{Logger: log, Observer: lv, BackupDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = log
	cfg.Live = lv // the dashboard's routes (GET /v1/stats, ...)
	srv, err := server.New(cfg, front)
	if err != nil {
		t.Fatal(err)
	}
	// The server's own handler behind a recorder of the routes called.
	routes := http.NewServeMux()
	for _, p := range native.RoutePatterns() {
		routes.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	var mu sync.Mutex
	called := map[string]bool{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := routes.Handler(r)
		rec := &apicommon.StatusWriter{ResponseWriter: w}
		srv.Handler().ServeHTTP(rec, r)
		if pattern != "" && rec.Status < 300 {
			mu.Lock()
			called[pattern] = true
			mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := front.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	vars := map[string]string{}
	ran := 0
	for _, b := range fencedBlocks(string(doc)) {
		switch b.lang {
		case "json":
			if !json.Valid([]byte(b.text)) {
				t.Errorf("docs/api.md:%d: the json block does not parse:\n%s", b.line, b.text)
			}
			continue
		case "sh":
		default:
			continue
		}
		ran++
		// Every curl fails on an HTTP error status, and shows its body.
		script := "curl() { command curl --fail-with-body \"$@\"; }\n" + strings.ReplaceAll(b.text, docHost, ts.URL)
		cmd := exec.Command(sh, "-e", "-c", script)
		cmd.Env = os.Environ()
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("docs/api.md:%d: the example failed (%v):\n%s\nstdout: %s\nstderr: %s", b.line, err, b.text, stdout.Bytes(), stderr.Bytes())
		}
		dec := json.NewDecoder(&stdout)
		for {
			var v any
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("docs/api.md:%d: the example printed something that is not JSON (%v):\n%s\nstdout: %s", b.line, err, b.text, stdout.Bytes())
			}
			if obj, ok := v.(map[string]any); ok {
				takeVars(vars, obj)
			}
		}
	}
	if ran == 0 {
		t.Fatal("docs/api.md has no sh block")
	}
	for _, p := range native.RoutePatterns() {
		if !called[p] {
			t.Errorf("no example of docs/api.md calls %s successfully", p)
		}
	}
}

// takeVars sets the examples' variables from one answer: the receipts of a
// receive, the id of a single send, the first dead letter of a dead-letter
// browse.
func takeVars(vars map[string]string, obj map[string]any) {
	msgs, _ := obj["messages"].([]any)
	first := func(i int) map[string]any {
		if i < len(msgs) {
			m, _ := msgs[i].(map[string]any)
			return m
		}
		return nil
	}
	switch {
	case first(0) != nil && first(0)["receipt"] != nil:
		vars["RECEIPT"], _ = first(0)["receipt"].(string)
		if m := first(1); m != nil {
			vars["RECEIPT2"], _ = m["receipt"].(string)
		}
	case first(0) != nil && first(0)["deadLetterSource"] != nil:
		vars["DEAD_LETTER_ID"], _ = first(0)["id"].(string)
	case len(obj) <= 2 && obj["id"] != nil && (len(obj) == 1 || obj["sequenceNumber"] != nil):
		vars["MESSAGE_ID"], _ = obj["id"].(string)
	}
}
