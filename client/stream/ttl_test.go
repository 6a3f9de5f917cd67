package stream_test

import (
	"testing"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testbroker"
)

// TestTimeToLive: a publish's ttl_seconds is stored as Sluice.TimeToLive
// and delivered as the message's ttl_seconds (not among its attributes);
// one longer than the queue's retention is refused with invalid_parameter,
// and the others of its publish are stored.
func TestTimeToLive(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", map[string]string{"MessageRetentionPeriod": "3600"})
	pub := e.publisher()
	defer pub.Close(e.ctx)
	ttl, long := int32(600), int32(3601)
	res, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: "a", TtlSeconds: &ttl}, &streampb.Envelope{Body: "b", TtlSeconds: &long})
	if err != nil || len(res) != 2 || res[0].Err != nil || !hasCode(res[1].Err, "invalid_parameter") {
		t.Fatalf("publish: %v %+v", err, res)
	}
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: 1})
	m, err := con.Receive(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetBody() != "a" || m.GetTtlSeconds() != 600 || len(m.GetAttributes()) != 0 {
		t.Fatalf("delivered %q with ttl_seconds %d and attributes %v; want a, 600, none", m.GetBody(), m.GetTtlSeconds(), m.GetAttributes())
	}
	if err := con.Ack(e.ctx, m.GetReceipt()); err != nil {
		t.Fatal(err)
	}
}
