package native

import (
	"strings"
	"testing"
	"time"
)

// TestStandardDedup: the native dedupId on a standard queue (an idempotent
// send, single and batch), DeduplicationUntil=settled, and the two
// attributes read with their defaults, set, and refused in the API's shape.
func TestStandardDedup(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("payments", nil)
	q := e.ok(200, "GET", "/v1/queues/payments", nil)
	attrs := q["attributes"].(map[string]any)
	if attrs["DeduplicationWindowSeconds"] != "300" || attrs["DeduplicationUntil"] != "window" {
		t.Fatalf("the defaults: %v", attrs)
	}
	first := e.send("payments", map[string]any{"body": `{"charge":100}`, "dedupId": "charge-42"})
	if again := e.send("payments", map[string]any{"body": `{"charge":100}`, "dedupId": "charge-42"}); again != first {
		t.Fatalf("the repeated send answered %s, want %s", again, first)
	}
	b := e.ok(200, "POST", "/v1/queues/payments/messages/batch", map[string]any{"messages": []map[string]any{
		{"id": "a", "body": "x", "dedupId": "charge-42"},
		{"id": "b", "body": "y", "dedupId": "charge-43"},
	}})
	res := objects(t, b["results"])
	if len(res) != 2 || res[0]["messageId"] != first || res[1]["messageId"] == first || res[1]["ok"] != true {
		t.Fatalf("batch results %v, want a = %s", res, first)
	}
	e.wantCounts("payments", 2, 0, 0)
	if m := e.receiveOne("payments"); m["dedupId"] == nil {
		t.Fatalf("a standard message with a dedup id: %v", m)
	}

	// Unique jobs: a queued message holds its id past the window.
	q = e.ok(200, "PATCH", "/v1/queues/payments", map[string]any{"attributes": map[string]string{
		"DeduplicationWindowSeconds": "60", "DeduplicationUntil": "settled"}})
	attrs = q["attributes"].(map[string]any)
	if attrs["DeduplicationWindowSeconds"] != "60" || attrs["DeduplicationUntil"] != "settled" {
		t.Fatalf("after PATCH: %v", attrs)
	}
	job := e.send("payments", map[string]any{"body": "nightly report", "dedupId": "report-2024-06-01"})
	e.clock.Advance(10 * time.Minute)
	if again := e.send("payments", map[string]any{"body": "nightly report", "dedupId": "report-2024-06-01"}); again != job {
		t.Fatalf("a settled id past its window answered %s, want %s", again, job)
	}

	for _, bad := range []map[string]string{
		{"DeduplicationWindowSeconds": "59"},
		{"DeduplicationWindowSeconds": "86401"},
		{"DeduplicationUntil": "never"},
	} {
		e.fails(400, "invalid_attribute_value", "PATCH", "/v1/queues/payments", map[string]any{"attributes": bad})
	}
	msg := e.fails(400, "invalid_attribute_value", "POST", "/v1/queues", map[string]any{"name": "p.fifo",
		"attributes": map[string]string{"FifoQueue": "true", "DeduplicationWindowSeconds": "600"}})
	if !strings.Contains(msg, "standard queues only") {
		t.Fatalf("the window on a FIFO queue: %q", msg)
	}
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/payments/messages", map[string]any{"body": "x", "dedupId": "has space"})
}
