package embedded

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// TestGroupCommit shows that concurrent senders share WAL syncs: 32 senders
// each doing single-message sends (each answered only after a sync) need
// fewer syncs than sends.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	e := setup(t) // a real directory: syncs take real time, so they batch
	e.createQueue("q", nil)
	const senders, perSender = 32, 40
	before := e.be.fs.syncs.Load()
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				res, err := e.b.Send(context.Background(), "q", []model.SendEntry{{Body: fmt.Sprintf("%d-%d", s, i)}})
				if err == nil {
					err = res[0].Err
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	syncs := e.be.fs.syncs.Load() - before
	sends := senders * perSender
	ratio := float64(sends) / float64(max(syncs, 1))
	t.Logf("group commit: %d sends, %d WAL syncs, %.1f sends/sync with %d concurrent senders", sends, syncs, ratio, senders)
	if syncs == 0 {
		t.Fatal("no WAL syncs counted: sends are not durable or the counter is broken")
	}
	if ratio <= 1 {
		t.Fatalf("sends/sync = %.2f, want > 1 (group commit)", ratio)
	}
	e.wantStats("q", model.QueueStats{Visible: int64(sends)})
}

// TestEveryChangeSyncs shows that each kind of state change is synced before
// it returns (one caller at a time: one sync each).
func TestEveryChangeSyncs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	step := func(what string, f func()) {
		t.Helper()
		before := e.be.fs.syncs.Load()
		f()
		if e.be.fs.syncs.Load() == before {
			t.Errorf("%s returned without a WAL sync", what)
		}
	}
	step("create queue", func() { e.createQueue("q", nil) })
	step("send", func() { e.send("q", "a", "b") })
	var ds []model.Delivery
	step("receive", func() { ds = e.receive("q", 2, 30e9) })
	step("change visibility", func() {
		if _, err := e.b.ChangeVisibility(ctx, "q", []model.VisibilityEntry{{Receipt: ds[0].Receipt, Timeout: 60e9}}); err != nil {
			t.Fatal(err)
		}
	})
	step("delete", func() {
		if _, err := e.b.Delete(ctx, "q", []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil {
			t.Fatal(err)
		}
	})
	step("set attributes", func() {
		if err := e.b.SetQueueAttributes(ctx, "q", map[string]string{"DelaySeconds": "1"}); err != nil {
			t.Fatal(err)
		}
	})
	step("purge", func() {
		if err := e.b.PurgeQueue(ctx, "q"); err != nil {
			t.Fatal(err)
		}
	})
	step("delete queue", func() {
		if err := e.b.DeleteQueue(ctx, "q"); err != nil {
			t.Fatal(err)
		}
	})
}
