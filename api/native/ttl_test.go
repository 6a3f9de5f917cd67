package native

import (
	"strings"
	"testing"
	"time"
)

// TestTimeToLive: the native ttlSeconds (stored as Sluice.TimeToLive and
// answered as its own field), the queue attributes MessageTimeToLive and
// ExpiredMessageAction with their defaults, an expired message dropped or
// dead-lettered with the reason "expired", and the refusals in the API's
// shape.
func TestTimeToLive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("jobs", map[string]string{"MessageRetentionPeriod": "3600"})
	attrs := e.ok(200, "GET", "/v1/queues/jobs", nil)["attributes"].(map[string]any)
	if attrs["MessageTimeToLive"] != "0" || attrs["ExpiredMessageAction"] != "drop" {
		t.Fatalf("the defaults of a queue without a RedrivePolicy: %v", attrs)
	}
	e.send("jobs", map[string]any{"body": "short", "ttlSeconds": 10})
	e.send("jobs", map[string]any{"body": "long", "ttlSeconds": 3600})
	page := e.ok(200, "GET", "/v1/queues/jobs/messages", nil)
	for _, m := range objects(t, page["messages"]) {
		want := map[string]float64{"short": 10, "long": 3600}[m["body"].(string)]
		if m["ttlSeconds"] != want {
			t.Errorf("%s: ttlSeconds %v, want %v", m["body"], m["ttlSeconds"], want)
		}
		if _, ok := m["attributes"].(map[string]any)["Sluice.TimeToLive"]; ok {
			t.Errorf("%s: the attributes still hold Sluice.TimeToLive: %v", m["body"], m["attributes"])
		}
	}
	e.clock.Advance(10 * time.Second)
	eventually(t, "the short one expired", func() bool { return e.stats("jobs")["visible"] == float64(1) })
	if m := e.receiveOne("jobs"); m["body"] != "long" {
		t.Fatalf("received %v, want the long one", m["body"])
	}

	// With a RedrivePolicy the default is dead-letter, and a dead letter
	// says why.
	q := e.ok(200, "PATCH", "/v1/queues/jobs", map[string]any{"attributes": map[string]string{
		"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":5}`,
		"MessageTimeToLive": "60",
	}})
	attrs = q["attributes"].(map[string]any)
	if attrs["MessageTimeToLive"] != "60" || attrs["ExpiredMessageAction"] != "dead-letter" {
		t.Fatalf("after PATCH: %v", attrs)
	}
	id := e.send("jobs", map[string]any{"body": "default"})
	e.clock.Advance(time.Minute)
	eventually(t, "the message dead-lettered", func() bool { return e.stats("dlq")["visible"] == float64(1) })
	dead := objects(t, e.ok(200, "GET", "/v1/queues/jobs/dead-letters", nil)["messages"])
	if len(dead) != 1 || dead[0]["id"] != id || dead[0]["failureReason"] != "expired" {
		t.Fatalf("dead letters %v, want %s with the reason expired", dead, id)
	}

	// Refusals.
	for _, c := range []struct {
		env  map[string]any
		code string
		says string
	}{
		{map[string]any{"body": "x", "ttlSeconds": 3601}, "invalid_parameter", "MessageRetentionPeriod (3600 seconds)"},
		{map[string]any{"body": "x", "ttlSeconds": 0}, "invalid_parameter", "from 1 to 1209600"},
		{map[string]any{"body": "x", "ttlSeconds": 30, "delaySeconds": 30}, "invalid_parameter", "longer than the message's delay"},
		{map[string]any{"body": "x", "delaySeconds": 60}, "invalid_parameter", "shorter than the queue's MessageTimeToLive (60 seconds)"},
		{map[string]any{"body": "x", "ttlSeconds": 30, "attributes": map[string]any{"Sluice.TimeToLive": map[string]any{"type": "Number", "value": "30"}}},
			"invalid_request", "either as field ttlSeconds or as attribute Sluice.TimeToLive"},
	} {
		msg := e.fails(400, c.code, "POST", "/v1/queues/jobs/messages", c.env)
		if !strings.Contains(msg, c.says) {
			t.Errorf("send %v: %q, want it to say %q", c.env, msg, c.says)
		}
	}
	b := e.ok(200, "POST", "/v1/queues/jobs/messages/batch", map[string]any{"messages": []map[string]any{
		{"id": "a", "body": "x", "ttlSeconds": 120},
		{"id": "b", "body": "y", "ttlSeconds": 4000},
	}})
	res := objects(t, b["results"])
	if len(res) != 2 || res[0]["ok"] != true || res[1]["ok"] != false || res[1]["error"].(map[string]any)["code"] != "invalid_parameter" {
		t.Fatalf("batch results %v, want a ok and b refused", res)
	}
	for _, bad := range []map[string]string{
		{"MessageTimeToLive": "3601"},
		{"MessageTimeToLive": "1209601"},
		{"MessageRetentionPeriod": "59"},
		{"MessageRetentionPeriod": "60", "MessageTimeToLive": "61"},
		{"ExpiredMessageAction": "archive"},
	} {
		e.fails(400, "invalid_attribute_value", "PATCH", "/v1/queues/jobs", map[string]any{"attributes": bad})
	}
	msg := e.fails(400, "invalid_attribute_value", "POST", "/v1/queues", map[string]any{"name": "nodlq",
		"attributes": map[string]string{"ExpiredMessageAction": "dead-letter"}})
	if !strings.Contains(msg, "needs a RedrivePolicy") {
		t.Fatalf("dead-letter without a RedrivePolicy: %q", msg)
	}
}
