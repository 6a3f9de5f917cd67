package native

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

func TestBadRequests(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.MaxBodyBytes = 1 << 20 })
	e.createQueue("q", nil)
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		code, mentions     string
	}{
		{"malformed", "POST", "/v1/queues/q/messages", `{"body":`, 400, "malformed_json", ""},
		{"syntax", "POST", "/v1/queues/q/messages", `{"body" "x"}`, 400, "malformed_json", "byte"},
		{"trailing", "POST", "/v1/queues/q/messages", `{"body":"x"} {}`, 400, "malformed_json", "more than one"},
		{"not an object", "POST", "/v1/queues/q/messages", `[1]`, 400, "invalid_request", "object"},
		{"empty body", "POST", "/v1/queues/q/messages", "", 400, "malformed_json", ""},
		{"unknown field", "POST", "/v1/queues/q/messages", `{"body":"x","bdy":"y"}`, 400, "unknown_field", `"bdy"`},
		{"wrong type", "POST", "/v1/queues/q/messages", `{"body":1}`, 400, "invalid_request", "body"},
		{"nested wrong type", "POST", "/v1/queues/q/messages", `{"body":"x","attributes":{"a":{"type":"String","value":{}}}}`, 400, "invalid_request", ""},
		{"invalid UTF-8", "POST", "/v1/queues/q/messages", "{\"body\":\"\xff\"}", 400, "malformed_json", "UTF-8"},
		{"lone surrogate", "POST", "/v1/queues/q/messages", `{"body":"a\ud800b"}`, 400, "malformed_json", "surrogate"},
		{"too large", "POST", "/v1/queues/q/messages", `{"body":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "too_large", ""},
		{"unknown queue", "GET", "/v1/queues/nope", nil, 404, "queue_not_found", ""},
		{"bad queue name", "POST", "/v1/queues", `{"name":"a b"}`, 400, "invalid_parameter", ""},
		{"no route", "GET", "/v1/nothing", nil, 404, "no_such_route", ""},
		{"no route under a queue", "POST", "/v1/queues/q/frobnicate", nil, 404, "no_such_route", ""},
		{"method", "PUT", "/v1/queues/q", nil, 405, "method_not_allowed", ""},
		{"query on a body route", "POST", "/v1/queues/q/messages?x=1", `{"body":"x"}`, 400, "unknown_field", `"x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := e.fails(c.status, c.code, c.method, c.path, c.body)
			if !strings.Contains(msg, c.mentions) {
				t.Errorf("message %q does not mention %q", msg, c.mentions)
			}
		})
	}
	r := e.do("PUT", "/v1/queues/q", nil)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "PATCH") || !strings.Contains(allow, "DELETE") {
		t.Errorf("405 Allow: %q", allow)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q", ct)
	}
	// An escaped surrogate pair is text: it is taken.
	e.send("q", map[string]any{"body": "\U0001F600"})
	e.ok(201, "POST", "/v1/queues/q/messages", `{"body":"\ud83d\ude00 \\ud800"}`)
}

// TestErrorTable checks the table: the statuses the issue names (404, 409,
// 429 for a full queue, 503, 500 without its cause) and no code twice.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{model.QueueNotFoundError(), 404, "queue_not_found"},
		{model.Errorf(model.ErrQueueExists, "x"), 409, "queue_exists"},
		{model.Errorf(model.ErrConflict, "x"), 409, "conflict"},
		{&model.DepthError{Queue: "q", Depth: 3, Limit: 3}, 429, "queue_full"},
		{model.ClosedError(), 503, "unavailable"},
		{model.StoreFullError(10<<20, 64<<20), 503, "store_full"},
		{errors.New("disk on fire"), 500, "internal"},
	} {
		body, k := errorOf(c.err)
		if k.status != c.status || body.Code != c.code {
			t.Errorf("%v: %d %s, want %d %s", c.err, k.status, body.Code, c.status, c.code)
		}
		if k.status == 500 && strings.Contains(body.Message, "disk") {
			t.Errorf("an internal error shows its cause: %q", body.Message)
		}
	}
	seen := map[string]bool{}
	for _, row := range errorTable {
		if seen[row.kind.code] {
			t.Errorf("code %s twice in the table", row.kind.code)
		}
		seen[row.kind.code] = true
		if row.kind.status < 400 || http.StatusText(row.kind.status) == "" {
			t.Errorf("%s: status %d", row.kind.code, row.kind.status)
		}
	}
}
