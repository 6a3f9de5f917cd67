package native

import (
	"strings"
	"testing"
	"time"
)

// TestRateLimits: MaxInFlight and MaxReceivesPerSecond through the native
// API: "" on a plain queue, set at creation and by PATCH, removed with "",
// honoured by its receives (fewer messages or none, never an error), and
// bad values refused with invalid_attribute_value saying what is allowed.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("plain", nil)
	attrs := e.ok(200, "GET", "/v1/queues/plain", nil)["attributes"].(map[string]any)
	if v, ok := attrs["MaxInFlight"]; !ok || v != "" {
		t.Fatalf("MaxInFlight on a plain queue: %v (present %v), want \"\"", v, ok)
	}
	if v, ok := attrs["MaxReceivesPerSecond"]; !ok || v != "" {
		t.Fatalf("MaxReceivesPerSecond on a plain queue: %v (present %v), want \"\"", v, ok)
	}

	e.createQueue("jobs", map[string]string{"MaxInFlight": "2", "MaxReceivesPerSecond": "5.0"})
	attrs = e.ok(200, "GET", "/v1/queues/jobs", nil)["attributes"].(map[string]any)
	if attrs["MaxInFlight"] != "2" || attrs["MaxReceivesPerSecond"] != "5" {
		t.Fatalf("after create: %v", attrs)
	}
	for range 8 {
		e.send("jobs", map[string]any{"body": "job"})
	}
	if ms := e.receive("jobs", 10); len(ms) != 2 {
		t.Fatalf("a receive of 10 under MaxInFlight 2 got %d", len(ms))
	}
	if ms := e.receive("jobs", 10); len(ms) != 0 {
		t.Fatalf("a receive at the cap got %d", len(ms))
	}
	q := e.ok(200, "PATCH", "/v1/queues/jobs", map[string]any{"attributes": map[string]string{"MaxInFlight": ""}})
	if a := q["attributes"].(map[string]any); a["MaxInFlight"] != "" || a["MaxReceivesPerSecond"] != "5" {
		t.Fatalf("after removing MaxInFlight: %v", a)
	}
	// The rate: 5 a second, of which the 2 above took two.
	if ms := e.receive("jobs", 10); len(ms) != 3 {
		t.Fatalf("the rest of the burst of 5: got %d, want 3", len(ms))
	}
	e.clock.Advance(200 * time.Millisecond)
	if ms := e.receive("jobs", 10); len(ms) != 1 {
		t.Fatalf("200 ms later at 5 a second: got %d, want 1", len(ms))
	}
	e.wantCounts("jobs", 2, 6, 0)

	for _, c := range []struct{ attr, value, says string }{
		{"MaxInFlight", "0", "between 1 and 120000"},
		{"MaxInFlight", "-1", "between 1 and 120000"},
		{"MaxReceivesPerSecond", "-2", "above 0 and at most 100000"},
		{"MaxReceivesPerSecond", "1e6", "above 0 and at most 100000"},
	} {
		msg := e.fails(400, "invalid_attribute_value", "PATCH", "/v1/queues/jobs", map[string]any{"attributes": map[string]string{c.attr: c.value}})
		if !strings.Contains(msg, c.attr) || !strings.Contains(msg, c.says) {
			t.Errorf("%s=%s: %q, want it to name the attribute and say %q", c.attr, c.value, msg, c.says)
		}
	}
	e.fails(400, "invalid_attribute_value", "POST", "/v1/queues", map[string]any{"name": "bad",
		"attributes": map[string]string{"MaxReceivesPerSecond": "0"}})
}
