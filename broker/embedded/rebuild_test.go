package embedded

import (
	"cmp"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// tableStore is a stopped broker's directory with several table files: n
// messages of about 1 KiB (random letters, so that the tables do not
// compress to one), stopped cleanly (Close flushes the memtable).
type tableStore struct {
	dir    string
	bodies map[uint64]string // message key -> body
	tables []string          // the table files, oldest first
}

func newTableStore(t *testing.T, n int) *tableStore {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: dir}
	e.open()
	e.createQueue("q", nil)
	r := rand.New(rand.NewPCG(1, 2))
	letters := make([]byte, 1000)
	for i := 0; i < n; i += 10 {
		batch := make([]string, 10)
		for j := range batch {
			for k := range letters {
				letters[k] = byte('a' + r.IntN(26))
			}
			batch[j] = "m" + itoa(i+j) + ":" + string(letters)
		}
		e.send("q", batch...)
	}
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	s := &tableStore{dir: dir, bodies: map[uint64]string{}}
	db, err := openReadOnly(dir, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lo, hi := kindRange(1, kindBody)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		var m model.Message
		if err := decodeBody(it.Value(), &m); err != nil {
			t.Fatal(err)
		}
		s.bodies[u64(it.Key()[10:])] = m.Body
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if len(s.bodies) != n {
		t.Fatalf("the store holds %d bodies, want %d", len(s.bodies), n)
	}
	s.tables, _ = filepath.Glob(filepath.Join(dir, "*.sst"))
	slices.Sort(s.tables)
	if len(s.tables) < 3 {
		t.Fatalf("%d table files, want 3 or more", len(s.tables))
	}
	return s
}

// copyTo copies the store into a new directory, which it returns.
func (s *tableStore) copyTo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS(s.dir)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tableKeys lists the message keys whose metadata or body table file path
// holds, read with Pebble's sstable package before any damage.
func tableKeys(t *testing.T, path string) (keys map[uint64]bool, queueRecord bool) {
	t.Helper()
	r, err := openTable(context.Background(), vfs.Default, path, tableReaderOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	it, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.TableBlobContext{})
	if err != nil {
		t.Fatal(err)
	}
	keys = map[uint64]bool{}
	for kv := it.First(); kv != nil; kv = it.Next() {
		k := kv.K.UserKey
		switch {
		case len(k) == 18 && k[0] == pfxData && (k[9] == kindMeta || k[9] == kindBody):
			keys[u64(k[10:])] = true
		case k[0] == pfxQueue:
			queueRecord = true
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return keys, queueRecord
}

// obsoleteLogs removes the logs below the MANIFEST's minimum unflushed log
// number, as Pebble does with the ones it does not keep to reuse.
func obsoleteLogs(t *testing.T, dir string) {
	t.Helper()
	desc, err := pebble.Peek(dir, vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(desc.ManifestFilename)
	if err != nil {
		t.Fatal(err)
	}
	minLog := minUnflushedLog(data)
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	removed := 0
	for _, l := range logs {
		n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(l), ".log"), 10, 64)
		if err == nil && n < minLog {
			if err := os.Remove(l); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	t.Logf("removed %d obsolete logs (below %d)", removed, minLog)
}

// TestSalvageTableByTable: when a table file does not read, or the MANIFEST
// is damaged, Verify and Salvage read every table and log on their own: the
// messages they hold are all kept, what does not read at all is reported as
// unknown with its size, and Salvage says it is not complete. (Issue 28:
// the salvage of a store whose newest table had a flipped footer byte copied
// 0 of 8,000 messages and reported success; a damaged MANIFEST stopped both
// tools.)
func TestSalvageTableByTable(t *testing.T) {
	t.Parallel()
	const n = 8000
	s := newTableStore(t, n)
	t.Logf("%d messages in %d tables", n, len(s.tables))
	ctx := context.Background()
	all := map[string]bool{}
	for _, b := range s.bodies {
		all[b] = true
	}
	// check salvages dir and compares what the salvaged store serves from
	// queue name with want.
	check := func(t *testing.T, dir, name string, want map[string]bool) *SalvageReport {
		t.Helper()
		to := filepath.Join(t.TempDir(), "salvaged")
		rep, err := Salvage(ctx, dir, to, nil, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("salvage: %d queues, %d messages, %d lost, unknown %+v, problems %q", rep.Queues, rep.Messages, len(rep.Lost), rep.Unknown, rep.Problems)
		if rep.Messages != len(want) {
			t.Fatalf("salvage copied %d messages, want %d", rep.Messages, len(want))
		}
		got := drainQueue(t, to, name)
		for b := range want {
			if !got[b] {
				t.Fatalf("the salvaged store serves %d of the %d messages it should (%.12q missing)", len(got), len(want), b)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("the salvaged store serves %d messages, want %d", len(got), len(want))
		}
		if _, err := os.Stat(filepath.Join(to, ".salvage-scratch")); !os.IsNotExist(err) {
			t.Fatalf("the scratch directory is left in %s: %v", to, err)
		}
		return rep
	}

	t.Run("Healthy", func(t *testing.T) {
		t.Parallel()
		rep := check(t, s.copyTo(t), "q", all)
		if !rep.Complete() {
			t.Fatalf("salvage of a sound store: not complete: %+v", rep)
		}
	})

	// The footer of the newest table (the last flush), as in the issue.
	newest := s.tables[len(s.tables)-1]
	inNewest, _ := tableKeys(t, newest)
	t.Run("NewestTableFooter", func(t *testing.T) {
		t.Parallel()
		dir := s.copyTo(t)
		flipByte(t, filepath.Join(dir, filepath.Base(newest)), -20)
		// The log it was flushed from is usually still on disk (Pebble
		// keeps a few obsolete logs to reuse): then nothing is lost. When
		// the flushes fell otherwise (a slower run, -race) that log was
		// reused already: then the table's messages are unknown and every
		// other one is kept, as in NewestTableFooterLogsGone.
		vrep, err := Verify(ctx, dir, nil, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(vrep.Unknown) != 0 {
			want := map[string]bool{}
			for k, b := range s.bodies {
				if !inNewest[k] {
					want[b] = true
				}
			}
			t.Logf("the newest table's log was reused: its messages are unknown (%+v)", vrep.Unknown)
			if rep := check(t, dir, "q", want); rep.Complete() || len(rep.Unknown) != 1 {
				t.Fatalf("salvage: complete %v, unknown %+v", rep.Complete(), rep.Unknown)
			}
			return
		}
		rep := check(t, dir, "q", all)
		if rep.Complete() || len(rep.Unknown) != 0 || !strings.Contains(strings.Join(rep.Problems, "\n"), "nothing of it is lost") {
			t.Fatalf("salvage: unknown %+v, problems %q; want the table rebuilt from its log, and not complete", rep.Unknown, rep.Problems)
		}
	})
	t.Run("NewestTableFooterLogsGone", func(t *testing.T) {
		t.Parallel()
		dir := s.copyTo(t)
		obsoleteLogs(t, dir)
		tbl := filepath.Join(dir, filepath.Base(newest))
		st, _ := os.Stat(tbl)
		flipByte(t, tbl, -20)
		vrep, err := Verify(ctx, dir, nil, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for k, b := range s.bodies {
			if !inNewest[k] {
				want[b] = true
			}
		}
		t.Logf("verify: %d readable, %d damaged, unknown %+v", vrep.Messages, len(vrep.Damaged), vrep.Unknown)
		if vrep.Messages != len(want) || len(vrep.Unknown) != 1 || vrep.Unknown[0].File != filepath.Base(tbl) || vrep.Unknown[0].Bytes != st.Size() {
			t.Fatalf("verify: %d readable (want %d), unknown %+v (want %s, %d bytes)", vrep.Messages, len(want), vrep.Unknown, filepath.Base(tbl), st.Size())
		}
		rep := check(t, dir, "q", want)
		if rep.Complete() || len(rep.Unknown) != 1 {
			t.Fatalf("salvage: complete %v, unknown %+v", rep.Complete(), rep.Unknown)
		}
	})

	// The table that holds the queue record (and the format record and the
	// counters): the queue is rebuilt under a new name.
	var first string
	var inFirst map[uint64]bool
	for _, p := range s.tables {
		if keys, q := tableKeys(t, p); q {
			first, inFirst = p, keys
		}
	}
	t.Run("QueueRecordTableFooter", func(t *testing.T) {
		t.Parallel()
		dir := s.copyTo(t)
		flipByte(t, filepath.Join(dir, filepath.Base(first)), -20)
		want := map[string]bool{}
		for k, b := range s.bodies {
			if !inFirst[k] {
				want[b] = true
			}
		}
		vrep, err := Verify(ctx, dir, nil, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("verify: %d queues, %d readable, %d damaged, unknown %+v, problems %q", vrep.Queues, vrep.Messages, len(vrep.Damaged), vrep.Unknown, vrep.Problems)
		if vrep.Messages != len(want) || len(vrep.Unknown) != 1 || vrep.Queues != 1 {
			t.Fatalf("verify: %d queues, %d readable (want 1 queue, %d), unknown %+v", vrep.Queues, vrep.Messages, len(want), vrep.Unknown)
		}
		for _, d := range vrep.Damaged {
			if d.MessageID == "" || !inFirst[d.Key] {
				t.Fatalf("damaged %+v: want a message of the unreadable table, with its id", d)
			}
		}
		rep := check(t, dir, "salvaged-queue-1", want)
		if rep.Complete() || rep.Queues != 1 || !strings.Contains(strings.Join(rep.Problems, "\n"), "salvaged-queue-1") {
			t.Fatalf("salvage: %d queues, problems %q: want queue salvaged-queue-1 named", rep.Queues, rep.Problems)
		}
	})

	// A flipped byte in the MANIFEST (issue 28, defect 3: Pebble's open,
	// and so both tools, failed on a table that a later record deleted).
	desc, err := pebble.Peek(s.dir, vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(desc.ManifestFilename)
	for _, off := range []int64{200, 300, 450} {
		t.Run("Manifest"+strconv.FormatInt(off, 10), func(t *testing.T) {
			t.Parallel()
			if off >= st.Size() {
				t.Fatalf("the MANIFEST has %d bytes: the flip at %d misses it", st.Size(), off)
			}
			dir := s.copyTo(t)
			flipByte(t, filepath.Join(dir, filepath.Base(desc.ManifestFilename)), off)
			if _, err := Open(Config{Dir: dir, Options: storage.Options{Clock: clocktest.NewFakeClock(t0), Logger: testLogger(t)}}); err == nil {
				t.Fatal("the broker started on a damaged MANIFEST")
			}
			vrep, err := Verify(ctx, dir, nil, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("verify: %d readable, unknown %+v, problems %q", vrep.Messages, vrep.Unknown, vrep.Problems)
			if vrep.Messages != n || vrep.OK() {
				t.Fatalf("verify: %d readable, want %d and a problem", vrep.Messages, n)
			}
			rep := check(t, dir, "q", all)
			if rep.Complete() || len(rep.Lost) != 0 || len(rep.Unknown) != 0 {
				t.Fatalf("salvage: lost %d, unknown %+v: want nothing lost, and a problem", len(rep.Lost), rep.Unknown)
			}
		})
	}

	// Both at once: read table by table, a table with a damaged data block
	// is read forward up to it and backward down to it.
	t.Run("ManifestAndDataBlock", func(t *testing.T) {
		t.Parallel()
		dir := s.copyTo(t)
		flipByte(t, filepath.Join(dir, filepath.Base(desc.ManifestFilename)), 300)
		mid := filepath.Join(dir, filepath.Base(s.tables[1]))
		st, _ := os.Stat(mid)
		flipByte(t, mid, st.Size()/2)
		to := filepath.Join(t.TempDir(), "salvaged")
		rep, err := Salvage(ctx, dir, to, nil, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("salvage: %d messages, %d lost, unknown %+v", rep.Messages, len(rep.Lost), rep.Unknown)
		if len(rep.Unknown) != 1 || rep.Unknown[0].File != filepath.Base(mid) || rep.Unknown[0].Bytes <= 0 || rep.Unknown[0].Bytes > 64<<10 ||
			!strings.Contains(rep.Unknown[0].Problem, "1 of its") {
			t.Fatalf("unknown %+v: want one damaged block of %s", rep.Unknown, filepath.Base(mid))
		}
		// One data block holds a few messages' bodies: their metadata
		// reads, so they are listed as lost by id; every other is kept.
		if rep.Messages+len(rep.Lost) != n || len(rep.Lost) == 0 || len(rep.Lost) > 20 {
			t.Fatalf("salvage: %d copied, %d lost, want %d in all and a few lost", rep.Messages, len(rep.Lost), n)
		}
		got := drainQueue(t, to, "q")
		if len(got) != rep.Messages {
			t.Fatalf("the salvaged store serves %d messages, want %d", len(got), rep.Messages)
		}
		for b := range got {
			if !all[b] {
				t.Fatalf("served %.12q, never sent", b)
			}
		}
	})
}

// TestManifestMinLog: the minimum unflushed log number read past damage is
// the one Pebble's whole MANIFEST records; minUnflushedLog (the start's)
// stops at the damage.
func TestManifestMinLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{MemTableSize: 256 << 10, FormatMajorVersion: pebble.FormatNewest, Logger: newPebbleLogger(testLogger(t))})
	if err != nil {
		t.Fatal(err)
	}
	v := make([]byte, 1000)
	for i := range 2000 {
		if err := db.Set(u64Bytes(uint64(i)), v, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	desc, err := pebble.Peek(dir, vfs.Default)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(desc.ManifestFilename)
	if err != nil {
		t.Fatal(err)
	}
	want := minUnflushedLog(data)
	if got := manifestMinLog(data); got != want || want == 0 {
		t.Fatalf("manifestMinLog of a sound MANIFEST: %d, minUnflushedLog %d", got, want)
	}
	// A flip in the first half of the file (never in its last record) hides
	// the last number from minUnflushedLog, which stops at the damage, but
	// not from manifestMinLog; no flip makes either invent a larger one.
	hidden := 0
	for off := 0; off < len(data); off++ {
		b := slices.Clone(data)
		b[off] ^= 0xff
		got, start := manifestMinLog(b), minUnflushedLog(b)
		if got > want || start > want {
			t.Fatalf("flip at %d: manifestMinLog %d, minUnflushedLog %d, above %d", off, got, start, want)
		}
		if off < len(data)/2 && got != want {
			t.Fatalf("flip at %d of %d: manifestMinLog %d, want %d", off, len(data), got, want)
		}
		if start < want && got == want {
			hidden++
		}
	}
	if hidden == 0 {
		t.Fatal("no flip hid the number from minUnflushedLog")
	}
	t.Logf("MANIFEST of %d bytes: %d flips hide log number %d from minUnflushedLog, none in its first half from manifestMinLog", len(data), hidden, want)
}

// TestVersionKey: the versions store's keys order by user key, then newest
// first, and decode back.
func TestVersionKey(t *testing.T) {
	t.Parallel()
	keys := [][]byte{{}, {0}, {0, 0}, {0, 1}, {0, 0xff}, {1}, {1, 0}, []byte("a"), []byte("a\x00b"), []byte("ab")}
	var enc [][]byte
	for _, k := range keys {
		for _, seq := range []uint64{0, 7, 1 << 50} {
			vk := versionKey(k, seq)
			got, s, ok := splitVersionKey(vk)
			if !ok || string(got) != string(k) || s != seq {
				t.Fatalf("versionKey(%x, %d) decodes to %x, %d, %v", k, seq, got, s, ok)
			}
			enc = append(enc, vk)
		}
	}
	for i := 1; i < len(enc); i++ {
		a, sa, _ := splitVersionKey(enc[i-1])
		b, sb, _ := splitVersionKey(enc[i])
		order := strings.Compare(string(a), string(b))
		if order == 0 {
			order = -cmp.Compare(sa, sb) // newest first
		}
		if want := strings.Compare(string(enc[i-1]), string(enc[i])); (order < 0) != (want < 0) {
			t.Fatalf("%x@%d and %x@%d: encoded order %d, want %d", a, sa, b, sb, want, order)
		}
	}
}
