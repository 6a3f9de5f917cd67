package embedded

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// TestLookupLetsGoOfTheLock: LookupMessage looks through a queue in chunks,
// letting go of the lock between them; sends and deletes by id running
// meanwhile (run with -race) neither hide a message that stays nor show
// one deleted, and a queue deleted meanwhile is not found.
func TestLookupLetsGoOfTheLock(t *testing.T) {
	defer func(n int) { lookupChunk = n }(lookupChunk)
	lookupChunk = 7
	ctx := context.Background()
	b, err := Open(Config{Dir: t.TempDir(), Options: storage.Options{Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ref := model.QueueRef{Name: "q"}
	if _, _, err := b.CreateQueue(ctx, storage.QueueSpec{QueueRef: ref, Config: model.DefaultQueueConfig(false)}); err != nil {
		t.Fatal(err)
	}
	send := func(n int) []string {
		var ids []string
		for i := 0; i < n; i += 10 {
			var es []model.SendEntry
			for j := 0; j < 10; j++ {
				es = append(es, model.SendEntry{ID: fmt.Sprint(j), Body: "x"})
			}
			rs, err := b.Send(ctx, ref, es)
			if err != nil {
				t.Error(err)
				return ids
			}
			for _, r := range rs {
				ids = append(ids, r.MessageID)
			}
		}
		return ids
	}
	stay, gone := send(200), send(200)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // meanwhile: sends, and deletes of the other ids
		defer wg.Done()
		for i := 0; i < len(gone); i += 20 {
			send(20)
			if _, err := b.DeleteMessages(ctx, ref, gone[i:i+20]); err != nil {
				t.Error(err)
			}
		}
	}()
	for _, id := range stay {
		l, err := b.LookupMessage(ctx, ref, id)
		if err != nil || l.Live == nil || l.Live.ID != id {
			t.Fatalf("LookupMessage(%s) = %+v, %v; want the live message", id, l, err)
		}
	}
	wg.Wait()
	for _, id := range gone[:5] {
		if l, err := b.LookupMessage(ctx, ref, id); err != nil || l.Live != nil || l.Record != nil {
			t.Fatalf("LookupMessage(%s) of a deleted message = %+v, %v; want nothing", id, l, err)
		}
	}
	// A queue deleted while a look is under way.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := b.DeleteQueue(ctx, ref); err != nil {
			t.Error(err)
		}
	}()
	for range 50 {
		_, err := b.LookupMessage(ctx, ref, model.NewMessageID())
		if err != nil {
			if !errors.Is(err, model.ErrQueueDoesNotExist) {
				t.Fatalf("LookupMessage on a queue being deleted: %v", err)
			}
			break
		}
	}
	wg.Wait()
}

// TestSalvageKeepsMessageRecords: a salvage copies a queue's message
// records, so that a completed message's status survives it.
func TestSalvageKeepsMessageRecords(t *testing.T) {
	ctx := context.Background()
	dir, to := t.TempDir(), filepath.Join(t.TempDir(), "salvaged")
	b, err := Open(Config{Dir: dir, Options: storage.Options{Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	ref := model.QueueRef{Name: "q"}
	cfg := model.DefaultQueueConfig(false)
	cfg.CompletedRetention = time.Hour
	if _, _, err := b.CreateQueue(ctx, storage.QueueSpec{QueueRef: ref, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	rs, err := b.Send(ctx, ref, []model.SendEntry{{ID: "a", Body: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive = %d, %v", len(ds), err)
	}
	r, err := b.Receipts().Decode(ds[0].Receipt)
	if err != nil {
		t.Fatal(err)
	}
	result := "done"
	if _, err := b.Delete(ctx, ref, []model.Receipt{r}, []*string{&result}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Salvage(ctx, dir, to, nil, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	b, err = Open(Config{Dir: to, Options: storage.Options{Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err := b.LookupMessage(ctx, ref, rs[0].MessageID)
	if err != nil || l.Record == nil || l.Record.Result == nil || *l.Record.Result != result {
		t.Fatalf("LookupMessage after a salvage = %+v, %v; want the completed record", l, err)
	}
}
