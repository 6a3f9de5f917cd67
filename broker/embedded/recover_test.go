package embedded

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// indexDump describes a queue's index in a form two indexes can be
// compared by: the heaps in the order they pop, the counters, the map, the
// fair-queue state and the FIFO groups.
func indexDump(q *queue) string {
	var b strings.Builder
	// Sorted copies by each heap's order, which is the order it pops in
	// (sort.Slice swaps with its own swapper: the positions stay as they are).
	ready := slices.Clone(q.ready)
	sort.Slice(ready, ready.Less)
	fmt.Fprint(&b, "ready:")
	for _, m := range ready {
		fmt.Fprintf(&b, " %d/%d/%d/%d", m.key, m.priority, m.turn, m.visibleAt)
	}
	timed := slices.Clone(q.timed)
	sort.Slice(timed, timed.Less)
	fmt.Fprint(&b, "\ntimed:")
	for _, m := range timed {
		fmt.Fprintf(&b, " %d/%d/%d/%d", m.key, m.state, m.turn, m.visibleAt)
	}
	age := slices.Clone(q.age)
	sort.Slice(age, age.Less)
	fmt.Fprint(&b, "\nage:")
	for _, m := range age {
		fmt.Fprintf(&b, " %d", m.key)
	}
	keys := make([]uint64, 0, len(q.msgs))
	for k, m := range q.msgs {
		if m.key != k {
			fmt.Fprintf(&b, "\nmap: %d holds %d", k, m.key)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintf(&b, "\nmap: %v\ninflight %d delayed %d doomed %d\n", keys, q.inflight, q.delayed, len(q.doomed))
	for _, p := range slices.Sorted(func(yield func(int) bool) {
		for p := range q.fair {
			if !yield(p) {
				return
			}
		}
	}) {
		lvl := q.fair[p]
		fmt.Fprintf(&b, "fair %d: cursor %d", p, lvl.cursor)
		for _, t := range slices.Sorted(func(yield func(string) bool) {
			for t := range lvl.tenants {
				if !yield(t) {
					return
				}
			}
		}) {
			fmt.Fprintf(&b, " %s=%d/%d", t, lvl.tenants[t].last, lvl.tenants[t].live)
		}
		b.WriteByte('\n')
	}
	if q.fifo != nil {
		ids := make([]string, 0, len(q.fifo.groups))
		for id := range q.fifo.groups {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			g := q.fifo.groups[id]
			fmt.Fprintf(&b, "group %s: inflight %d queued %v pending", id, g.inflight, g.queued)
			for _, m := range g.pending {
				fmt.Fprintf(&b, " %d", m.key)
			}
			b.WriteByte('\n')
		}
		avail := slices.Clone(q.fifo.avail)
		sort.Slice(avail, avail.Less)
		fmt.Fprint(&b, "avail:")
		for _, e := range avail {
			fmt.Fprintf(&b, " %s@%d", e.g.id, e.head)
		}
	}
	return b.String()
}

// addOneByOne is the index of q's stored messages built as recover built it
// before load: each record read in key order and added with add, then
// promoted.
func addOneByOne(t *testing.T, b *Backend, rec queueRecord, now int64) *queue {
	t.Helper()
	q := newQueue(rec)
	lo, hi := kindRange(rec.ID, kindMeta)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		m, err := decodeMeta(u64(k[len(k)-8:]), it.Value())
		if err != nil {
			t.Fatal(err)
		}
		q.add(m, math.MinInt64)
	}
	q.promote(now)
	return q
}

// TestRecoverLoadMatchesAdd checks that recover's index (read in parallel
// slices, heaps built at once) is the index that adding each message in key
// order builds: same pop orders, counters, fair turns and FIFO groups, over
// standard and FIFO queues with priorities, tenants, delays, leases held and
// leases ended while the broker was down. (No lease ends on its last
// attempt here: the sweeper would move it right after the restart, and the
// index would no longer be the one recover built.)
func TestRecoverLoadMatchesAdd(t *testing.T) {
	defer func(v uint64) { scanParallelMin = v }(scanParallelMin)
	scanParallelMin = 1 // every queue read in several slices
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(5))

	e := setup(t)
	ctx := context.Background()
	e.createQueue("std", map[string]string{"VisibilityTimeout": "30"})
	e.createQueue("dlq", nil)
	e.createQueue("redrive", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"3"}`})
	e.createQueue("f.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	e.createQueue("empty", nil)
	delay := 10 * time.Second
	for i := range 300 {
		entry := model.SendEntry{Body: fmt.Sprint("m", i), GroupID: fmt.Sprint("t", i%7)}
		if p := i % 3; p != 0 {
			entry.Attributes = map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: fmt.Sprint(p)}}
		}
		if i%11 == 0 {
			entry.Delay = &delay
		}
		for _, queue := range []string{"std", "redrive"} {
			if res, err := e.b.Send(ctx, queue, []model.SendEntry{entry}); err != nil || res[0].Err != nil {
				t.Fatalf("send: %v %v", err, res)
			}
		}
		fe := model.SendEntry{Body: fmt.Sprint("f", i), GroupID: fmt.Sprint("g", i%5)}
		if res, err := e.b.Send(ctx, "f.fifo", []model.SendEntry{fe}); err != nil || res[0].Err != nil {
			t.Fatalf("send fifo: %v %v", err, res)
		}
	}
	e.receive("std", 10, 5*time.Second)   // leases that end while the broker is down
	e.receive("std", 10, time.Hour)       // leases still held after the restart
	e.receive("redrive", 10, time.Second) // ended, planned by the redrive policy
	e.receive("f.fifo", 10, 5*time.Second)
	e.receive("f.fifo", 10, time.Hour)
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(7 * time.Second) // the 5 s leases ended; the 10 s delays did not
	e.open()

	b := e.be
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queues) != 5 {
		t.Fatalf("%d queues recovered, want 5", len(b.queues))
	}
	now := b.now()
	for ref, q := range b.queues {
		for i, m := range q.age {
			if int(m.agePos) != i {
				t.Errorf("queue %s: age[%d] has agePos %d", ref.Name, i, m.agePos)
			}
		}
		got := indexDump(q)
		want := indexDump(addOneByOne(t, b, q.queueRecord, now))
		if got != want {
			t.Errorf("queue %s: index after recover\n%s\nwant (added one by one)\n%s", ref.Name, got, want)
		}
		if ref.Name != "empty" && ref.Name != "dlq" && len(q.msgs) == 0 {
			t.Errorf("queue %s: no message recovered", ref.Name)
		}
	}
}

// TestRecoverRestoresGCPercent: recover pauses the collector's pacing and
// gives the process back the setting it had.
func TestRecoverRestoresGCPercent(t *testing.T) {
	old := debug.SetGCPercent(137)
	defer debug.SetGCPercent(old)
	e := setup(t)
	e.createQueue("q", nil)
	e.send("q", "a", "b")
	e.restart()
	if got := debug.SetGCPercent(137); got != 137 {
		t.Fatalf("GC percent after a restart: %d, want 137", got)
	}
}

// TestLoadOutOfSendOrder: a dead-letter queue holds its messages in key
// order (the order they were moved) while their send times, which the age
// heap orders, are in another. load must index every message all the same
// (its map was once filled while the age heap reordered the same slice,
// which lost messages from the map: delivered, but never deletable).
func TestLoadOutOfSendOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 400_000
	for round := range 3 {
		ms := make([]*msg, n)
		for i := range ms {
			ms[i] = &msg{key: uint64(i + 1), sentAt: int64(n - i), state: stateReady}
		}
		q := newQueue(queueRecord{ID: 1, Name: "dlq"})
		q.load(ms)
		if len(q.msgs) != n {
			t.Fatalf("round %d: %d messages in the map, want %d", round, len(q.msgs), n)
		}
		for _, m := range q.age {
			if q.msgs[m.key] != m {
				t.Fatalf("round %d: message %d is not in the map under its key", round, m.key)
			}
		}
		if q.age[0].sentAt != 1 {
			t.Fatalf("round %d: the oldest message first in age has sentAt %d", round, q.age[0].sentAt)
		}
	}
}
