package native

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/testutil"
)

// A request whose client went away (its context cancelled during a long
// poll) is logged at debug level as abandoned, not as an error.
func TestRequestLogClientGone(t *testing.T) {
	t.Parallel()
	var buf testutil.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := setup(t, func(c *Config) { c.Logger = logger })
	if _, err := e.b.CreateQueue(context.Background(), "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is gone before the broker answers
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/queues/q/receive", strings.NewReader(`{"waitSeconds":5}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code < 500 {
		t.Fatalf("status %d, want a 5xx for the abandoned request (body %s)", w.Code, w.Body)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] == "ERROR" {
			t.Fatalf("an abandoned request was logged as an error: %v", rec)
		}
		if rec["msg"] == "request abandoned: the client went away" && rec["level"] == "DEBUG" && rec["queue"] == "q" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no debug record of the abandoned request:\n%s", buf.String())
	}
}
