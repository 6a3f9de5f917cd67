package embedded

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// TestSalvageKeepsTheReceiptKey: salvage copies the store's receipt key
// (a counter record), so a receipt handle issued before it still deletes
// its message in the salvaged directory.
func TestSalvageKeepsTheReceiptKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	e.send("q", "hello")
	ds := e.receive("q", 1, time.Hour)
	if len(ds) != 1 {
		t.Fatalf("received %d", len(ds))
	}
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "salvaged")
	if _, err := Salvage(context.Background(), e.dir, to, nil, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	e.dir = to
	e.open()
	res, err := e.b.Delete(context.Background(), "q", []model.DeleteEntry{{ID: "a", Receipt: ds[0].Receipt}})
	if err != nil || res[0] != nil {
		t.Fatalf("delete with a handle issued before the salvage: %v %v", err, res)
	}
	if s := e.stats("q"); s.Visible+s.InFlight != 0 {
		t.Fatalf("the message is still there: %+v", s)
	}
}

// TestVerifyFlagsABadReceiptKey: a receipt key record of the wrong size
// stops the broker's start (the store is damaged), so Verify lists it as a
// problem rather than reporting the store sound, and Salvage leaves it out
// so that the salvaged store starts.
func TestVerifyFlagsABadReceiptKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(e.dir, &pebble.Options{Logger: newPebbleLogger(testLogger(t))})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(keyReceiptKey, []byte("short"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: e.dir, Options: storage.Options{Clock: e.clock, Logger: testLogger(t)}}); err == nil {
		t.Fatal("a broker started on a store whose receipt key is 5 bytes")
	}
	rep, err := Verify(context.Background(), e.dir, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatalf("verify calls the store sound, and the broker does not start on it: %+v", rep)
	}
	// Salvage leaves the bad key out: the salvaged store starts, with a
	// new key.
	to := filepath.Join(t.TempDir(), "salvaged")
	if _, err := Salvage(context.Background(), e.dir, to, nil, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	e.dir = to
	e.open()
	e.send("q", "after the salvage")
}

// TestBackupKeepsTheReceiptKey: an online backup holds the receipt key, so
// a broker started on the backup accepts the handles issued before it.
func TestBackupKeepsTheReceiptKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	e.send("q", "hello")
	ds := e.receive("q", 1, time.Hour)
	if len(ds) != 1 {
		t.Fatalf("received %d", len(ds))
	}
	to := filepath.Join(t.TempDir(), "backup")
	if err := e.be.Backup(context.Background(), to); err != nil {
		t.Fatal(err)
	}
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	e.dir = to
	e.open()
	res, err := e.b.Delete(context.Background(), "q", []model.DeleteEntry{{ID: "a", Receipt: ds[0].Receipt}})
	if err != nil || res[0] != nil {
		t.Fatalf("delete with a handle issued before the backup: %v %v", err, res)
	}
	if s := e.stats("q"); s.Visible+s.InFlight != 0 {
		t.Fatalf("the message is still there: %+v", s)
	}
}
