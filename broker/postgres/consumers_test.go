package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestConsumersListedAcrossBrokers: a stream open on one broker is in the
// consumer list of every broker on the store (its heartbeat records it),
// and leaves it when it ends.
func TestConsumersListedAcrossBrokers(t *testing.T) {
	t.Parallel()
	a, b, _ := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	c, err := a.Consume(ctx, broker.ConsumerConfig{Queue: "q", Credit: 3, ClientName: "payroll-1", RemoteAddr: "10.0.0.7:5000"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mine, err := a.Consumers(ctx, "q")
	if err != nil || len(mine) != 1 || mine[0].ID != c.ID() {
		t.Fatalf("the broker's own list: %+v, %v", mine, err)
	}
	var seen []broker.ConsumerInfo
	testutil.Eventually(t, 10*time.Second, "the other broker lists the stream", func() bool {
		seen, err = b.Consumers(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		return len(seen) == 1
	})
	if got := seen[0]; got.ID != c.ID() || got.Broker != mine[0].Broker || got.Broker == "" || got.ClientName != "payroll-1" ||
		got.RemoteAddr != "10.0.0.7:5000" || got.Credit != 3 || got.Queue != "q" {
		t.Fatalf("the other broker lists %+v; the stream's broker %+v", got, mine[0])
	}
	// A's own list has it once, not also from the store.
	if mine, err := a.Consumers(ctx, "q"); err != nil || len(mine) != 1 {
		t.Fatalf("the stream's broker lists %+v, %v", mine, err)
	}
	c.Close()
	testutil.Eventually(t, 10*time.Second, "the ended stream leaves the other broker's list", func() bool {
		seen, err = b.Consumers(ctx, "q")
		return err == nil && len(seen) == 0
	})
}

// TestConsumerRecordsExpire: the records of a broker that stops its
// heartbeat (killed) are listed until their time to live has passed, and
// the next record of any broker forgets them.
func TestConsumerRecordsExpire(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	clock := clocktest.NewFakeClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	cfg := testConfig(url, schemaFor(t))
	cfg.Clock = clock
	be, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	ctx := context.Background()
	q := model.QueueRef{Account: "000000000000", Name: "q"}
	rec := func(id string) model.ConsumerRecord {
		return model.ConsumerRecord{Ref: q, Info: model.ConsumerInfo{ID: id, Broker: "dead", Queue: "q", Credit: 5,
			ConnectedAt: clock.Now().UTC(), Lease: time.Minute}}
	}
	if err := be.RecordConsumers(ctx, "dead", []model.ConsumerRecord{rec("s1"), rec("s2")}, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	other := model.ConsumerRecord{Ref: model.QueueRef{Account: q.Account, Name: "other"}, Info: model.ConsumerInfo{ID: "s3", Broker: "alive"}}
	if err := be.RecordConsumers(ctx, "alive", []model.ConsumerRecord{other}, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := be.ListConsumers(ctx, q)
	if err != nil || len(got) != 2 || got[0].Credit != 5 || got[0].Lease != time.Minute || !got[0].ConnectedAt.Equal(clock.Now()) {
		t.Fatalf("listed %+v, %v", got, err)
	}
	clock.Advance(16 * time.Second)
	if got, err := be.ListConsumers(ctx, q); err != nil || len(got) != 0 {
		t.Fatalf("after their time to live: %+v, %v", got, err)
	}
	// "alive" records again (nothing now): its own rows go, the others' stay.
	if err := be.RecordConsumers(ctx, "alive", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, err := be.ListConsumers(ctx, other.Ref); err != nil || len(got) != 0 {
		t.Fatalf("a broker's empty record left %+v, %v", got, err)
	}
}
