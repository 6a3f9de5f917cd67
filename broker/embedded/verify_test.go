package embedded

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// drain receives every message of queue "q" of the store at dir, and
// returns their bodies.
func drain(t *testing.T, dir string) map[string]bool {
	t.Helper()
	return drainQueue(t, dir, "q")
}

// drainQueue receives every message of queue name of the store at dir, and
// returns their bodies.
func drainQueue(t *testing.T, dir, name string) map[string]bool {
	t.Helper()
	opts := storage.Options{Clock: clocktest.NewFakeClock(t0), Logger: testLogger(t)}
	b, err := Open(Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer b.Close()
	f := front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	got := map[string]bool{}
	vis, zero := time.Hour, time.Duration(0)
	for {
		ds, err := f.Receive(context.Background(), model.ReceiveRequest{Queue: name, MaxMessages: 10, Visibility: &vis, WaitTime: &zero})
		if err != nil {
			t.Fatalf("receive from %s: %v", dir, err)
		}
		if len(ds) == 0 {
			return got
		}
		for _, d := range ds {
			got[d.Body] = true
		}
	}
}

// TestVerifyAndSalvageFlippedByte: Verify lists the messages whose bodies a
// flipped byte damaged, naming the file; Salvage copies every other one
// into a new directory that a broker serves, and reports the lost ones.
func TestVerifyAndSalvageFlippedByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 3000
	bodies := damagedStore(t, dir, n)
	ctx := context.Background()
	rep, err := Verify(ctx, dir, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("verify: format %d, %d queues, %d readable messages, %d damaged, problems %v", rep.Format, rep.Queues, rep.Messages, len(rep.Damaged), rep.Problems)
	if rep.OK() || len(rep.Damaged) == 0 || rep.Messages+len(rep.Damaged) != n {
		t.Fatalf("verify: %d readable + %d damaged, want %d with some damaged", rep.Messages, len(rep.Damaged), n)
	}
	for _, d := range rep.Damaged {
		if d.MessageID == "" || !strings.HasSuffix(d.File, ".sst") || d.Queue != "q" {
			t.Fatalf("damaged entry %+v: want its message id, queue and table file", d)
		}
	}

	to := filepath.Join(t.TempDir(), "salvaged")
	srep, err := Salvage(ctx, dir, to, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if srep.Messages != rep.Messages || len(srep.Lost) != len(rep.Damaged) {
		t.Fatalf("salvage copied %d and lost %d; verify said %d readable, %d damaged", srep.Messages, len(srep.Lost), rep.Messages, len(rep.Damaged))
	}
	got := drain(t, to)
	if len(got) != srep.Messages {
		t.Fatalf("the salvaged directory serves %d messages, want %d", len(got), srep.Messages)
	}
	for b := range got {
		if !bodies[b] {
			t.Fatalf("salvaged body %.20q was never sent", b)
		}
	}
	if rep2, err := Verify(ctx, to, nil, testLogger(t)); err != nil || !rep2.OK() {
		t.Fatalf("verify of the salvaged directory: %+v, %v", rep2, err)
	}
	if _, err := Salvage(ctx, dir, to, nil, testLogger(t)); err == nil {
		t.Fatal("salvage into a non-empty directory: no error")
	}
}

// TestVerifyTruncatedTable: a table file cut in half stops the start with an
// error naming the file (Pebble checks every table's size against the
// MANIFEST on open); Verify and Salvage read the other tables and the logs on
// their own and report the cut table as unknown, with its size.
func TestVerifyTruncatedTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: dir}
	e.open()
	e.createQueue("q", nil)
	e.send("q", "first")
	if err := e.be.db.Flush(); err != nil { // "first" in a table of its own
		t.Fatal(err)
	}
	e.send("q", "in the memtable, then the log")
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	tbl := largestTable(t, dir)
	st, _ := os.Stat(tbl)
	if err := os.Truncate(tbl, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(tbl)
	_, err := Open(Config{Dir: dir, Options: storage.Options{Logger: testLogger(t)}})
	if err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("open with a truncated table: %v, want an error naming %s", err, name)
	}
	t.Logf("open refused: %v", err)
	rep, err := Verify(context.Background(), dir, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("verify: %d messages, unknown %+v, problems %q", rep.Messages, rep.Unknown, rep.Problems)
	if rep.OK() || len(rep.Unknown) != 1 || rep.Unknown[0].File != name || rep.Unknown[0].Bytes != st.Size()/2 {
		t.Fatalf("verify of a truncated table: unknown %+v, want %s of %d bytes", rep.Unknown, name, st.Size()/2)
	}
	srep, err := Salvage(context.Background(), dir, filepath.Join(t.TempDir(), "s"), nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if srep.Complete() || len(srep.Unknown) != 1 || srep.Messages != rep.Messages {
		t.Fatalf("salvage: %d messages, unknown %+v; verify read %d", srep.Messages, srep.Unknown, rep.Messages)
	}
}

// TestVerifyRefusesARunningBroker: Verify and Salvage refuse a directory
// that a broker holds.
func TestVerifyRefusesARunningBroker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := Verify(context.Background(), e.dir, nil, nil); !errors.Is(err, ErrDirLocked) {
		t.Fatalf("verify of a running broker's directory: %v, want ErrDirLocked", err)
	}
	if _, err := Salvage(context.Background(), e.dir, filepath.Join(t.TempDir(), "x"), nil, nil); !errors.Is(err, ErrDirLocked) {
		t.Fatalf("salvage of a running broker's directory: %v, want ErrDirLocked", err)
	}
}

// TestVerifyListsSetAside: messages a receive set aside stay listed by
// Verify (SetAside) after the broker stops.
func TestVerifyListsSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	damagedStore(t, dir, 1000)
	drain(t, dir)
	rep, err := Verify(context.Background(), dir, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	set := 0
	for _, d := range rep.Damaged {
		if d.SetAside {
			set++
		}
	}
	if set == 0 || set != len(rep.Damaged) {
		t.Fatalf("verify after receives: %d set aside of %d damaged, want all and some", set, len(rep.Damaged))
	}
}

// TestVerifyNoStore: a directory without a store is refused, not read table
// by table as an empty store.
func TestVerifyNoStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Verify(context.Background(), dir, nil, testLogger(t)); !errors.Is(err, pebble.ErrDBDoesNotExist) {
		t.Fatalf("verify of an empty directory: %v, want pebble.ErrDBDoesNotExist", err)
	}
	if _, err := Salvage(context.Background(), dir, filepath.Join(t.TempDir(), "s"), nil, testLogger(t)); !errors.Is(err, pebble.ErrDBDoesNotExist) {
		t.Fatalf("salvage of an empty directory: %v, want pebble.ErrDBDoesNotExist", err)
	}
}
