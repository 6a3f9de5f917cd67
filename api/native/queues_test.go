package native

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestQueueLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	q := e.ok(200, "POST", "/v1/queues", map[string]any{
		"name": "orders", "attributes": map[string]string{"VisibilityTimeout": "45", "MaxDepth": "100"},
		"tags": map[string]string{"team": "shop"},
	})
	if q["name"] != "orders" || q["fifo"] != false || q["arn"] != "arn:aws:sqs:us-east-1:000000000000:orders" {
		t.Fatalf("created queue: %v", q)
	}
	attrs := q["attributes"].(map[string]any)
	for k, want := range map[string]string{
		"VisibilityTimeout": "45", "MaxDepth": "100", "Paused": "false", "DeliveryMode": "at-least-once",
		"LowPriorityMaxDepth": "0", "RetryPolicy": "", "DeadLetterWebhook": "", "DelaySeconds": "0",
		"HealthDepth": "", "HealthAge": "",
	} {
		if attrs[k] != want {
			t.Errorf("attribute %s = %v, want %q", k, attrs[k], want)
		}
	}
	if q["tags"].(map[string]any)["team"] != "shop" {
		t.Errorf("tags: %v", q["tags"])
	}
	// The same create again answers the queue; another value is a conflict.
	e.ok(200, "POST", "/v1/queues", map[string]any{"name": "orders", "attributes": map[string]string{"VisibilityTimeout": "45"}})
	e.fails(409, "queue_exists", "POST", "/v1/queues", map[string]any{"name": "orders", "attributes": map[string]string{"VisibilityTimeout": "46"}})

	q = e.ok(200, "PATCH", "/v1/queues/orders", map[string]any{"attributes": map[string]string{"VisibilityTimeout": "60"}})
	if q["attributes"].(map[string]any)["VisibilityTimeout"] != "60" {
		t.Fatalf("after PATCH: %v", q["attributes"])
	}
	e.fails(400, "invalid_attribute_value", "PATCH", "/v1/queues/orders", map[string]any{"attributes": map[string]string{"VisibilityTimeout": "-1"}})
	// The health thresholds: set, read back, refused when out of order.
	q = e.ok(200, "PATCH", "/v1/queues/orders", map[string]any{"attributes": map[string]string{"HealthDepth": "10, 100", "HealthAge": "30,90"}})
	if a := q["attributes"].(map[string]any); a["HealthDepth"] != "10,100" || a["HealthAge"] != "30,90" {
		t.Fatalf("after PATCH of the health thresholds: %v", a)
	}
	e.fails(400, "invalid_attribute_value", "PATCH", "/v1/queues/orders", map[string]any{"attributes": map[string]string{"HealthAge": "90,30"}})
	e.fails(400, "invalid_attribute_value", "PATCH", "/v1/queues/orders", map[string]any{"attributes": map[string]string{"HealthDepth": "many"}})
	e.fails(400, "invalid_attribute_name", "PATCH", "/v1/queues/orders", map[string]any{"attributes": map[string]string{"Nope": "1"}})
	e.fails(400, "missing_parameter", "PATCH", "/v1/queues/orders", map[string]any{})

	q = e.ok(200, "POST", "/v1/queues/orders/pause", nil)
	if q["attributes"].(map[string]any)["Paused"] != "true" {
		t.Fatalf("after pause: %v", q["attributes"])
	}
	q = e.ok(200, "POST", "/v1/queues/orders/resume", "{}")
	if q["attributes"].(map[string]any)["Paused"] != "false" {
		t.Fatalf("after resume: %v", q["attributes"])
	}
	e.fails(400, "unknown_field", "POST", "/v1/queues/orders/pause", `{"really":true}`)

	e.send("orders", map[string]any{"body": "a"})
	e.wantCounts("orders", 1, 0, 0)
	e.ok(204, "POST", "/v1/queues/orders/purge", nil)
	e.wantCounts("orders", 0, 0, 0)

	e.ok(204, "DELETE", "/v1/queues/orders", nil)
	e.fails(404, "queue_not_found", "GET", "/v1/queues/orders", nil)
	e.fails(404, "queue_not_found", "DELETE", "/v1/queues/orders", nil)
	e.fails(404, "queue_not_found", "POST", "/v1/queues/orders/messages", map[string]any{"body": "x"})
}

// TestQueueRetrySchedule: the native API sets and reads RetryPolicy's
// schedule form as the SQS protocols do, normalized, and refuses a bad one
// with invalid_attribute_value and the reason.
func TestQueueRetrySchedule(t *testing.T) {
	t.Parallel()
	e := setup(t)
	q := e.ok(200, "POST", "/v1/queues", map[string]any{
		"name": "payments", "attributes": map[string]string{"RetryPolicy": `{"delays":["10",60,300]}`},
	})
	if got := q["attributes"].(map[string]any)["RetryPolicy"]; got != `{"delays":[10,60,300],"jitter":"none"}` {
		t.Fatalf("RetryPolicy after create = %v", got)
	}
	q = e.ok(200, "PATCH", "/v1/queues/payments", map[string]any{"attributes": map[string]string{"RetryPolicy": `{"delays":[10,60,300],"jitter":"up"}`}})
	if got := q["attributes"].(map[string]any)["RetryPolicy"]; got != `{"delays":[10,60,300],"jitter":"up"}` {
		t.Fatalf("RetryPolicy after PATCH = %v", got)
	}
	for v, reason := range map[string]string{
		`{"delays":[10],"baseSeconds":2}`: "delays cannot be given with baseSeconds or maxSeconds",
		`{"delays":[0]}`:                  "each must be an integer from 1 to 43200",
		`{"delays":[10],"jitter":"half"}`: "jitter must be full, equal, none or up",
	} {
		msg := e.fails(400, "invalid_attribute_value", "PATCH", "/v1/queues/payments", map[string]any{"attributes": map[string]string{"RetryPolicy": v}})
		if !strings.Contains(msg, reason) {
			t.Errorf("PATCH RetryPolicy=%s: %q, want it to say %q", v, msg, reason)
		}
	}
	q = e.ok(200, "GET", "/v1/queues/payments", nil)
	if got := q["attributes"].(map[string]any)["RetryPolicy"]; got != `{"delays":[10,60,300],"jitter":"up"}` {
		t.Fatalf("RetryPolicy after the refusals = %v", got)
	}
}

func TestListQueuesPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range 5 {
		e.createQueue(fmt.Sprintf("jobs-%d", i), nil)
	}
	e.createQueue("other", nil)
	e.send("jobs-1", map[string]any{"body": "x"})

	var names []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("too many pages")
		}
		m := e.ok(200, "GET", "/v1/queues?prefix=jobs-&limit=2&after="+after, nil)
		for _, q := range objects(t, m["queues"]) {
			names = append(names, q["name"].(string))
			if q["name"] == "jobs-1" && q["stats"].(map[string]any)["visible"] != float64(1) {
				t.Errorf("jobs-1 stats: %v", q["stats"])
			}
		}
		next, _ := m["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if fmt.Sprint(names) != "[jobs-0 jobs-1 jobs-2 jobs-3 jobs-4]" {
		t.Fatalf("listed %v", names)
	}
	e.fails(400, "invalid_parameter", "GET", "/v1/queues?limit=0", nil)
	e.fails(400, "invalid_parameter", "GET", "/v1/queues?limit=x", nil)
	e.fails(400, "unknown_field", "GET", "/v1/queues?prefx=jobs", nil)
	e.fails(400, "invalid_request", "GET", "/v1/queues?limit=1&limit=2", nil)
}

func TestStats(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("work", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":3}`,
		"MaxDepth":      "2",
	})
	e.createQueue("plain", nil)
	if s := e.stats("plain"); s["deadLetters"] != nil {
		t.Fatalf("a queue without a dead-letter queue has deadLetters %v, want null", s["deadLetters"])
	}
	e.send("work", map[string]any{"body": "a"})
	e.clock.Advance(90 * time.Second)
	e.send("work", map[string]any{"body": "b", "delaySeconds": 60})
	e.receiveOne("work")
	s := e.stats("work")
	want := map[string]float64{"visible": 0, "inFlight": 1, "delayed": 1, "depth": 2, "oldestAgeSeconds": 90, "deadLetters": 0}
	for k, v := range want {
		if s[k] != v {
			t.Errorf("stats %s = %v, want %v (%v)", k, s[k], v, s)
		}
	}
	// A full queue refuses with 429, Retry-After, and counts the refusal.
	r := e.do("POST", "/v1/queues/work/messages", map[string]any{"body": "c"})
	if r.status != 429 || r.header.Get("Retry-After") != "1" || r.json(t)["code"] != "queue_full" {
		t.Fatalf("send to a full queue: %d %v %s", r.status, r.header, r.body)
	}
	if refused := e.stats("work")["refused"].(map[string]any); refused["max_depth"] != float64(1) {
		t.Fatalf("refused: %v", refused)
	}
}
