package embedded

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// history records what the backend acknowledged. A change is recorded only
// after the call returned success, so everything in a snapshot taken before
// a crash clone was acknowledged before the crash.
type history struct {
	mu       sync.Mutex
	sent     map[string]bool // bodies whose send returned success
	deleted  map[string]bool // bodies whose delete returned success
	deleting map[string]bool // bodies for which a delete was called (perhaps not yet answered)
}

func (h *history) tryDelete(body string) {
	h.mu.Lock()
	h.deleting[body] = true
	h.mu.Unlock()
}

// attempted returns the bodies for which a delete was called so far.
func (h *history) attempted() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.deleting))
	for k := range h.deleting {
		out[k] = true
	}
	return out
}

func (h *history) ackSend(body string) { h.mu.Lock(); h.sent[body] = true; h.mu.Unlock() }
func (h *history) ackDelete(body string) {
	h.mu.Lock()
	h.deleted[body] = true
	h.mu.Unlock()
}

func (h *history) snapshot() (sent, deleted map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sent, deleted = make(map[string]bool, len(h.sent)), make(map[string]bool, len(h.deleted))
	for k := range h.sent {
		sent[k] = true
	}
	for k := range h.deleted {
		deleted[k] = true
	}
	return sent, deleted
}

// crashBody is a message body that can be checked for corruption: its id
// followed by a padding derived from it.
func crashBody(id string) string {
	return id + "|" + strings.Repeat(id, 1+len(id)%7)
}

func checkCrashBody(body string) (id string, ok bool) {
	id, _, found := strings.Cut(body, "|")
	return id, found && body == crashBody(id)
}

// TestCrashKeepsAcknowledgedChanges runs concurrent sends, receives and
// deletes on a filesystem that loses unsynced writes at a simulated crash
// (vfs.NewCrashableMem + CrashClone), takes a crash clone at a random moment,
// reopens from the clone and checks that every acknowledged send survived
// intact (unless a delete of it had been called before the crash) and no
// acknowledged delete came back. It repeats with several seeds: 4 rounds,
// or SLUICE_CRASH_ROUNDS (the full scale in docs/durability.md).
func TestCrashKeepsAcknowledgedChanges(t *testing.T) {
	t.Parallel()
	rounds := testutil.Scale(t, "SLUICE_CRASH_ROUNDS", 4, 40, 1)
	for round := range rounds {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			t.Parallel()
			crashRound(t, uint64(round))
		})
	}
}

func crashRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	fs := vfs.NewCrashableMem()
	clock := clocktest.NewFakeClock(t0) // time stands still: leases never expire during the run
	b, err := Open(Config{Dir: "/data", FS: fs, Options: storage.Options{Clock: clock, Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	f := front(t, b, broker.Config{})
	if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
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
	var wg sync.WaitGroup
	var opsMu sync.Mutex
	ops := 0
	countOp := func() { opsMu.Lock(); ops++; opsMu.Unlock() }
	for s := range 6 { // senders: batches of 1..10
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(s)))
			for n := 0; !stopped(); n++ {
				k := 1 + r.IntN(10)
				entries := make([]model.SendEntry, k)
				for i := range entries {
					entries[i] = model.SendEntry{ID: fmt.Sprint("e", i), Body: crashBody(fmt.Sprintf("s%d-%d-%d", s, n, i))}
				}
				res, err := f.Send(ctx, "q", entries)
				if err != nil {
					return // closed
				}
				for i, r := range res {
					if r.Err == nil {
						h.ackSend(entries[i].Body)
					}
				}
				countOp()
			}
		}()
	}
	for range 4 { // consumers: receive, then delete what they got
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped() {
				vis, wait := time.Hour, time.Duration(0)
				ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &wait})
				if err != nil {
					return
				}
				if len(ds) == 0 {
					continue
				}
				countOp()
				entries := make([]model.DeleteEntry, len(ds))
				for i, d := range ds {
					entries[i] = model.DeleteEntry{ID: fmt.Sprint("d", i), Receipt: d.Receipt}
					h.tryDelete(d.Body)
				}
				errs, err := f.Delete(ctx, "q", entries)
				if err != nil {
					return
				}
				for i, e := range errs {
					if e == nil {
						h.ackDelete(ds[i].Body)
					}
				}
				countOp()
			}
		}()
	}

	// Crash at a random moment once some work is acknowledged.
	minSent := 200 + rng.IntN(2000)
	eventually(t, "acknowledged sends", func() bool { s, _ := h.snapshot(); return len(s) >= minSent })
	sent, deleted := h.snapshot()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rng})
	// A delete called before the crash may have reached the disk without
	// being answered: those messages may legitimately be gone. Deletes
	// called after the crash cannot have.
	mayBeDeleted := h.attempted()
	close(stop)
	wg.Wait()
	syncs := b.fs.syncs.Load()
	opsMu.Lock()
	t.Logf("crash after %d acknowledged sends, %d acknowledged deletes; %d writing calls, %d WAL syncs (%.1f calls/sync)",
		len(sent), len(deleted), ops, syncs, float64(ops)/float64(max(syncs, 1)))
	opsMu.Unlock()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart from the crashed filesystem.
	clock.Advance(2 * time.Hour) // every lease of the crashed run has expired
	b2, err := Open(Config{Dir: "/data", FS: crashed, Options: storage.Options{Clock: clock, Logger: testLogger(t)}})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer b2.Close()
	info, err := b2.GetQueue(ctx, model.QueueRef{Name: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Stats.InFlight != 0 || info.Stats.Delayed != 0 {
		t.Fatalf("after restart: %+v, want every lease expired", info.Stats)
	}
	found := map[string]bool{}
	for {
		vis, wait := time.Hour, time.Duration(0)
		ds, err := b2.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &wait})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if _, ok := checkCrashBody(d.Body); !ok {
				t.Fatalf("corrupt body after crash: %q", d.Body)
			}
			if found[d.Body] {
				t.Fatalf("message %q delivered twice in one lease period", d.Body)
			}
			found[d.Body] = true
		}
	}
	if int64(len(found)) != info.Stats.Visible {
		t.Fatalf("received %d messages, counter said %d visible", len(found), info.Stats.Visible)
	}
	lost, resurrected, kept := 0, 0, 0
	for body := range sent {
		if !mayBeDeleted[body] {
			kept++
		}
		if !mayBeDeleted[body] && !found[body] {
			lost++
			if lost < 5 {
				t.Errorf("acknowledged send lost: %q", body)
			}
		}
	}
	for body := range deleted {
		if found[body] {
			resurrected++
			if resurrected < 5 {
				t.Errorf("acknowledged delete came back: %q", body)
			}
		}
	}
	if lost+resurrected > 0 {
		t.Fatalf("%d acknowledged sends lost, %d acknowledged deletes came back", lost, resurrected)
	}
	t.Logf("after restart: %d messages survive, among them all %d acknowledged sends whose delete was never called", len(found), kept)
}
