package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// writeFormat1 writes, with Pebble alone, a data directory as the previous
// format left it: no format record, a queue record, and one message with a
// version-1 metadata record.
func writeFormat1(t *testing.T, dir string) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := queueRecord{ID: 7, Name: "old", Config: model.DefaultQueueConfig(false), CreatedAt: t0, ModifiedAt: t0}
	meta := []byte{metaV1, byte(stateReady)}
	meta = binary.AppendVarint(meta, t0.UnixNano()) // visibleAt
	meta = binary.AppendUvarint(meta, 0)            // lease
	meta = binary.AppendUvarint(meta, 0)            // receiveCount
	meta = binary.AppendVarint(meta, 0)             // firstReceiveAt
	meta = binary.AppendVarint(meta, t0.UnixNano()) // sentAt
	meta = binary.AppendVarint(meta, 0)             // priority
	meta = binary.AppendUvarint(meta, 0)            // seq
	meta = binary.AppendUvarint(meta, 5)            // size
	meta = appendStr(appendStr(appendStr(meta, ""), ""), "")
	body := encodeBody("id-from-format-1", &model.SendEntry{Body: "hello"})
	b := db.NewBatch()
	_ = b.Set(keyNextQueueID, u64Bytes(8), nil)
	_ = b.Set(keyKeyCeiling, u64Bytes(1<<16), nil)
	_ = b.Set(queueKey(rec.ref()), rec.encode(), nil)
	_ = b.Set(msgKey(7, kindMeta, 3), meta, nil)
	_ = b.Set(msgKey(7, kindBody, 3), body, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenPreviousFormat: a directory written in the previous format (no
// format record, version-1 metadata) opens, serves its message, and is
// marked with the current format.
func TestOpenPreviousFormat(t *testing.T) {
	t.Parallel()
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: t.TempDir()}
	writeFormat1(t, e.dir)
	e.open()
	t.Cleanup(func() { _ = e.be.Close() })
	ds := e.receive("old", 10, time.Minute)
	if len(ds) != 1 || ds[0].Body != "hello" || ds[0].ID != "id-from-format-1" {
		t.Fatalf("received %+v, want the format-1 message", ds)
	}
	if v, err := e.be.getU64(keyFormat); err != nil || v != formatCurrent {
		t.Fatalf("format record %d, %v; want %d", v, err, formatCurrent)
	}
	e.restart()
	e.wantStats("old", model.QueueStats{InFlight: 1})
}

// TestOpenRefusesNewerFormat: a directory of a newer format is refused with
// ErrNewerFormat, and left as it was.
func TestOpenRefusesNewerFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Set(keyFormat, u64Bytes(formatCurrent+1), pebble.Sync)
	_ = db.Close()
	_, err = Open(Config{Dir: dir, Options: storage.Options{Logger: testLogger(t)}})
	if !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("open a newer format: %v, want ErrNewerFormat", err)
	}
	// The message says which formats, and what to do (serve prints it).
	refusal := err.Error()
	for _, want := range []string{dir, "newer version of Sluice", fmt.Sprintf("format %d;", formatCurrent+1),
		fmt.Sprintf("formats up to %d", formatCurrent), "run that version or a newer one", "restore a backup taken before the upgrade"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal %q does not say %q", refusal, want)
		}
	}
	// Left as it was: still the newer format, and refused again.
	db, err = pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get(keyFormat)
	if err != nil || binary.BigEndian.Uint64(v) != formatCurrent+1 {
		t.Errorf("the format record after the refusal: %x, %v; want %d", v, err, formatCurrent+1)
	}
	if err == nil {
		_ = closer.Close()
	}
	_ = db.Close()
	t.Logf("refusal: %s", refusal)
}

// TestOpenLogsCreatedOrUpgraded: opening a new data directory logs that it
// was created, not that it was upgraded from format 1 (a directory with no
// record at all is not of the old format); opening one of the previous
// format logs the upgrade.
func TestOpenLogsCreatedOrUpgraded(t *testing.T) {
	t.Parallel()
	open := func(dir string) string {
		var logs testutil.Buffer
		be, err := Open(Config{Dir: dir, Options: storage.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	fresh := t.TempDir()
	if got := open(fresh); !strings.Contains(got, "data directory created") || strings.Contains(got, "upgraded") {
		t.Errorf("a new directory's open logged:\n%s\nwant \"data directory created\" and no upgrade", got)
	}
	if got := open(fresh); strings.Contains(got, "data directory created") || strings.Contains(got, "upgraded") {
		t.Errorf("a second open of the same directory logged:\n%s\nwant neither created nor upgraded", got)
	}
	old := t.TempDir()
	writeFormat1(t, old)
	if got := open(old); !strings.Contains(got, "data directory upgraded") || !strings.Contains(got, "from_format=1") {
		t.Errorf("a format-1 directory's open logged:\n%s\nwant the upgrade from format 1", got)
	}
}

// TestOpenFormat2: a directory of format 2 (the record says 2; metadata
// records of version 2, without an expiry) opens, serves its message, logs
// the upgrade from format 2, and is marked with the current format.
func TestOpenFormat2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := queueRecord{ID: 7, Name: "two", Config: model.DefaultQueueConfig(false), CreatedAt: t0, ModifiedAt: t0}
	const id = "00000000-0000-4000-8000-000000000002"
	meta := []byte{metaV2, byte(stateReady)}
	meta = binary.AppendVarint(meta, t0.UnixNano()) // visibleAt
	meta = binary.AppendUvarint(meta, 0)            // lease
	meta = binary.AppendUvarint(meta, 0)            // receiveCount
	meta = binary.AppendVarint(meta, 0)             // firstReceiveAt
	meta = binary.AppendVarint(meta, t0.UnixNano()) // sentAt
	meta = binary.AppendVarint(meta, 0)             // priority
	meta = binary.AppendUvarint(meta, 0)            // seq
	meta = binary.AppendUvarint(meta, 5)            // size
	meta = appendStr(appendStr(appendStr(meta, ""), ""), "")
	meta = binary.AppendUvarint(meta, 0) // attempts
	meta = binary.AppendUvarint(meta, 0) // maxAttempts
	meta = binary.AppendVarint(meta, 0)  // lastReceiveAt
	meta = appendStr(meta, "")           // failureReason
	meta = appendStr(meta, id)
	b := db.NewBatch()
	_ = b.Set(keyFormat, u64Bytes(2), nil)
	_ = b.Set(keyNextQueueID, u64Bytes(8), nil)
	_ = b.Set(keyKeyCeiling, u64Bytes(1<<16), nil)
	_ = b.Set(queueKey(rec.ref()), rec.encode(), nil)
	_ = b.Set(msgKey(7, kindMeta, 3), meta, nil)
	_ = b.Set(msgKey(7, kindBody, 3), encodeBody(id, &model.SendEntry{Body: "hello"}), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var logs testutil.Buffer
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: dir}
	opts := storage.Options{Clock: e.clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	be, err := Open(Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	e.be, e.b = be, front(t, be, broker.Config{Logger: opts.Logger})
	t.Cleanup(func() { _ = e.be.Close() })
	if got := logs.String(); !strings.Contains(got, "data directory upgraded") || !strings.Contains(got, "from_format=2") {
		t.Errorf("a format-2 directory's open logged:\n%s\nwant the upgrade from format 2", got)
	}
	ds := e.receive("two", 10, time.Minute)
	if len(ds) != 1 || ds[0].Body != "hello" || ds[0].ID != id {
		t.Fatalf("received %+v, want the format-2 message", ds)
	}
	if v, err := e.be.getU64(keyFormat); err != nil || v != formatCurrent {
		t.Fatalf("format record %d, %v; want %d", v, err, formatCurrent)
	}
}
