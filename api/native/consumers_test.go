package native_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
)

// getJSON answers a GET of the broker's path: the status and the body as a
// JSON object.
func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("GET %s: %d, not a JSON object: %s", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// TestConsumersListsOpenStreams: GET /v1/queues/{queue}/consumers on a real
// broker lists a stream a real stream client (client/stream) opened, with
// what it holds and acked, and forgets it when the stream closes; an unknown
// queue is the API's 404.
func TestConsumersListsOpenStreams(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, testbroker.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func(queue string) (int, map[string]any) {
		return getJSON(t, b.URL+"/v1/queues/"+queue+"/consumers")
	}
	if _, err := b.Front.CreateQueue(ctx, "jobs", map[string]string{"VisibilityTimeout": "40"}, nil); err != nil {
		t.Fatal(err)
	}
	if status, out := list("jobs"); status != 200 || out["consumers"] == nil || len(out["consumers"].([]any)) != 0 {
		t.Fatalf("no stream yet: %d %v, want 200 and an empty list", status, out)
	}

	sc, err := stream.Dial(b.URL, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	pub, err := sc.Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close(ctx)
	for _, body := range []string{"a", "b", "c"} {
		if _, err := pub.Publish(ctx, "jobs", &streampb.Envelope{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now().UTC()
	con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 2, MaxHold: 10 * time.Minute, ClientName: "invoicer"})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	m, err := con.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := con.Ack(ctx, m.GetReceipt()); err != nil {
		t.Fatal(err)
	}

	// After the ack the stream's free credit takes the third message: it
	// holds two (the credit), acked one.
	var c map[string]any
	testutil.Eventually(t, 10*time.Second, "the stream listed holding 2, acked 1", func() bool {
		status, out := list("jobs")
		cs, _ := out["consumers"].([]any)
		if status != 200 || len(cs) != 1 {
			t.Fatalf("one stream open: %d %v", status, out)
		}
		c = cs[0].(map[string]any)
		return c["held"] == float64(2) && c["acked"] == float64(1)
	})
	if c["id"] != con.ID() || c["broker"] == "" || c["broker"] == nil || c["clientName"] != "invoicer" || c["credit"] != float64(2) ||
		c["leaseSeconds"] != float64(40) || c["maxHoldSeconds"] != float64(600) {
		t.Errorf("the stream: %v; want id %s, a broker, clientName invoicer, credit 2, leaseSeconds 40 (the queue's), maxHoldSeconds 600", c, con.ID())
	}
	if rate, ok := c["ackedPerSecond"].(float64); !ok || rate <= 0 {
		t.Errorf("ackedPerSecond %v after an ack, want > 0", c["ackedPerSecond"])
	}
	if host, _, err := net.SplitHostPort(c["remoteAddress"].(string)); err != nil || host != "127.0.0.1" {
		t.Errorf("remoteAddress %q, want 127.0.0.1:PORT", c["remoteAddress"])
	}
	connected, err1 := time.Parse(time.RFC3339Nano, c["connectedAt"].(string))
	active, err2 := time.Parse(time.RFC3339Nano, c["lastActiveAt"].(string))
	if err1 != nil || err2 != nil || connected.Location() != time.UTC || connected.Before(before.Add(-time.Second)) || active.Before(connected) {
		t.Errorf("connectedAt %v, lastActiveAt %v: want RFC 3339 UTC times, from the open on, lastActiveAt not before connectedAt", c["connectedAt"], c["lastActiveAt"])
	}

	if err := con.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the closed stream unlisted", func() bool {
		_, out := list("jobs")
		cs, _ := out["consumers"].([]any)
		return len(cs) == 0
	})

	if status, out := list("nope"); status != 404 || out["code"] != "queue_not_found" || out["message"] == "" {
		t.Errorf("an unknown queue: %d %v, want 404 queue_not_found with a message", status, out)
	}
	if status, out := getJSON(t, b.URL+"/v1/queues/jobs/consumers?limit=1"); status != 400 || out["code"] != "unknown_field" {
		t.Errorf("a query parameter: %d %v, want 400 unknown_field", status, out)
	}
}
