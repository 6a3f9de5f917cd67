package embedded

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// countObserver counts the Observer's events per counter.
type countObserver struct {
	mu sync.Mutex
	n  [model.NumCounters]int
}

func (o *countObserver) Count(_ string, c model.Counter, n int) {
	o.mu.Lock()
	o.n[c] += n
	o.mu.Unlock()
}
func (o *countObserver) Refused(string, string)    {}
func (o *countObserver) Synced(time.Duration, int) {}
func (o *countObserver) get(c model.Counter) int   { o.mu.Lock(); defer o.mu.Unlock(); return o.n[c] }
func (o *countObserver) reset()                    { o.mu.Lock(); o.n = [model.NumCounters]int{}; o.mu.Unlock() }

// largestTable is the path of the biggest .sst file in dir.
func largestTable(t testing.TB, dir string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	best, size := "", int64(-1)
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			best, size = p, st.Size()
		}
	}
	if best == "" {
		t.Fatalf("no table file in %s", dir)
	}
	return best
}

// flipByte inverts one byte of file at offset off (negative: from the end).
func flipByte(t testing.TB, file string, off int64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0xff
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// damagedStore writes n messages of about 800 bytes into a store at dir,
// closes it (so they are flushed to a table file) and flips a byte in the
// middle of the biggest table, among the bodies. It returns the bodies.
func damagedStore(t *testing.T, dir string, n int) map[string]bool {
	t.Helper()
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: dir}
	e.open()
	e.createQueue("q", nil)
	bodies := map[string]bool{}
	for i := 0; i < n; i += 10 {
		batch := make([]string, 10)
		for j := range batch {
			batch[j] = "m" + itoa(i+j) + ":" + strings.Repeat("x", 800)
			bodies[batch[j]] = true
		}
		e.send("q", batch...)
	}
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	tbl := largestTable(t, dir)
	st, _ := os.Stat(tbl)
	flipByte(t, tbl, st.Size()/2)
	t.Logf("flipped the byte at %d of %s (%d bytes)", st.Size()/2, filepath.Base(tbl), st.Size())
	return bodies
}

// TestDamagedBodyIsSetAside: a flipped byte in a table file damages the
// bodies of one block. Receives never panic; each answers the readable
// messages it claimed; the damaged ones are set aside (counted, never
// served again, also after a restart); every other message is delivered,
// and Close is clean.
func TestDamagedBodyIsSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 3000
	bodies := damagedStore(t, dir, n)

	obs := &countObserver{}
	clock := clocktest.NewFakeClock(t0)
	opts := storage.Options{Clock: clock, Logger: testLogger(t), Observer: obs}
	b, err := Open(Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatalf("open the damaged store: %v", err)
	}
	f := front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	ctx := context.Background()
	got := map[string]bool{}
	zero, vis := time.Duration(0), time.Hour
	failed := 0
	for range 2 * n {
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &zero})
		if errors.Is(err, errDamagedOnly) {
			failed++
			continue
		}
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if !bodies[d.Body] || got[d.Body] {
				t.Fatalf("unexpected or repeated body %.20q", d.Body)
			}
			got[d.Body] = true
		}
	}
	damaged := obs.get(model.CountDamaged)
	t.Logf("%d delivered, %d set aside as damaged, %d receives had nothing readable", len(got), damaged, failed)
	if damaged == 0 || damaged > 100 {
		t.Fatalf("%d messages set aside, want a block's worth (1..100)", damaged)
	}
	if len(got)+damaged != n {
		t.Fatalf("%d delivered + %d damaged != %d sent", len(got), damaged, n)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close after meeting damage: %v", err)
	}

	// After a restart the damaged messages stay set aside, and the
	// delivered ones (leased for an hour) come back once their lease ends.
	obs.reset()
	b, err = Open(Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer b.Close()
	f = front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	clock.Advance(2 * time.Hour)
	again := 0
	for {
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &zero})
		if err != nil {
			t.Fatalf("receive after restart: %v", err)
		}
		if len(ds) == 0 {
			break
		}
		again += len(ds)
	}
	if again != len(got) || obs.get(model.CountDamaged) != 0 {
		t.Fatalf("after restart: %d delivered (want %d), %d newly damaged (want 0)", again, len(got), obs.get(model.CountDamaged))
	}
}
