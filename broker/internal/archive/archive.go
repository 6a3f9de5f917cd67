// Package archive writes the messages whose retention ends on queues with
// ArchiveExpired to the broker's archive: gzip-compressed JSON lines (one
// model.ExportLine each, the format of `sluice dlq export`) in a directory
// the broker owns. Both backends use one Writer from their retention
// sweeper; docs/archive.md has the user's view.
//
// # Files
//
// A broker writes one file at a time, named
//
//	<UTC creation time, 20060102T150405Z>-<broker id>-<sequence>.jsonl.gz
//
// so that names sort by time and brokers sharing a directory never collide
// (each has its own id; the sequence, six digits or more, orders the files
// of one broker that began in the same second). While it is written the
// file's name ends in ".open"; it is closed (renamed without ".open") when
// it reaches Config.MaxFileBytes or when the clock's UTC day changes, at the
// start of the next batch. A file that is not ".open" is complete and never
// written again: ship and remove it at will.
//
// # Exactly once across a crash
//
// Each batch of lines is one gzip member appended to the open file (a file
// of several members is one valid gzip stream, which zcat and Go's gzip
// reader read whole) and made durable (fsync) before the backend removes
// the messages. The backend then stores, in the same atomic step that
// removes them (the Pebble batch, the PostgreSQL transaction), the Cursor
// the append returned: the open file's name and its size with the batch.
// The cursor in the store is therefore the truth: the file's bytes past it
// are a batch whose messages are still in the store. Reconcile (on Open, at
// every start, and after a step that failed or whose outcome is unknown)
// cuts the open file back to the stored size and removes an open file the
// cursor has not reached yet (a rotation whose first batch never
// committed), so such a batch is written again, once, by the sweep that
// removes its messages. A crash between the append and the commit thus
// never leaves a line twice, and a commit never loses its lines: they were
// durable before it.
package archive

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/model"
)

// DefaultMaxFileBytes is Config.MaxFileBytes's default: 64 MiB.
const DefaultMaxFileBytes = 64 << 20

// RetryAfter is how long archiving stays stopped after a failed write (a
// full disk): the messages whose retention ends meanwhile are removed
// without archive (Available is false), and the next batch after it tries
// again.
const RetryAfter = time.Minute

// Config is where and how a broker archives.
type Config struct {
	// Dir is the directory the broker owns for its archive (created if
	// missing). Empty: no archive; the expired messages of ArchiveExpired
	// queues are removed unarchived and counted as archive failures.
	Dir string
	// ID names this broker's files: 1..64 of A-Z a-z 0-9 . _ -. Brokers
	// sharing one Dir must have different ids; a broker keeps its id across
	// restarts (its cursor in the store names its file). Default: the host
	// name (its other characters as '_'), '-' and 8 hex digits of a hash of
	// Dir's absolute path.
	ID string
	// MaxFileBytes closes a file once it holds this many compressed bytes
	// (the batch that crosses it ends the file). Default
	// DefaultMaxFileBytes; at least 1.
	MaxFileBytes int64
}

// Enabled reports whether c archives (a Dir is set).
func (c Config) Enabled() bool { return c.Dir != "" }

// WithDefaults returns c with its zero fields set.
func (c Config) WithDefaults() Config {
	if c.ID == "" {
		// The host name and a hash of the directory's absolute path: two
		// brokers of one host with their own directories differ (on
		// PostgreSQL they share the cursors' table), and a broker restarted
		// on its directory keeps its id.
		h, _ := os.Hostname()
		abs, err := filepath.Abs(c.Dir)
		if err != nil {
			abs = c.Dir
		}
		f := fnv.New32a()
		f.Write([]byte(abs))
		id := sanitizeID(h)
		c.ID = id[:min(len(id), 55)] + fmt.Sprintf("-%08x", f.Sum32())
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	return c
}

// Validate names the field that is out of range.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if c.MaxFileBytes < 1 {
		return fmt.Errorf("archive MaxFileBytes %d: must be at least 1", c.MaxFileBytes)
	}
	if c.ID == "" || len(c.ID) > 64 || sanitizeID(c.ID) != c.ID {
		return fmt.Errorf("archive ID %q: must be 1..64 of A-Z a-z 0-9 . _ -", c.ID)
	}
	return nil
}

func sanitizeID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) == 0 {
		return "broker"
	}
	return string(b)
}

// Cursor is the durable position of a broker's archive, stored by the
// backend in the atomic step that removes the archived messages: the open
// file (its name without suffix) and its size after the batch.
type Cursor struct {
	File string
	Size int64
}

// String is the cursor as one string ("name:size"; "" for the zero
// cursor), for stores that keep it as text.
func (c Cursor) String() string {
	if c.File == "" {
		return ""
	}
	return c.File + ":" + strconv.FormatInt(c.Size, 10)
}

// ParseCursor reads Cursor.String's form.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Cursor{}, fmt.Errorf("archive cursor %q: no size", s)
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil || n < 0 {
		return Cursor{}, fmt.Errorf("archive cursor %q: bad size", s)
	}
	return Cursor{File: s[:i], Size: n}, nil
}

// The file suffixes.
const (
	closedSuffix = ".jsonl.gz"
	openSuffix   = ".jsonl.gz.open"
	timeLayout   = "20060102T150405Z"
)

// Writer appends batches to a broker's archive. One goroutine (the
// backend's sweeper) calls Append, Committed and Reconcile; mu guards the
// fields for Close and Available from others.
type Writer struct {
	cfg   Config
	clock model.Clock
	log   *slog.Logger

	mu        sync.Mutex
	f         *os.File  // the open file, nil when none
	name      string    // its name without suffix
	day       string    // its creation day, 20060102
	size      int64     // its bytes written (committed and pending)
	committed int64     // its size as the store has it
	seq       uint64    // the next file's sequence
	next      string    // the next file's name when the store has it already ("" to name one)
	failed    time.Time // archiving stopped until then (a failed write)
	logged    time.Time // the last failure's log line (at most one a minute)
	closed    bool
	lock      io.Closer // the id's lock file in the directory (lockName)
}

// lockName is the file a Writer holds locked in its directory while open:
// two writers of one id there would reconcile each other's files with
// their own cursors (removing or cutting committed lines), so the second
// is refused. Two embedded brokers of one host given the same directory
// have the same default id.
func lockName(id string) string { return "." + id + ".lock" }

// Open opens the archive of cfg (cfg.Enabled) at the cursor the store
// holds (the zero Cursor when it never archived) and reconciles the
// directory with it. start is the cursor to store before the first Append
// when it differs from cur (a store that never archived gets the name of
// its first file, so that a crash in its first batch is recognised too).
func Open(cfg Config, clock model.Clock, log *slog.Logger, cur Cursor) (w *Writer, start Cursor, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, Cursor{}, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, Cursor{}, fmt.Errorf("archive directory: %w", err)
	}
	lock, err := vfs.Default.Lock(filepath.Join(cfg.Dir, lockName(cfg.ID)))
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("archive id %q in %s is in use by another broker (give each its own --archive-id): %w", cfg.ID, cfg.Dir, err)
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	w = &Writer{cfg: cfg, clock: clock, log: log, lock: lock}
	if fi, ok := parseName(cur.File + openSuffix); cur.File != "" && (!ok || fi.id != cfg.ID) {
		// The store's cursor is another id's: the archive id changed, or
		// the store was restored or moved (its default id hashes the
		// directory). That archive is left as it is; this one starts anew.
		log.Warn("archive: the store's archive cursor names another archive id; starting this one anew (the other's open file is left as it was)",
			"cursor", cur.String(), "id", cfg.ID)
		cur = Cursor{}
	}
	if cur.File == "" {
		// The store never archived: its first file is named now, and any
		// open file of this id in the directory is older (another store's:
		// closed as it is) or is this one (a crash in the first batch:
		// removed), told apart by the sequence.
		if err := w.scan(); err != nil {
			return nil, Cursor{}, err
		}
		cur = Cursor{File: w.newName()}
	}
	if err := w.Reconcile(cur); err != nil {
		return nil, Cursor{}, err
	}
	return w, cur, nil
}

// fileInfo is a parsed file name of the archive.
type fileInfo struct {
	stem string // without suffix
	id   string
	seq  uint64
	day  string
	open bool
}

func parseName(name string) (fileInfo, bool) {
	var fi fileInfo
	switch {
	case strings.HasSuffix(name, openSuffix):
		fi.stem, fi.open = strings.TrimSuffix(name, openSuffix), true
	case strings.HasSuffix(name, closedSuffix):
		fi.stem = strings.TrimSuffix(name, closedSuffix)
	default:
		return fi, false
	}
	if len(fi.stem) < len(timeLayout)+3 || fi.stem[len(timeLayout)] != '-' {
		return fi, false
	}
	rest := fi.stem[len(timeLayout)+1:]
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return fi, false
	}
	seq, err := strconv.ParseUint(rest[i+1:], 10, 64)
	if err != nil {
		return fi, false
	}
	fi.id, fi.seq, fi.day = rest[:i], seq, fi.stem[:8]
	return fi, true
}

// scan reads this id's files: w.seq becomes past the highest sequence.
func (w *Writer) scan() error {
	files, err := w.files()
	if err != nil {
		return err
	}
	for _, fi := range files {
		w.seq = max(w.seq, fi.seq+1)
	}
	return nil
}

// files lists this id's files in the directory.
func (w *Writer) files() ([]fileInfo, error) {
	ents, err := os.ReadDir(w.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("archive directory: %w", err)
	}
	var out []fileInfo
	for _, e := range ents {
		if fi, ok := parseName(e.Name()); ok && fi.id == w.cfg.ID {
			out = append(out, fi)
		}
	}
	return out, nil
}

// newName names the next file (and takes its sequence).
func (w *Writer) newName() string {
	n := fmt.Sprintf("%s-%s-%06d", w.clock.Now().UTC().Format(timeLayout), w.cfg.ID, w.seq)
	w.seq++
	return n
}

// Reconcile makes the directory agree with cur, the cursor the store
// holds: the open file cur names is cut back to cur.Size and stays the one
// appended to; an open file of this id with a later sequence (a rotation
// whose first batch never committed) is removed; one with an earlier
// sequence (complete: the cursor passed it) is closed. A backend calls it
// on Open and after a step whose commit failed or is unknown, with the
// cursor it then reads from its store.
func (w *Writer) Reconcile(cur Cursor) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.name, w.next, w.size, w.committed = "", "", 0, 0
	curInfo, ok := parseName(cur.File + openSuffix)
	if !ok || curInfo.id != w.cfg.ID {
		return fmt.Errorf("archive cursor %q does not name a file of broker %s", cur.File, w.cfg.ID)
	}
	files, err := w.files()
	if err != nil {
		return err
	}
	w.seq = max(w.seq, curInfo.seq+1)
	changed := false
	for _, fi := range files {
		w.seq = max(w.seq, fi.seq+1)
		if !fi.open || fi.stem == cur.File {
			continue
		}
		path := filepath.Join(w.cfg.Dir, fi.stem+openSuffix)
		if fi.seq > curInfo.seq {
			w.log.Warn("archive: removing a file whose batch was not committed (it is archived again)", "file", path)
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("archive: %w", err)
			}
		} else if err := os.Rename(path, filepath.Join(w.cfg.Dir, fi.stem+closedSuffix)); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		changed = true
	}
	path := filepath.Join(w.cfg.Dir, cur.File+openSuffix)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Closed already (a rotation after its last batch), shipped, or not
		// begun: the next batch starts a file.
		if cur.Size == 0 && curInfo.seq+1 == w.seq {
			w.next = cur.File // not begun: begin it under the stored name
		}
	case err != nil:
		return fmt.Errorf("archive: %w", err)
	default:
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("archive: %w", err)
		}
		if st.Size() > cur.Size {
			w.log.Warn("archive: cutting a batch that was not committed (it is archived again)", "file", path, "from", st.Size(), "to", cur.Size)
			if err := f.Truncate(cur.Size); err != nil {
				f.Close()
				return fmt.Errorf("archive: %w", err)
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return fmt.Errorf("archive: %w", err)
			}
		}
		if st.Size() < cur.Size {
			// Cut or replaced behind the broker's back: the lines of the
			// committed batches past its end are not in the archive.
			w.log.Error("archive: the open file is shorter than the store's cursor: committed lines are missing from it", "file", path, "size", st.Size(), "cursor", cur.Size)
		}
		w.f, w.name, w.day = f, cur.File, curInfo.day
		w.size, w.committed = min(st.Size(), cur.Size), min(st.Size(), cur.Size)
	}
	if changed {
		return syncDir(w.cfg.Dir)
	}
	return nil
}

// Available reports whether archiving is on at now: false for a while
// after a failed write (RetryAfter).
func (w *Writer) Available(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.closed && !now.Before(w.failed)
}

// Append writes lines as one gzip member at the end of the open file
// (beginning a new file first when the open one is full or of another
// day) and syncs it. The returned cursor is the one the backend stores in
// the step that removes the messages; then it calls Committed, or, when
// the step failed, Reconcile with the cursor its store holds. A failed
// write cuts the file back, stops archiving for RetryAfter and logs (at
// most once a minute); the error says why.
func (w *Writer) Append(lines []model.ExportLine) (Cursor, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return Cursor{}, errors.New("archive closed")
	}
	now := w.clock.Now()
	cur, err := w.append(lines, now)
	if err != nil {
		w.failed = now.Add(RetryAfter)
		if w.logged.IsZero() || now.Sub(w.logged) >= time.Minute {
			w.logged = now
			w.log.Error("archive: cannot write; expired messages are removed without archive until a write succeeds (retried every minute)",
				"dir", w.cfg.Dir, "err", err)
		}
		return Cursor{}, err
	}
	return cur, nil
}

func (w *Writer) append(lines []model.ExportLine, now time.Time) (Cursor, error) {
	if w.f != nil && w.size != w.committed {
		// A batch the backend neither committed nor reconciled: cut it.
		if err := w.cut(); err != nil {
			return Cursor{}, err
		}
	}
	day := now.UTC().Format("20060102")
	if w.f != nil && (w.size >= w.cfg.MaxFileBytes || day != w.day) {
		if err := w.rotate(); err != nil {
			return Cursor{}, err
		}
	}
	if w.f == nil {
		name := w.next
		if name == "" {
			name = w.newName()
		}
		f, err := os.OpenFile(filepath.Join(w.cfg.Dir, name+openSuffix), os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o640)
		if err != nil {
			return Cursor{}, err
		}
		if err := syncDir(w.cfg.Dir); err != nil {
			f.Close()
			return Cursor{}, err
		}
		w.f, w.name, w.next, w.day, w.size, w.committed = f, name, "", name[:8], 0, 0
	}
	cw := &countWriter{w: w.f}
	zw := gzip.NewWriter(cw)
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	var err error
	for i := range lines {
		if err = enc.Encode(&lines[i]); err != nil {
			break
		}
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	w.size += cw.n
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		if cerr := w.cut(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return Cursor{}, err
	}
	return Cursor{File: w.name, Size: w.size}, nil
}

// cut truncates the open file to its committed size.
func (w *Writer) cut() error {
	if err := w.f.Truncate(w.committed); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	w.size = w.committed
	return nil
}

// rotate closes the open file: renamed without ".open", the directory
// synced. Only committed bytes are in it (append cut the rest).
func (w *Writer) rotate() error {
	dir := w.cfg.Dir
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	if err := os.Rename(filepath.Join(dir, w.name+openSuffix), filepath.Join(dir, w.name+closedSuffix)); err != nil {
		return err
	}
	return syncDir(dir)
}

// Committed tells w that the store holds cur (Append's cursor).
func (w *Writer) Committed(cur Cursor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur.File == w.name {
		w.committed = cur.Size
	}
	w.failed = time.Time{}
}

// Close closes the open file (it stays ".open": the next start appends to
// it). Idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	var err error
	if w.f != nil {
		err = w.f.Close()
		w.f = nil
	}
	if w.lock != nil {
		err = errors.Join(err, w.lock.Close())
		w.lock = nil
	}
	return err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// syncDir makes the directory's entries (a created, renamed or removed
// file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadDir reads every line of the archive files in dir (open and closed,
// of every broker), in file name order: for tests and tools.
func ReadDir(dir string) ([]model.ExportLine, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []model.ExportLine
	for _, e := range ents {
		if _, ok := parseName(e.Name()); !ok {
			continue
		}
		lines, err := readFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out = append(out, lines...)
	}
	return out, nil
}

func readFile(path string) ([]model.ExportLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return nil, err
	}
	zr, err := gzip.NewReader(f) // multistream: every batch's member
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(zr)
	var out []model.ExportLine
	for dec.More() {
		var l model.ExportLine
		if err := dec.Decode(&l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}
