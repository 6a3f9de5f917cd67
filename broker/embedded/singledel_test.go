package embedded

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// TestDeletedBodyLeavesNoTombstone: a message sent, received and deleted
// before its memtable is flushed leaves nothing of its body in a table file
// (the body's set and single delete vanish together in the flush), only its
// metadata's tombstone (with an ordinary delete, the flushed table holds a
// tombstone in the body range: this test failed so); and a body that
// reached a table file before its delete is gone, tombstone and all, once
// a compaction has met the two (a sanity check: a compaction into the
// bottom level drops an ordinary delete's tombstone too).
func TestDeletedBodyLeavesNoTombstone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	q := e.createQueue("q", nil)
	body := strings.Repeat("b", 1024)
	ctx := context.Background()
	drain := func() {
		for {
			ds := e.receive("q", 10, time.Minute)
			if len(ds) == 0 {
				return
			}
			entries := make([]model.DeleteEntry, len(ds))
			for i, d := range ds {
				entries[i] = model.DeleteEntry{ID: d.ID, Receipt: d.Receipt}
			}
			errs, err := e.b.Delete(ctx, "q", entries)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	bodyTables := func() int {
		lo, hi := kindRange(q.ID, kindBody)
		levels, err := e.be.db.SSTables(pebble.WithKeyRangeFilter(lo, hi))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tables := range levels {
			n += len(tables)
		}
		return n
	}
	send := func(n int) {
		for range n / 10 {
			bodies := make([]string, 10)
			for i := range bodies {
				bodies[i] = body
			}
			e.send("q", bodies...)
		}
	}

	send(200)
	drain()
	if err := e.be.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := bodyTables(); n != 0 {
		t.Errorf("sent and deleted within a memtable: %d table files hold body records, want 0", n)
	}

	send(200)
	if err := e.be.db.Flush(); err != nil { // the bodies reach a table file
		t.Fatal(err)
	}
	if n := bodyTables(); n == 0 {
		t.Fatal("no table file holds the flushed bodies: the test does not see body records")
	}
	drain()
	if err := e.be.db.Flush(); err != nil {
		t.Fatal(err)
	}
	lo, hi := kindRange(q.ID, kindBody)
	if err := e.be.db.Compact(ctx, lo, hi, false); err != nil {
		t.Fatal(err)
	}
	if n := bodyTables(); n != 0 {
		t.Errorf("bodies flushed, then deleted, then compacted: %d table files hold body records, want 0", n)
	}
	e.wantStats("q", model.QueueStats{})
}
