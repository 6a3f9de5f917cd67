package archive

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testutil"
)

var epoch = time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)

func lines(ids ...string) []model.ExportLine {
	var out []model.ExportLine
	for _, id := range ids {
		out = append(out, model.ExportLine{ID: id, Body: "body " + id, CreatedAt: epoch})
	}
	return out
}

func ids(t *testing.T, dir string) []string {
	t.Helper()
	ls, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") { // the writers' lock files
			out = append(out, e.Name())
		}
	}
	return out
}

// open opens dir's archive at cur, as a backend does: storing the start
// cursor in *store.
func open(t *testing.T, cfg Config, clock model.Clock, store *Cursor) *Writer {
	t.Helper()
	w, start, err := Open(cfg, clock, testutil.Logger(t), *store)
	if err != nil {
		t.Fatal(err)
	}
	*store = start
	t.Cleanup(func() { w.Close() })
	return w
}

func commit(t *testing.T, w *Writer, store *Cursor, ls []model.ExportLine) {
	t.Helper()
	cur, err := w.Append(ls)
	if err != nil {
		t.Fatal(err)
	}
	*store = cur
	w.Committed(cur)
}

// A batch appended but not committed (the crash between the archive's
// sync and the store's commit) is cut by the next Open, in the open file
// and in a file a rotation began; the committed ones stay, once each.
func TestUncommittedBatchIsCut(t *testing.T) {
	t.Parallel()
	for _, first := range []bool{true, false} {
		dir := t.TempDir()
		clock := clocktest.NewFakeClock(epoch)
		cfg := Config{Dir: dir, ID: "b1"}
		var store Cursor
		w := open(t, cfg, clock, &store)
		if !first {
			commit(t, w, &store, lines("a", "b"))
		}
		if _, err := w.Append(lines("c", "d")); err != nil { // the crash: never committed
			t.Fatal(err)
		}
		w.Close()
		if got := ids(t, dir); len(got) != len(lines("a", "b"))*boolInt(!first)+2 {
			t.Fatalf("before the restart the directory holds %v", got)
		}
		w = open(t, cfg, clock, &store)
		want := []string{"c", "d"}
		if !first {
			want = []string{"a", "b", "c", "d"}
		}
		if got := ids(t, dir); !slices.Equal(got, want[:len(want)-2]) {
			t.Fatalf("first=%v: after the restart the archive holds %v, want %v", first, got, want[:len(want)-2])
		}
		commit(t, w, &store, lines("c", "d")) // the sweep archives them again
		if got := ids(t, dir); !slices.Equal(got, want) {
			t.Fatalf("first=%v: the archive holds %v, want %v", first, got, want)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Files rotate by size and by the clock's day, their names sort by time
// and sequence, the closed ones lose ".open", and a batch begun in a new
// file that never committed is removed with that file.
func TestRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := clocktest.NewFakeClock(epoch)
	cfg := Config{Dir: dir, ID: "b1", MaxFileBytes: 1}
	var store Cursor
	w := open(t, cfg, clock, &store)
	commit(t, w, &store, lines("a"))
	commit(t, w, &store, lines("b")) // past 1 byte: a new file
	if got := names(t, dir); len(got) != 2 || !strings.HasSuffix(got[0], closedSuffix) || !strings.HasSuffix(got[1], openSuffix) {
		t.Fatalf("after two batches of 1 byte files: %v", got)
	}
	// The day: a large limit, the clock past midnight.
	w.Close()
	cfg.MaxFileBytes = 1 << 20
	w = open(t, cfg, clock, &store)
	commit(t, w, &store, lines("c")) // same file as b (same day, small)
	clock.Advance(2 * time.Hour)     // the next day
	commit(t, w, &store, lines("d"))
	got := names(t, dir)
	if len(got) != 3 || !strings.HasPrefix(got[2], "20260302T") || !strings.HasSuffix(got[1], closedSuffix) {
		t.Fatalf("after the day changed: %v", got)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("names do not sort: %v", got)
	}
	// A rotation whose first batch never committed: its file goes.
	w.Close()
	cfg.MaxFileBytes = 1
	w = open(t, cfg, clock, &store)
	if _, err := w.Append(lines("e")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if n := len(names(t, dir)); n != 4 {
		t.Fatalf("the uncommitted rotation's file is missing: %v", names(t, dir))
	}
	w = open(t, cfg, clock, &store)
	if got := ids(t, dir); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("after the restart: %v (files %v)", got, names(t, dir))
	}
	commit(t, w, &store, lines("e"))
	if got := ids(t, dir); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("after e: %v", got)
	}
}

// A store whose cursor is another id's (a restored backup, a changed
// --archive-id) starts a new archive instead of refusing to open.
func TestCursorOfAnotherID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := clocktest.NewFakeClock(epoch)
	store := Cursor{File: "20260301T230000Z-old-000007", Size: 99}
	w := open(t, Config{Dir: dir, ID: "new"}, clock, &store)
	if fi, ok := parseName(store.File + openSuffix); !ok || fi.id != "new" {
		t.Fatalf("start cursor %v", store)
	}
	commit(t, w, &store, lines("a"))
	if got := ids(t, dir); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("the archive holds %v", got)
	}
}

// Brokers sharing a directory keep to their own files.
func TestSharedDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := clocktest.NewFakeClock(epoch)
	var s1, s2 Cursor
	w1 := open(t, Config{Dir: dir, ID: "b1"}, clock, &s1)
	w2 := open(t, Config{Dir: dir, ID: "b2"}, clock, &s2)
	commit(t, w1, &s1, lines("a"))
	commit(t, w2, &s2, lines("b"))
	if _, err := w2.Append(lines("x")); err != nil { // uncommitted
		t.Fatal(err)
	}
	w1.Close()
	w1 = open(t, Config{Dir: dir, ID: "b1"}, clock, &s1) // b1 restarts: b2's files are not its own
	commit(t, w1, &s1, lines("c"))
	got := ids(t, dir)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c", "x"}) {
		t.Fatalf("the shared directory holds %v", got)
	}
}

// Two brokers with one id in one directory (two embedded brokers of one
// host given the same --archive-dir, whose default ids are equal) would
// reconcile each other's files with their own cursors: the second Open is
// refused while the first writer is open.
func TestSameIDInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := clocktest.NewFakeClock(epoch)
	var s1 Cursor
	w1 := open(t, Config{Dir: dir}, clock, &s1)
	if _, _, err := Open(Config{Dir: dir}, clock, slog.New(slog.DiscardHandler), Cursor{}); err == nil {
		t.Fatal("a second writer of the same id opened the same directory")
	}
	w1.Close()
	w2, _, err := Open(Config{Dir: dir}, clock, slog.New(slog.DiscardHandler), s1)
	if err != nil {
		t.Fatalf("open after the first writer closed: %v", err)
	}
	w2.Close()
}

// A failed write (here: the file made read-only under the writer, as a
// full disk refuses) stops archiving for RetryAfter, cuts what it wrote,
// and the writer works again afterwards.
func TestFailedWriteStopsForAWhile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := clocktest.NewFakeClock(epoch)
	var store Cursor
	w := open(t, Config{Dir: dir, ID: "b1"}, clock, &store)
	commit(t, w, &store, lines("a"))
	w.mu.Lock()
	good := w.f
	bad, err := os.Open(filepath.Join(dir, w.name+openSuffix)) // read-only: writes fail
	if err != nil {
		t.Fatal(err)
	}
	w.f = bad
	w.mu.Unlock()
	if _, err := w.Append(lines("b")); err == nil {
		t.Fatal("append to a read-only file succeeded")
	}
	if w.Available(clock.Now()) {
		t.Fatal("archiving still available after a failed write")
	}
	clock.Advance(RetryAfter)
	if !w.Available(clock.Now()) {
		t.Fatal("archiving not available again after RetryAfter")
	}
	w.mu.Lock()
	w.f = good
	w.mu.Unlock()
	bad.Close()
	commit(t, w, &store, lines("c"))
	if got := ids(t, dir); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("the archive holds %v", got)
	}
}

func TestCursorText(t *testing.T) {
	t.Parallel()
	for _, c := range []Cursor{{}, {File: "20260301T230000Z-b:1-000001", Size: 42}} {
		got, err := ParseCursor(c.String())
		if err != nil || got != c {
			t.Fatalf("ParseCursor(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := ParseCursor("x:y"); err == nil {
		t.Fatal("a bad size parsed")
	}
	if err := (Config{Dir: "d", ID: "a/b"}).Validate(); err == nil {
		t.Fatal("an id with a slash passed")
	}
}
