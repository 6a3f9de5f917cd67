package native

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/api/apicommon"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("orders", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":5}`,
	})
	id := e.send("orders", map[string]any{
		"body": "order 1",
		"attributes": map[string]any{
			"kind":  map[string]any{"type": "String", "value": "new"},
			"count": map[string]any{"type": "Number", "value": 3},
			"blob":  map[string]any{"type": "Binary", "value": base64.StdEncoding.EncodeToString([]byte{0, 1, 2})},
		},
		"priority": 7, "maxAttempts": 2, "correlationId": "corr-1",
		"traceContext": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	e.clock.Advance(time.Second)
	m := e.receiveOne("orders")
	if m["id"] != id || m["body"] != "order 1" || m["priority"] != float64(7) || m["maxAttempts"] != float64(2) ||
		m["correlationId"] != "corr-1" || m["traceContext"] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" ||
		m["attempts"] != float64(1) || m["receiveCount"] != float64(1) || m["receipt"] == "" {
		t.Fatalf("received %v", m)
	}
	if m["createdAt"] != epoch.Format(time.RFC3339) || m["firstReceivedAt"] != epoch.Add(time.Second).Format(time.RFC3339) ||
		m["lastReceivedAt"] != epoch.Add(time.Second).Format(time.RFC3339) {
		t.Fatalf("times: %v %v %v", m["createdAt"], m["firstReceivedAt"], m["lastReceivedAt"])
	}
	attrs := m["attributes"].(map[string]any)
	if len(attrs) != 3 {
		t.Fatalf("attributes %v: the lifted ones must not be there", attrs)
	}
	if a := attrs["count"].(map[string]any); a["type"] != "Number" || a["value"] != "3" {
		t.Fatalf("count: %v", a)
	}
	if a := attrs["blob"].(map[string]any); a["type"] != "Binary" || a["value"] != "AAEC" {
		t.Fatalf("blob: %v", a)
	}

	// The envelope's fields are the Sluice.* attributes SQS clients see.
	ds := e.browseAll("orders")
	if len(ds) != 1 || ds[0]["state"] != "inflight" || ds[0]["visibleAt"] != epoch.Add(31*time.Second).Format(time.RFC3339) {
		t.Fatalf("browsed: %v", ds)
	}
	// A message without its own limit shows its queue's maxReceiveCount.
	e.send("orders", map[string]any{"body": "order 2"})
	if m := e.receiveOne("orders"); m["maxAttempts"] != float64(5) {
		t.Fatalf("maxAttempts without its own: %v", m["maxAttempts"])
	}

	// The same option twice, as a field and as an attribute, is refused.
	e.fails(400, "invalid_request", "POST", "/v1/queues/orders/messages", map[string]any{
		"body": "x", "priority": 1, "attributes": map[string]any{"Sluice.Priority": map[string]any{"type": "Number", "value": "1"}},
	})
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/orders/messages", map[string]any{"body": "x", "priority": 101})
	e.fails(400, "invalid_request", "POST", "/v1/queues/orders/messages", map[string]any{
		"body": "x", "attributes": map[string]any{"b": map[string]any{"type": "Binary", "value": "not base64!"}},
	})
	e.fails(400, "missing_parameter", "POST", "/v1/queues/orders/messages", map[string]any{"priority": 1})
	e.fails(400, "invalid_message_contents", "POST", "/v1/queues/orders/messages", map[string]any{"body": "\u0001"})
}

// browseAll browses a queue's first page.
func (e *env) browseAll(queue string) []map[string]any {
	e.t.Helper()
	return objects(e.t, e.ok(200, "GET", "/v1/queues/"+queue+"/messages?limit=100", nil)["messages"])
}

func TestSendBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	m := e.ok(200, "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{
		map[string]any{"id": "a", "body": "one"},
		map[string]any{"id": "b", "body": "two", "priority": 500},
		map[string]any{"id": "c", "body": "three", "delaySeconds": 10},
	}})
	rs := objects(t, m["results"])
	if len(rs) != 3 || rs[0]["id"] != "a" || rs[0]["ok"] != true || rs[0]["messageId"] == nil ||
		rs[1]["ok"] != false || rs[1]["error"].(map[string]any)["code"] != "invalid_parameter" || rs[2]["ok"] != true {
		t.Fatalf("results: %v", rs)
	}
	e.wantCounts("q", 1, 0, 1)
	// Without ids, the results are in order and name none.
	m = e.ok(200, "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "x"}, map[string]any{"body": "y"},
	}})
	for _, r := range objects(t, m["results"]) {
		if _, has := r["id"]; has || r["ok"] != true {
			t.Fatalf("results: %v", m)
		}
	}
	e.fails(400, "invalid_request", "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{
		map[string]any{"id": "a", "body": "x"}, map[string]any{"body": "y"},
	}})
	e.fails(400, "empty_batch", "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{}})
	many := make([]any, 11)
	for i := range many {
		many[i] = map[string]any{"body": "x"}
	}
	e.fails(400, "too_many_entries", "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": many})
	e.fails(400, "batch_ids_not_distinct", "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{
		map[string]any{"id": "a", "body": "x"}, map[string]any{"id": "a", "body": "y"},
	}})
	msg := e.fails(400, "missing_parameter", "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{
		map[string]any{"body": "x"}, map[string]any{"priority": 1},
	}})
	if !strings.Contains(msg, "messages[1].body") {
		t.Fatalf("the error does not name the entry: %s", msg)
	}
}

func TestDelays(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	e.createQueue("q.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	// Past SQS's 15 minutes: any time within the retention period.
	e.send("q", map[string]any{"body": "in two hours", "delaySeconds": 7200})
	e.send("q", map[string]any{"body": "tomorrow", "deliverAt": epoch.Add(24 * time.Hour).Format(time.RFC3339)})
	e.send("q", map[string]any{"body": "past", "deliverAt": epoch.Add(-time.Hour).Format(time.RFC3339)})
	e.wantCounts("q", 1, 0, 2)
	m := e.receiveOne("q")
	if m["body"] != "past" {
		t.Fatalf("received %v", m["body"])
	}
	e.ok(204, "POST", "/v1/queues/q/ack", map[string]any{"receipt": m["receipt"]})
	e.clock.Advance(2 * time.Hour)
	if m := e.receiveOne("q"); m["body"] != "in two hours" {
		t.Fatalf("received %v", m["body"])
	}
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/messages", map[string]any{"body": "x", "delaySeconds": 5 * 24 * 3600})
	e.fails(400, "invalid_request", "POST", "/v1/queues/q/messages", map[string]any{"body": "x", "delaySeconds": 1, "deliverAt": epoch.Format(time.RFC3339)})
	e.fails(400, "invalid_request", "POST", "/v1/queues/q/messages", map[string]any{"body": "x", "deliverAt": "tomorrow"})
	// A time far past the retention period is refused as such (the delay
	// to it must not overflow into a negative one).
	msg := e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/messages", map[string]any{"body": "x", "deliverAt": "9999-12-31T23:59:59.5Z"})
	if strings.Contains(msg, "-922") || !strings.Contains(msg, "deliverAt") {
		t.Fatalf("a deliverAt far in the future: %q, want a message about deliverAt", msg)
	}
	// FIFO queues take no per-message delay, as in SQS.
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q.fifo/messages", map[string]any{"body": "x", "groupId": "g", "delaySeconds": 5})
	m = e.ok(201, "POST", "/v1/queues/q.fifo/messages", map[string]any{"body": "x", "groupId": "g"})
	if m["sequenceNumber"] == nil {
		t.Fatalf("a FIFO send answers its sequence number: %v", m)
	}
	if m := e.receiveOne("q.fifo"); m["groupId"] != "g" || m["dedupId"] == nil || m["sequenceNumber"] == nil {
		t.Fatalf("FIFO message: %v", m)
	}
}

func TestReceive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	if ms := e.receive("q", 10); len(ms) != 0 {
		t.Fatalf("an empty queue answered %v", ms)
	}
	for range 3 {
		e.send("q", map[string]any{"body": "x"})
	}
	m := e.ok(200, "POST", "/v1/queues/q/receive", map[string]any{"max": 10, "visibilitySeconds": 5})
	if ms := objects(t, m["messages"]); len(ms) != 3 {
		t.Fatalf("received %d", len(ms))
	}
	e.clock.Advance(5 * time.Second)
	eventually(t, "the leases end", func() bool { return e.stats("q")["visible"] == float64(3) })
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/receive", map[string]any{"max": 11})
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/receive", map[string]any{"waitSeconds": 21})
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/receive", map[string]any{"visibilitySeconds": -1})
	e.fails(400, "invalid_request", "POST", "/v1/queues/q/receive", `{"max":"ten"}`)

	// A long poll wakes at a send.
	e.createQueue("empty", nil)
	done := make(chan response, 1)
	go func() { done <- e.do("POST", "/v1/queues/empty/receive", map[string]any{"waitSeconds": 20, "max": 10}) }()
	eventually(t, "the receive waits", func() bool { return e.h.cfg.Gate.Waiting() == 1 })
	e.send("empty", map[string]any{"body": "wake"})
	if r := <-done; r.status != 200 || len(objects(t, r.json(t)["messages"])) != 1 {
		t.Fatalf("long poll: %d %s", r.status, r.body)
	}
}

func TestWaitingReceiveCap(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *Config) { c.Gate = apicommon.NewGate(1, nil) })
	e.createQueue("q", nil)
	done := make(chan response, 1)
	go func() { done <- e.do("POST", "/v1/queues/q/receive", map[string]any{"waitSeconds": 20}) }()
	eventually(t, "the first receive waits", func() bool { return e.h.cfg.Gate.Waiting() == 1 })
	r := e.do("POST", "/v1/queues/q/receive", map[string]any{"waitSeconds": 5})
	if r.status != 429 || r.header.Get("Retry-After") != "1" || r.json(t)["code"] != "throttled" {
		t.Fatalf("second waiting receive: %d %v %s", r.status, r.header, r.body)
	}
	// A receive that does not wait is still served.
	e.receive("q", 1)
	e.send("q", map[string]any{"body": "wake"})
	if r := <-done; r.status != 200 || len(objects(t, r.json(t)["messages"])) != 1 {
		t.Fatalf("the waiting receive: %d %s", r.status, r.body)
	}
}

func TestDrainEndsWaitingReceives(t *testing.T) {
	t.Parallel()
	drain, cancel := context.WithCancel(context.Background())
	e := setup(t, func(c *Config) { c.Gate = apicommon.NewGate(0, drain) })
	e.createQueue("q", nil)
	done := make(chan response, 1)
	go func() { done <- e.do("POST", "/v1/queues/q/receive", map[string]any{"waitSeconds": 20}) }()
	eventually(t, "the receive waits", func() bool { return e.h.cfg.Gate.Waiting() == 1 })
	cancel()
	if r := <-done; r.status != 200 || len(objects(t, r.json(t)["messages"])) != 0 {
		t.Fatalf("drained receive: %d %s", r.status, r.body)
	}
	e.send("q", map[string]any{"body": "x"})
	if ms := e.receive("q", 1); len(ms) != 0 {
		t.Fatalf("a receive while draining claimed %v", ms)
	}
}

func TestBrowseAndDeleteByID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	var ids []string
	for i, body := range []string{"a", "b", "c", "d"} {
		ids = append(ids, e.send("q", map[string]any{"body": body,
			"attributes": map[string]any{"n": map[string]any{"type": "Number", "value": i % 2}}}))
		e.clock.Advance(time.Second)
	}
	page := e.ok(200, "GET", "/v1/queues/q/messages?limit=3", nil)
	ms := objects(t, page["messages"])
	if len(ms) != 3 || ms[0]["body"] != "a" || ms[0]["state"] != "visible" || page["next"] == nil {
		t.Fatalf("first page: %v", page)
	}
	page = e.ok(200, "GET", "/v1/queues/q/messages?limit=3&cursor="+page["next"].(string), nil)
	if ms := objects(t, page["messages"]); len(ms) != 1 || ms[0]["body"] != "d" {
		t.Fatalf("second page: %v", page)
	}
	if ms := objects(t, e.ok(200, "GET", "/v1/queues/q/messages?order=newest&limit=1", nil)["messages"]); ms[0]["body"] != "d" {
		t.Fatalf("newest first: %v", ms)
	}
	if ms := objects(t, e.ok(200, "GET", "/v1/queues/q/messages?attribute=n&value=1", nil)["messages"]); len(ms) != 2 || ms[0]["body"] != "b" {
		t.Fatalf("filtered: %v", ms)
	}
	e.fails(400, "invalid_parameter", "GET", "/v1/queues/q/messages?order=sideways", nil)
	e.fails(400, "invalid_parameter", "GET", "/v1/queues/q/messages?limit=101", nil)
	e.fails(400, "invalid_request", "GET", "/v1/queues/q/messages?value=1", nil)

	e.ok(204, "DELETE", "/v1/queues/q/messages/"+ids[0], nil)
	e.fails(404, "message_not_found", "DELETE", "/v1/queues/q/messages/"+ids[0], nil)
	m := e.ok(200, "POST", "/v1/queues/q/messages/delete", map[string]any{"ids": []string{ids[1], ids[0]}})
	rs := objects(t, m["results"])
	if rs[0]["deleted"] != true || rs[1]["deleted"] != false || rs[1]["id"] != ids[0] {
		t.Fatalf("delete by ids: %v", rs)
	}
	e.wantCounts("q", 2, 0, 0)
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/messages/delete", map[string]any{"ids": []string{}})
}

func TestConsumerControls(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":5}`,
	})
	e.createQueue("plain", nil)
	receipt := func(q string) string {
		e.t.Helper()
		e.send(q, map[string]any{"body": "x"})
		return e.receiveOne(q)["receipt"].(string)
	}

	// extend: the lease runs on.
	r := receipt("q")
	e.ok(204, "POST", "/v1/queues/q/extend", map[string]any{"receipt": r, "visibilitySeconds": 600})
	e.clock.Advance(60 * time.Second)
	e.wantCounts("q", 0, 1, 0)
	e.fails(400, "missing_parameter", "POST", "/v1/queues/q/extend", map[string]any{"receipt": r})
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/extend", map[string]any{"receipt": r, "visibilitySeconds": 0})
	e.fails(400, "unknown_field", "POST", "/v1/queues/q/extend", map[string]any{"receipt": r, "visibilitySeconds": 5, "reason": "x"})
	// nack with a delay and a reason: delayed, the reason kept.
	e.ok(204, "POST", "/v1/queues/q/nack", map[string]any{"receipt": r, "reason": "db down", "delaySeconds": 30})
	e.wantCounts("q", 0, 0, 1)
	if ms := e.browseAll("q"); ms[0]["failureReason"] != "db down" || ms[0]["state"] != "delayed" {
		t.Fatalf("after nack: %v", ms)
	}
	// The nacked receipt is stale now.
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/extend", map[string]any{"receipt": r, "visibilitySeconds": 5})
	e.clock.Advance(30 * time.Second)
	// snooze: delayed without counting an attempt.
	m := e.receiveOne("q")
	if m["attempts"] != float64(2) {
		t.Fatalf("attempts after a nack: %v", m)
	}
	e.ok(204, "POST", "/v1/queues/q/snooze", map[string]any{"receipt": m["receipt"], "delaySeconds": 60})
	e.wantCounts("q", 0, 0, 1)
	e.clock.Advance(60 * time.Second)
	m = e.receiveOne("q")
	if m["attempts"] != float64(2) || m["receiveCount"] != float64(3) {
		t.Fatalf("after a snooze: attempts %v, receiveCount %v", m["attempts"], m["receiveCount"])
	}
	// release: back at once.
	e.ok(204, "POST", "/v1/queues/q/release", map[string]any{"receipt": m["receipt"]})
	e.wantCounts("q", 1, 0, 0)
	// dead-letter now, with its reason.
	m = e.receiveOne("q")
	e.ok(204, "POST", "/v1/queues/q/dead-letter", map[string]any{"receipt": m["receipt"], "reason": "cannot parse"})
	e.wantCounts("q", 0, 0, 0)
	dl := objects(t, e.ok(200, "GET", "/v1/queues/q/dead-letters", nil)["messages"])
	if len(dl) != 1 || dl[0]["failureReason"] != "cannot parse" || dl[0]["deadLetterSource"] != "q" {
		t.Fatalf("dead letters: %v", dl)
	}
	e.fails(409, "conflict", "POST", "/v1/queues/plain/dead-letter", map[string]any{"receipt": receipt("plain")})
	e.fails(409, "conflict", "GET", "/v1/queues/plain/dead-letters", nil)

	// Batches: per-entry results, in order.
	r1, r2 := receipt("plain"), receipt("plain")
	m = e.ok(200, "POST", "/v1/queues/plain/extend", map[string]any{"entries": []any{
		map[string]any{"id": "one", "receipt": r1, "visibilitySeconds": 100},
		map[string]any{"id": "bad", "receipt": "nonsense", "visibilitySeconds": 100},
	}})
	rs := objects(t, m["results"])
	if rs[0]["id"] != "one" || rs[0]["ok"] != true || rs[1]["ok"] != false || rs[1]["error"].(map[string]any)["code"] != "invalid_receipt" {
		t.Fatalf("extend batch: %v", rs)
	}
	m = e.ok(200, "POST", "/v1/queues/plain/ack", map[string]any{"entries": []any{
		map[string]any{"receipt": r1}, map[string]any{"receipt": r2},
	}})
	for _, r := range objects(t, m["results"]) {
		if r["ok"] != true {
			t.Fatalf("ack batch: %v", m)
		}
	}
	e.wantCounts("plain", 0, 1, 0) // the one whose dead-letter was refused
	e.fails(400, "invalid_request", "POST", "/v1/queues/plain/ack", map[string]any{"receipt": r1, "entries": []any{map[string]any{"receipt": r1}}})
	e.fails(400, "missing_parameter", "POST", "/v1/queues/plain/ack", map[string]any{})
	e.fails(400, "invalid_receipt", "POST", "/v1/queues/plain/ack", map[string]any{"receipt": "nonsense"})
	// An ack of a stale receipt succeeds without effect, as in SQS.
	e.ok(204, "POST", "/v1/queues/plain/ack", map[string]any{"receipt": r1})
	// A lease that ended answers 409.
	r = receipt("plain")
	e.clock.Advance(31 * time.Second)
	eventually(t, "the leases end", func() bool { return e.stats("plain")["visible"] == float64(2) })
	e.fails(409, "message_not_in_flight", "POST", "/v1/queues/plain/extend", map[string]any{"receipt": r, "visibilitySeconds": 5})
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	redrive := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`}
	e.createQueue("a", redrive)
	e.createQueue("b", redrive)
	fail := func(q, body, reason string) string {
		t.Helper()
		id := e.send(q, map[string]any{"body": body, "correlationId": "c-" + body})
		m := e.receiveOne(q)
		e.ok(204, "POST", "/v1/queues/"+q+"/nack", map[string]any{"receipt": m["receipt"], "reason": reason})
		return id
	}
	a1 := fail("a", "a1", "timeout")
	fail("a", "a2", "bad input")
	b1 := fail("b", "b1", "timeout")
	if s := e.stats("a"); s["deadLetters"] != float64(3) {
		t.Fatalf("deadLetters counts the dead-letter queue: %v", s)
	}
	// A source's dead letters are its own, even in a shared dead-letter queue.
	page := e.ok(200, "GET", "/v1/queues/a/dead-letters", nil)
	dl := objects(t, page["messages"])
	if page["queue"] != "dlq" || len(dl) != 2 || dl[0]["id"] != a1 || dl[0]["correlationId"] != "c-a1" || dl[0]["attempts"] != float64(1) {
		t.Fatalf("dead letters of a: %v", page)
	}
	if dl := objects(t, e.ok(200, "GET", "/v1/queues/a/dead-letters?reason=input", nil)["messages"]); len(dl) != 1 || dl[0]["body"] != "a2" {
		t.Fatalf("dead letters of a by reason: %v", dl)
	}
	// Replaying all of a's would move b's too: refused.
	e.fails(409, "conflict", "POST", "/v1/queues/a/dead-letters/replay", nil)
	// A chosen id of b's dead letter, replayed through a's route, goes back
	// to b: never into a.
	e.ok(202, "POST", "/v1/queues/a/dead-letters/replay", map[string]any{"ids": []string{b1}})
	eventually(t, "the chosen replay completes", func() bool {
		rs := objects(t, e.ok(200, "GET", "/v1/queues/a/dead-letters/replays?limit=1", nil)["replays"])
		return len(rs) == 1 && rs[0]["status"] == "COMPLETED"
	})
	if inA, inB := e.browseAll("a"), e.browseAll("b"); len(inA) != 0 || len(inB) != 1 || inB[0]["body"] != "b1" {
		t.Fatalf("b's dead letter replayed through a's route: a holds %v, b holds %v; want it back in b", inA, inB)
	}
	e.ok(204, "DELETE", "/v1/queues/b/messages/"+e.browseAll("b")[0]["id"].(string), nil)
	b2 := fail("b", "b2", "timeout")
	m := e.ok(200, "POST", "/v1/queues/b/dead-letters/delete", map[string]any{"ids": []string{b2}})
	if objects(t, m["results"])[0]["deleted"] != true {
		t.Fatalf("delete: %v", m)
	}
	e.ok(204, "DELETE", "/v1/queues/b", nil)
	task := e.ok(202, "POST", "/v1/queues/a/dead-letters/replay", map[string]any{"maxPerSecond": 100})
	if task["source"] != "dlq" || task["destination"] != "a" || task["status"] != "RUNNING" || task["maxPerSecond"] != float64(100) {
		t.Fatalf("replay: %v", task)
	}
	eventually(t, "the replay completes", func() bool {
		rs := objects(t, e.ok(200, "GET", "/v1/queues/a/dead-letters/replays?limit=1", nil)["replays"])
		return len(rs) == 1 && rs[0]["status"] == "COMPLETED" && rs[0]["destination"] == "a"
	})
	ms := e.browseAll("a")
	if len(ms) != 2 || ms[0]["body"] != "a1" || ms[0]["correlationId"] != "c-a1" || ms[0]["attempts"] != float64(0) || ms[0]["id"] == a1 {
		t.Fatalf("replayed: %v", ms)
	}
}

// TestEditAndReplay: an edit-and-replay moves the chosen dead letters with
// the edit, and a dead letter whose edited form does not fit its
// destination stays, counted as skipped in the task.
func TestEditAndReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{"MaximumMessageSize": "1024",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`})
	var ids []string
	for _, body := range []string{"fix me", "too big once edited"} {
		ids = append(ids, e.send("q", map[string]any{"body": body, "correlationId": "c-" + body}))
		m := e.receiveOne("q")
		e.ok(204, "POST", "/v1/queues/q/dead-letter", map[string]any{"receipt": m["receipt"], "reason": "bad"})
	}
	task := e.ok(202, "POST", "/v1/queues/q/dead-letters/replay", map[string]any{"ids": ids[:1], "body": "fixed"})
	if task["skipped"] != float64(0) {
		t.Fatalf("a replay's task shows skipped: %v", task)
	}
	eventually(t, "the first replay completes", func() bool {
		rs := objects(t, e.ok(200, "GET", "/v1/queues/q/dead-letters/replays?limit=1", nil)["replays"])
		return len(rs) == 1 && rs[0]["status"] == "COMPLETED"
	})
	e.ok(202, "POST", "/v1/queues/q/dead-letters/replay", map[string]any{"ids": ids[1:], "body": strings.Repeat("x", 2000)})
	var last map[string]any
	eventually(t, "the second replay completes", func() bool {
		rs := objects(t, e.ok(200, "GET", "/v1/queues/q/dead-letters/replays?limit=1", nil)["replays"])
		last = rs[0]
		return rs[0]["status"] == "COMPLETED"
	})
	if last["moved"] != float64(0) || last["skipped"] != float64(1) || last["toMove"] != float64(1) {
		t.Fatalf("the replay whose edit does not fit: %v, want moved 0, skipped 1", last)
	}
	ms := e.browseAll("q")
	if len(ms) != 1 || ms[0]["body"] != "fixed" || ms[0]["correlationId"] != "c-fix me" {
		t.Fatalf("replayed: %v", ms)
	}
	if dl := objects(t, e.ok(200, "GET", "/v1/queues/q/dead-letters", nil)["messages"]); len(dl) != 1 || dl[0]["id"] != ids[1] {
		t.Fatalf("the skipped dead letter stays: %v", dl)
	}
}
