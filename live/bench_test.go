package live_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/live"
)

// BenchmarkSample1000Queues is one tick with 1,000 queues holding messages:
// one AllStats read, the rates, health, history and the JSON encoding.
func BenchmarkSample1000Queues(b *testing.B) {
	_, lv := setup1000(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lv.Sample(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStats1000Queues is one GET /v1/stats with 1,000 queues: the
// snapshot's JSON as encoded at the last tick (no broker read).
func BenchmarkStats1000Queues(b *testing.B) {
	tb, _ := setup1000(b)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(tb.URL + "/v1/stats")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.SetBytes(n)
	}
}

func setup1000(b *testing.B) (*testbroker.Broker, *live.Live) {
	b.Helper()
	clock := clocktest.NewFakeClock(epoch)
	tb, lv := setup(b, clock, nil)
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("queue-%04d", i)
		if _, err := tb.Front.CreateQueue(context.Background(), name, nil, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := tb.Front.Send(context.Background(), name, []model.SendEntry{{Body: "x"}}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := lv.Sample(context.Background()); err != nil {
		b.Fatal(err)
	}
	return tb, lv
}
