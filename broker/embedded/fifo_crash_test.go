package embedded

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// checkFifoIndex checks the FIFO part of every queue's index against its
// messages (b.mu held): every message is in its group's pending list, in
// key order, and nothing else is; a group's in-flight count is the number
// of its messages in flight (leased or doomed), and they add up to the
// queue's; a receivable group has an entry in avail (queued). A group that
// breaks the last two rules stays locked, or is never served, though its
// messages are visible: what a crash test's drain would see as a queue
// that answers nothing.
func checkFifoIndex(q *queue) error {
	f := q.fifo
	if f == nil {
		return nil
	}
	seen := 0
	var inflight int64
	queued := map[*group]bool{}
	for _, e := range f.avail {
		queued[e.g] = true
	}
	for id, g := range f.groups {
		if g.id != id {
			return fmt.Errorf("group %q filed under %q", g.id, id)
		}
		n := 0
		for i, m := range g.pending {
			if q.msgs[m.key] != m {
				return fmt.Errorf("group %q: message %d (state %d) is pending but not in the queue", id, m.key, m.state)
			}
			if m.groupID() != id {
				return fmt.Errorf("group %q: message %d of group %q", id, m.key, m.groupID())
			}
			if i > 0 && g.pending[i-1].key >= m.key {
				return fmt.Errorf("group %q: pending out of key order at %d", id, i)
			}
			if m.state == stateInflight || m.state == stateDoomed {
				n++
			}
		}
		seen += len(g.pending)
		if g.inflight != n {
			return fmt.Errorf("group %q: inflight %d, but %d of its messages are in flight", id, g.inflight, n)
		}
		inflight += int64(n)
		if g.receivable() && (!g.queued || !queued[g]) {
			return fmt.Errorf("group %q is receivable (head %d) but not queued in avail (queued %v)", id, g.pending[0].key, g.queued)
		}
		if g.queued && !queued[g] {
			return fmt.Errorf("group %q says queued but avail has no entry for it", id)
		}
	}
	if seen != len(q.msgs) {
		return fmt.Errorf("groups hold %d messages, the queue %d", seen, len(q.msgs))
	}
	if inflight != q.inflight {
		return fmt.Errorf("groups hold %d messages in flight, the queue counts %d", inflight, q.inflight)
	}
	return nil
}

// checkFifoIndexes runs checkFifoIndex on every queue of b.
func checkFifoIndexes(b *Backend) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range b.queues {
		if err := checkFifoIndex(q); err != nil {
			return fmt.Errorf("queue %s: %w", q.Name, err)
		}
	}
	return nil
}

// TestFifoCrashLoad is the FIFO shape of the crash loop (e2e
// TestSerialCrashLoopEmbedded) at unit scale: four groups, each sent in
// order (single messages and batches), consumers that delete, nack, extend
// or leave what they get, with receive visibilities of 0 to 4 s, short
// polls and long polls, while a goroutine moves the fake clock so that
// leases end under the load; a checker verifies the FIFO index
// (checkFifoIndex) all along. At a random moment the filesystem is cloned
// as a crash would leave it; the live backend and the reopened clone must
// then both hold a sound index and, once every lease has ended, hand out
// every remaining message, each group in order, with nothing acknowledged
// lost. 3 rounds, or SLUICE_FIFO_CRASH_ROUNDS.
func TestFifoCrashLoad(t *testing.T) {
	t.Parallel()
	rounds := testutil.Scale(t, "SLUICE_FIFO_CRASH_ROUNDS", 3, 100, 1)
	for round := range rounds {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			t.Parallel()
			fifoCrashRound(t, uint64(round))
		})
	}
}

func fifoCrashRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xf1f0))
	fs := vfs.NewCrashableMem()
	clock := clocktest.NewFakeClock(t0)
	opts := storage.Options{Clock: clock, Logger: testLogger(t)}
	b, err := Open(Config{Dir: "/data", FS: fs, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// ctx ends the workers' calls at the stop: a long poll on the fake
	// clock would otherwise wait for ever once the clock stands still.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	const queue = "q.fifo"
	if _, err := f.CreateQueue(context.Background(), queue, map[string]string{model.AttrFifoQueue: "true", model.AttrVisibilityTimeout: "4"}, nil); err != nil {
		t.Fatal(err)
	}

	h := &history{sent: map[string]bool{}, deleted: map[string]bool{}, deleting: map[string]bool{}}
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var violation atomic.Pointer[error]
	fail := func(err error) { violation.CompareAndSwap(nil, &err) }
	var wg sync.WaitGroup
	var receives atomic.Int64
	const groups = 4
	for g := range groups { // producers: one per group, in order, batches of 1..3
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for n := 0; !stopped(); {
				k := 1 + r.IntN(3)
				entries := make([]model.SendEntry, k)
				for i := range entries {
					body := fmt.Sprintf("g%d-%06d", g, n+i)
					entries[i] = model.SendEntry{ID: fmt.Sprint("e", i), Body: body, GroupID: fmt.Sprint("g", g), DedupID: body}
				}
				res, err := f.Send(ctx, queue, entries)
				if err != nil {
					return // closed
				}
				for i, r := range res {
					if r.Err != nil {
						fail(fmt.Errorf("send %s: %w", entries[i].Body, r.Err))
						return
					}
					h.ackSend(entries[i].Body)
				}
				n += k
			}
		}()
	}
	// del deletes d through the backend, so that only a delete that applied
	// (not one whose lease ended and was taken again: a stale receipt, which
	// the front answers as a success) counts as acknowledged. It reports
	// false once the backend is closed.
	del := func(d model.Delivery) bool {
		r, err := b.receipts.Decode(d.Receipt)
		if err != nil {
			fail(err)
			return false
		}
		h.tryDelete(d.Body)
		outs, err := b.Delete(ctx, model.QueueRef{Name: queue}, []model.Receipt{r}, nil)
		if err != nil {
			return false
		}
		if outs[0] == model.LeaseApplied {
			h.ackDelete(d.Body)
		}
		return true
	}
	for c := range 3 { // consumers
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 100+uint64(c)))
			for !stopped() {
				vis := []time.Duration{0, time.Second, 4 * time.Second}[r.IntN(3)]
				wait := []time.Duration{0, 0, time.Second}[r.IntN(3)]
				ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: queue, MaxMessages: 1 + r.IntN(10), Visibility: &vis, WaitTime: &wait})
				if err != nil {
					return
				}
				receives.Add(int64(len(ds)))
				for _, d := range ds {
					switch x := r.IntN(100); {
					case x < 70:
						if !del(d) {
							return
						}
					case x < 80:
						if _, err := f.ChangeVisibility(ctx, queue, []model.VisibilityEntry{{ID: "v", Receipt: d.Receipt}}); err != nil {
							return
						}
					case x < 90:
						errs, err := f.ChangeVisibility(ctx, queue, []model.VisibilityEntry{{ID: "v", Receipt: d.Receipt, Timeout: 6 * time.Second}})
						if err != nil {
							return
						}
						if errs[0] == nil && !del(d) {
							return
						}
					default: // left to expire
					}
				}
			}
		}()
	}
	wg.Add(2)
	go func() { // the clock: leases end under the load
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 200))
		for !stopped() {
			clock.Advance(time.Duration(r.IntN(1500)) * time.Millisecond)
			time.Sleep(time.Millisecond) // pacing of the clock, not a wait for a condition
		}
	}()
	go func() { // the index checker
		defer wg.Done()
		for !stopped() {
			if err := checkFifoIndexes(b); err != nil {
				fail(fmt.Errorf("during the load: %w", err))
				return
			}
			time.Sleep(time.Millisecond) // pacing of the checker
		}
	}()

	minSent := 300 + rng.IntN(1500)
	eventually(t, "acknowledged sends", func() bool {
		s, _ := h.snapshot()
		return len(s) >= minSent || violation.Load() != nil
	})
	sent, deleted := h.snapshot()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
	mayBeDeleted := h.attempted()
	close(stop)
	cancel()
	wg.Wait()
	if v := violation.Load(); v != nil {
		t.Fatal(*v)
	}
	t.Logf("crash after %d acknowledged sends, %d acknowledged deletes, %d messages received", len(sent), len(deleted), receives.Load())

	// The live backend, without a crash.
	if err := checkFifoIndexes(b); err != nil {
		t.Fatalf("live backend after the load: %v", err)
	}
	clock.Advance(time.Minute) // every lease has ended
	drainFifo(t, "live backend", f, queue, sent, h.attempted(), nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// The crashed filesystem, reopened.
	b2, err := Open(Config{Dir: "/data", FS: crashed, Options: opts})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer b2.Close()
	if err := checkFifoIndexes(b2); err != nil {
		t.Fatalf("after the crash: %v", err)
	}
	clock.Advance(time.Minute)
	drainFifo(t, "after the crash", front(t, b2, broker.Config{Logger: opts.Logger, Observer: opts.Observer}), queue, sent, mayBeDeleted, deleted)
	if err := checkFifoIndexes(b2); err != nil {
		t.Fatalf("after the drain: %v", err)
	}
}

// drainFifo receives and deletes every message of queue (every lease has
// ended: each receive must take something until the queue is empty), and
// checks: the counts said as many visible, each group comes in send order,
// every acknowledged send whose delete was never called is there, and no
// acknowledged delete (of deleted, when not nil) came back.
func drainFifo(t *testing.T, what string, f *broker.Broker, queue string, sent, mayBeDeleted, deleted map[string]bool) {
	t.Helper()
	ctx := context.Background()
	info, err := f.GetQueue(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if info.Stats.InFlight != 0 || info.Stats.Delayed != 0 {
		t.Fatalf("%s: %+v, want every lease ended", what, info.Stats)
	}
	got := map[string][]string{}
	found := map[string]bool{}
	for {
		vis, wait := time.Hour, time.Duration(0)
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: queue, MaxMessages: 10, Visibility: &vis, WaitTime: &wait})
		if err != nil {
			t.Fatalf("%s: drain: %v", what, err)
		}
		if len(ds) == 0 {
			break
		}
		entries := make([]model.DeleteEntry, len(ds))
		for i, d := range ds {
			got[d.GroupID] = append(got[d.GroupID], d.Body)
			found[d.Body] = true
			entries[i] = model.DeleteEntry{ID: fmt.Sprint("d", i), Receipt: d.Receipt}
		}
		errs, err := f.Delete(ctx, queue, entries)
		if err != nil {
			t.Fatalf("%s: drain delete: %v", what, err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatalf("%s: drain delete: %v", what, err)
			}
		}
	}
	if int64(len(found)) != info.Stats.Visible {
		t.Fatalf("%s: the drain took %d messages, the counts said %d visible (a group that answers nothing?)", what, len(found), info.Stats.Visible)
	}
	for g, bodies := range got {
		if !slices.IsSorted(bodies) {
			t.Errorf("%s: group %s out of order: %s", what, g, strings.Join(bodies, " "))
		}
	}
	lost := 0
	for body := range sent {
		if !mayBeDeleted[body] && !found[body] {
			lost++
			if lost < 5 {
				t.Errorf("%s: acknowledged send lost: %s", what, body)
			}
		}
	}
	for body := range deleted {
		if found[body] {
			t.Errorf("%s: acknowledged delete came back: %s", what, body)
		}
	}
	if info, err := f.GetQueue(ctx, queue); err != nil || info.Stats.Visible+info.Stats.InFlight+info.Stats.Delayed != 0 {
		t.Fatalf("%s: after the drain: %+v, err %v; want an empty queue", what, info.Stats, err)
	}
	t.Logf("%s: drained %d messages in %d groups", what, len(found), len(got))
}
