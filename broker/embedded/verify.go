package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/model"
)

// Offline checks: Verify reads every record of a stopped broker's data
// directory and lists what is damaged; Salvage copies every readable record
// into a new directory. Both read the store without writing to it, and take
// its lock, so a directory that a running broker holds is refused
// (ErrDirLocked).
//
// When Pebble opens the store and every table of it opens, both read it
// through Pebble (openSource). A damaged block hides the records inside it
// and nothing else: each range (the queue records, each queue's metadata,
// its bodies, its other records) is scanned on its own, and a scan that
// meets damage skips ahead (scanRange) and carries on past it, reporting the
// keys it could not read. When the store does not open (a damaged MANIFEST,
// a missing or truncated table) or a table does not open (a damaged footer
// or index), each table file and log is read on its own instead and the
// store rebuilt from them into a scratch directory (rebuild.go), which the
// same walk then reads; what could not be read at all is reported as
// unknown, with its size.

// DamagedMessage is a message whose record cannot be read, or that a
// receive already set aside.
type DamagedMessage struct {
	// Queue is the queue's name ("account:name" for another account).
	Queue string `json:"queue"`
	// MessageID is the message's id; "" when its metadata is unreadable.
	MessageID string `json:"messageId,omitempty"`
	// Key is the message's internal key.
	Key uint64 `json:"key"`
	// File is the store file that holds the damage, when known.
	File string `json:"file,omitempty"`
	// Problem says what is wrong.
	Problem string `json:"problem"`
	// SetAside: a receive met the damage and set the message aside earlier
	// (it is never delivered again).
	SetAside bool `json:"setAside,omitempty"`
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	// Format is the directory's format version (0: unknown, its record is
	// in a part of the store that does not read).
	Format uint64 `json:"format"`
	// Queues and Messages count what was read.
	Queues   int `json:"queues"`
	Messages int `json:"messages"`
	// Damaged lists the messages that cannot be delivered.
	Damaged []DamagedMessage `json:"damaged"`
	// Unknown lists the parts of the store that could not be read at all (a
	// table whose footer or index is damaged, a table's damaged blocks): how
	// many messages they held is unknown.
	Unknown []UnreadablePart `json:"unknown"`
	// Problems lists other damage: records that are not messages' (queue
	// records, FIFO dedup entries, move tasks) or key ranges that could not
	// be read, each with its file when known.
	Problems []string `json:"problems"`
}

// OK reports whether nothing is damaged.
func (r *VerifyReport) OK() bool {
	return len(r.Damaged) == 0 && len(r.Unknown) == 0 && len(r.Problems) == 0
}

// openReadOnly opens the store at dir without writing to it.
func openReadOnly(dir string, fs vfs.FS, log *slog.Logger) (*pebble.DB, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if _, err := fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("embedded: %s: %w", dir, err)
	}
	l := newPebbleLogger(log)
	db, err := pebble.Open(dir, &pebble.Options{
		FS: fs, ReadOnly: true, ErrorIfNotExists: true,
		Logger: l, EventListener: pebbleEvents(l, nil, nil),
	})
	if err != nil {
		return nil, openError("open store in", dir, err)
	}
	return db, nil
}

// source is the store that Verify and Salvage read: the store itself, or its
// rebuild in a scratch directory, with what the rebuild could not read.
type source struct {
	db       *pebble.DB
	unknown  []UnreadablePart
	problems []string
	closers  []func() error // run in reverse order by close
}

func (s *source) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		_ = s.closers[i]()
	}
}

// openSource opens the store at dir for reading (damaged logs cut at their
// damage). When Pebble opens it and each of its live tables opens (footer,
// index, range deletions and filters read: a few small reads per table),
// that is the store read. Otherwise it takes the directory's lock and
// rebuilds the store from its table files and logs (rebuild) in the scratch
// directory that scratch makes, which close removes.
func openSource(ctx context.Context, dir string, fs vfs.FS, damaged []logDamage, scratch func() (vfs.FS, string, error), log *slog.Logger) (*source, error) {
	if _, err := fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("embedded: %s: %w", dir, err)
	}
	cfs := withCuts(fs, damaged)
	ro := tableReaderOptions()
	var tables []rawTable
	why := ""
	db, err := openReadOnly(dir, cfs, log)
	if m := damagedManifest(damaged); m != nil && err == nil {
		// Pebble read the MANIFEST up to its damage: its list of tables is
		// an old one, which misses the tables written after it.
		_ = db.Close()
		err = fmt.Errorf("%s is damaged", fs.PathBase(m.File))
	}
	switch {
	case err == nil:
		tables, why, err = liveTables(ctx, db, cfs, dir, ro)
		if err == nil && why == "" {
			return &source{db: db, closers: []func() error{db.Close}}, nil
		}
		_ = db.Close()
		if err != nil {
			return nil, err
		}
	case errors.Is(err, ErrDirLocked):
		return nil, err
	default:
		openErr := err
		if e := errors.Unwrap(err); e != nil {
			err = e // Pebble's error, without "open store in <dir>"
		}
		why = "the store does not open (" + firstLine(err) + ")"
		if tables, err = tableFiles(cfs, dir); err != nil {
			return nil, err
		}
		if len(tables) == 0 && errors.Is(openErr, pebble.ErrDBDoesNotExist) {
			return nil, openErr // no store here at all
		}
	}
	lock, err := fs.Lock(fs.PathJoin(dir, "LOCK"))
	if err != nil {
		return nil, openError("lock", dir, err)
	}
	src := &source{closers: []func() error{lock.Close}}
	sfs, sdir, err := scratch()
	if err != nil {
		src.close()
		return nil, fmt.Errorf("embedded: make a scratch directory: %w", err)
	}
	src.closers = append(src.closers, func() error { return sfs.RemoveAll(sdir) })
	log.Info("reading the store table by table", "dir", dir, "why", why, "scratch", sdir)
	rdb, unknown, problems, err := rebuild(ctx, cfs, dir, tables, sfs, sdir, log)
	if err != nil {
		src.close()
		return nil, err
	}
	src.db = rdb
	src.closers = append(src.closers, rdb.Close)
	src.unknown = unknown
	src.problems = append([]string{why + ": each table file and log was read on its own"}, problems...)
	return src, nil
}

// damagedManifest is the MANIFEST among the damaged logs, nil if none.
func damagedManifest(damaged []logDamage) *logDamage {
	for i, d := range damaged {
		if strings.HasPrefix(filepath.Base(d.File), "MANIFEST-") {
			return &damaged[i]
		}
	}
	return nil
}

// damageProblem is how Verify and Salvage report damage in the middle of a
// log or of the MANIFEST.
func damageProblem(d logDamage) string {
	if strings.HasPrefix(filepath.Base(d.File), "MANIFEST-") {
		return d.String() + ": Pebble cannot read the store's list of tables past the damage (the broker refuses to start), so every table file and log is read on its own"
	}
	return d.String() + ": the records after the damage are lost (the broker refuses to start; salvage keeps the records before it)"
}

// liveTables lists the live tables of db, and says which one does not open
// ("" when all do).
func liveTables(ctx context.Context, db *pebble.DB, fs vfs.FS, dir string, ro sstable.ReaderOptions) ([]rawTable, string, error) {
	levels, err := db.SSTables()
	if err != nil {
		return nil, "", err
	}
	var tables []rawTable
	why := ""
	for _, level := range levels {
		for _, t := range level {
			path := fs.PathJoin(dir, t.BackingSSTNum.String()+".sst")
			tables = append(tables, rawTable{path: path, known: true,
				minSeq: uint64(t.SmallestSeqNum), maxSeq: uint64(t.LargestSeqNum),
				lower: bytes.Clone(t.Smallest.UserKey), upper: bytes.Clone(t.Largest.UserKey)})
			if why != "" {
				continue
			}
			if err := checkTable(ctx, fs, path, ro); err != nil {
				why = fmt.Sprintf("table %s does not read (%s)", fs.PathBase(path), firstLine(err))
			}
		}
	}
	return tables, why, nil
}

// tableFiles lists every table file in dir.
func tableFiles(fs vfs.FS, dir string) ([]rawTable, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded: %s: %w", dir, err)
	}
	slices.Sort(names)
	var tables []rawTable
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			tables = append(tables, rawTable{path: fs.PathJoin(dir, n)})
		}
	}
	return tables, nil
}

// problemText is err's first line with the file it names, if any.
func problemText(err error) string {
	if f := corruptFile(err); f != "" {
		return firstLine(err) + " (file " + f + ")"
	}
	return firstLine(err)
}

// scanRange calls fn for every readable record in [lo, hi). Where the scan
// meets an unreadable block it reports lost (the last key read before it, or
// nil, and the error) and, for keys that are lo followed by a number (as
// message keys are), skips past the damage: it seeks to last+1, +2, +4, ...
// until a seek reads, then back (a binary search) to the first key at which
// a seek reads, so that one damaged block costs only the records in it. For
// other keys it stops at the damage.
func scanRange(r pebble.Reader, lo, hi []byte, fn func(k, v []byte) error, lost func(after []byte, err error)) error {
	// seek returns an iterator positioned at the first key >= k, or nil
	// when that seek meets damage. (A Pebble iterator that failed stays
	// failed: each try takes a fresh one.)
	var damage error // the last seek's damage
	seek := func(k []byte) (*pebble.Iterator, bool, error) {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return nil, false, err
		}
		valid := it.SeekGE(k)
		if damage = it.Error(); damage != nil {
			_ = it.Close()
			return nil, false, nil
		}
		return it, valid, nil
	}
	numKey := func(n uint64) []byte { return append(append([]byte(nil), lo...), u64Bytes(n)...) }
	it, valid, err := seek(lo)
	if err != nil {
		return err
	}
	var last []byte
	for {
		if it != nil {
			for ; valid; valid = it.Next() {
				v, err := it.ValueAndErr()
				if err != nil {
					lost(it.Key(), err)
					continue
				}
				if err := fn(it.Key(), v); err != nil {
					_ = it.Close()
					return err
				}
				last = append(last[:0], it.Key()...)
			}
			err := it.Error()
			_ = it.Close()
			if err == nil {
				return nil
			}
			lost(last, err)
		} else {
			lost(last, damage)
		}
		var n uint64
		switch {
		case last == nil:
		case len(last) == len(lo)+8 && bytes.HasPrefix(last, lo):
			n = u64(last[len(lo):])
		default:
			return nil
		}
		// Find a seek that reads past the damage.
		var good uint64
		for step := uint64(1); ; step <<= 1 {
			if step == 0 || n+step < n || bytes.Compare(numKey(n+step), hi) >= 0 {
				return nil
			}
			probe, _, err := seek(numKey(n + step))
			if err != nil {
				return err
			}
			if probe != nil {
				_ = probe.Close()
				good = n + step
				break
			}
		}
		// Back to the first key at which a seek reads: bad < k <= good.
		bad := good - (good-n)/2
		if bad == good {
			bad = n
		}
		for bad+1 < good {
			mid := bad + (good-bad)/2
			probe, _, err := seek(numKey(mid))
			if err != nil {
				return err
			}
			if probe != nil {
				_ = probe.Close()
				good = mid
			} else {
				bad = mid
			}
		}
		if it, valid, err = seek(numKey(good)); err != nil {
			return err
		}
		last = numKey(good - 1)
	}
}

// Verify checks every record of the data directory dir (fs nil: the real
// file system) of a stopped broker and reports what is damaged, including a
// log or MANIFEST damaged before its end (logcheck.go; reported as a
// problem, the records before the damage are read). A store that Pebble
// cannot read as a whole is read table by table (openSource), in a scratch
// directory under the system's temporary directory. The error is for a
// directory that cannot be checked at all (missing, or locked by a running
// broker).
func Verify(ctx context.Context, dir string, fs vfs.FS, log *slog.Logger) (*VerifyReport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if fs == nil {
		fs = vfs.Default
	}
	rep := &VerifyReport{Damaged: []DamagedMessage{}, Unknown: []UnreadablePart{}, Problems: []string{}}
	// Damage in the middle of a log (logcheck.go): the store is read as if
	// the log ended at the damage.
	logs, err := scanLogs(fs, dir)
	if err != nil {
		rep.Problems = append(rep.Problems, "logs: "+err.Error())
	}
	for _, d := range logs {
		rep.Problems = append(rep.Problems, damageProblem(d))
	}
	src, err := openSource(ctx, dir, fs, logs, func() (vfs.FS, string, error) {
		d, err := os.MkdirTemp("", "sluice-verify-")
		return vfs.Default, d, err
	}, log)
	if err != nil {
		return nil, err
	}
	defer src.close()
	rep.Unknown = append(rep.Unknown, src.unknown...)
	rep.Problems = append(rep.Problems, src.problems...)
	err = walk(ctx, src.db, walker{
		format: func(v uint64) { rep.Format = v },
		queue:  func(*queueRecord) { rep.Queues++ },
		message: func(q *queueRecord, key uint64, meta, body []byte) error {
			rep.Messages++
			return nil
		},
		damaged:    func(d DamagedMessage) { rep.Damaged = append(rep.Damaged, d) },
		problem:    func(p string) { rep.Problems = append(rep.Problems, p) },
		scanBodies: len(src.unknown) > 0,
	})
	return rep, err
}

// walker receives what walk reads.
type walker struct {
	format func(v uint64)
	// queue is called for each readable queue record, before its messages.
	queue func(q *queueRecord)
	// message is called for each message whose metadata and body are both
	// readable and decode.
	message func(q *queueRecord, key uint64, meta, body []byte) error
	// other is called for every other readable record of a queue (FIFO
	// dedup and receive-attempt entries), and for the counters, move
	// tasks and schedules (q nil).
	other   func(q *queueRecord, k, v []byte) error
	damaged func(d DamagedMessage)
	problem func(p string)
	// scanBodies: look for bodies without metadata in every queue (the
	// store was rebuilt and some part of it is unknown), not only in a
	// queue whose metadata scan met damage.
	scanBodies bool
}

// walk reads every record of db and hands it to w.
func walk(ctx context.Context, db *pebble.DB, w walker) error {
	if w.other == nil {
		w.other = func(*queueRecord, []byte, []byte) error { return nil }
	}
	v, err := getU64(db, keyFormat)
	if err != nil {
		w.problem("format record: " + problemText(err))
	}
	switch {
	case v == 0 && w.scanBodies:
		// In an unreadable part, not absent (a directory of format 1):
		// unknown (salvage writes the current one).
		w.problem("the format record is in a part of the store that does not read: the format is unknown")
	case v == 0:
		v = formatImplicit
	}
	w.format(v)
	// Counters (and the format record).
	err = scanRange(db, []byte{pfxCounter}, []byte{pfxCounter + 1}, func(k, v []byte) error {
		if bytes.Equal(k, keyReceiptKey) && len(v) != model.ReceiptKeySize {
			// Open refuses it (errCorrupt): left out, so that a salvaged
			// store starts and makes a new key.
			w.problem(fmt.Sprintf("receipt key record: %d bytes, want %d (the broker does not start on it; salvage leaves it out, and the salvaged store makes a new key: receipt handles issued before stop working, and their messages come back when their visibility timeout ends)", len(v), model.ReceiptKeySize))
			return nil
		}
		return w.other(nil, k, v)
	}, func(after []byte, err error) { w.problem("counter records: " + problemText(err)) })
	if err != nil {
		return err
	}
	// Move tasks.
	err = scanRange(db, []byte{pfxMoveTask}, []byte{pfxMoveTask + 1}, func(k, v []byte) error {
		return w.other(nil, k, v)
	}, func(after []byte, err error) { w.problem("move task records: " + problemText(err)) })
	if err != nil {
		return err
	}
	// Schedules.
	err = scanRange(db, []byte{pfxSchedule}, []byte{pfxSchedule + 1}, func(k, v []byte) error {
		return w.other(nil, k, v)
	}, func(after []byte, err error) { w.problem("schedule records: " + problemText(err)) })
	if err != nil {
		return err
	}
	var queues []*queueRecord
	err = scanRange(db, []byte{pfxQueue}, []byte{pfxQueue + 1}, func(k, v []byte) error {
		var rec queueRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			w.problem(fmt.Sprintf("queue record %q does not decode: %v", k[1:], err))
			return nil
		}
		queues = append(queues, &rec)
		return nil
	}, func(after []byte, err error) {
		w.problem("queue records (a queue may be missing, with its messages): " + problemText(err))
	})
	if err != nil {
		return err
	}
	orphans, err := orphanQueues(db, queues)
	if err != nil {
		w.problem("looking for records of queues without a queue record: " + problemText(err))
	}
	for _, o := range orphans {
		if o.rec == nil {
			w.problem(fmt.Sprintf("queue id %d has records but no queue record and no message: its records are left out", o.id))
			continue
		}
		w.problem(fmt.Sprintf("queue id %d has messages but its queue record does not read: they are kept in the new queue %s, with the default attributes and the longest retention (%s): its name, attributes and tags are unknown",
			o.id, o.rec.Name, o.rec.Config.Retention))
		queues = append(queues, o.rec)
	}
	for _, q := range queues {
		if err := ctx.Err(); err != nil {
			return err
		}
		w.queue(q)
		if err := walkQueue(db, q, w); err != nil {
			return err
		}
	}
	return nil
}

// walkQueue reads the records of queue q.
func walkQueue(db *pebble.DB, q *queueRecord, w walker) error {
	name := q.ref().String()
	gap := false // a metadata block did not read
	lo, hi := kindRange(q.ID, kindMeta)
	err := scanRange(db, lo, hi, func(k, meta []byte) error {
		key := u64(k[len(k)-8:])
		m, err := decodeMeta(key, meta)
		if err != nil {
			w.damaged(DamagedMessage{Queue: name, Key: key, Problem: "metadata record does not decode"})
			return nil
		}
		body, closer, err := db.Get(msgKey(q.ID, kindBody, key))
		if err != nil {
			w.damaged(DamagedMessage{Queue: name, MessageID: m.id(), Key: key, File: corruptFile(err), Problem: "body unreadable: " + firstLine(err)})
			return nil
		}
		defer closer.Close()
		var bm model.Message
		if err := decodeBody(body, &bm); err != nil {
			w.damaged(DamagedMessage{Queue: name, MessageID: m.id(), Key: key, Problem: "body record does not decode"})
			return nil
		}
		return w.message(q, key, meta, body)
	}, func(after []byte, err error) {
		gap = true
		from := "its start"
		if len(after) >= 8 {
			from = fmt.Sprintf("key %d", u64(after[len(after)-8:]))
		}
		w.problem(fmt.Sprintf("metadata of queue %s unreadable after %s until the scan resumes (the messages whose bodies read are listed by id): %s", name, from, problemText(err)))
	})
	if err != nil {
		return err
	}
	// Bodies whose metadata is gone: listed by the id their body holds.
	if gap || w.scanBodies {
		lo, hi = kindRange(q.ID, kindBody)
		err = scanRange(db, lo, hi, func(k, body []byte) error {
			key := u64(k[len(k)-8:])
			if exists(db, msgKey(q.ID, kindMeta, key)) || exists(db, msgKey(q.ID, kindDamage, key)) {
				return nil // delivered, or listed as set aside
			}
			var bm model.Message
			_ = decodeBody(body, &bm)
			w.damaged(DamagedMessage{Queue: name, MessageID: bm.ID, Key: key, Problem: "metadata unreadable: its body reads, but not its state"})
			return nil
		}, func([]byte, error) {
			// A body that does not read was listed with its metadata, or
			// the metadata gap above holds it.
		})
		if err != nil {
			return err
		}
	}
	// Damage records: messages set aside by a receive.
	lo, hi = kindRange(q.ID, kindDamage)
	err = scanRange(db, lo, hi, func(k, v []byte) error {
		var rec damageRecord
		_ = json.Unmarshal(v, &rec)
		w.damaged(DamagedMessage{Queue: name, MessageID: rec.MessageID, Key: u64(k[len(k)-8:]), File: rec.File, Problem: "set aside by a receive: " + rec.Error, SetAside: true})
		return w.other(q, k, v)
	}, func(after []byte, err error) { w.problem("damage records of queue " + name + ": " + problemText(err)) })
	if err != nil {
		return err
	}
	// Dedup window and FIFO receive-attempt entries.
	for _, kind := range []byte{kindDedup, kindAttempt} {
		lo, hi = kindRange(q.ID, kind)
		err = scanRange(db, lo, hi, func(k, v []byte) error { return w.other(q, k, v) },
			func(after []byte, err error) {
				w.problem(fmt.Sprintf("dedup and receive-attempt records of queue %s (deduplication may miss some ids): %s", name, problemText(err)))
			})
		if err != nil {
			return err
		}
	}
	// Message records (records.go) and their due keys: a status by id.
	for _, kind := range []byte{kindRecord, kindRecordDue} {
		lo, hi = kindRange(q.ID, kind)
		err = scanRange(db, lo, hi, func(k, v []byte) error { return w.other(q, k, v) },
			func(after []byte, err error) {
				w.problem(fmt.Sprintf("message records of queue %s (a status by id may miss some completed or replayed messages): %s", name, problemText(err)))
			})
		if err != nil {
			return err
		}
	}
	// Bodies without metadata are not read: nothing would deliver them.
	return nil
}

// exists reports whether db has key k readable.
func exists(db pebble.Reader, k []byte) bool {
	_, c, err := db.Get(k)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// getU64 reads a counter of db (0 when absent).
func getU64(db pebble.Reader, key []byte) (uint64, error) {
	v, c, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return u64(v), nil
}

// orphan is a queue id that owns records in the store but has no readable
// queue record; rec is the record made for it (nil when it has no message).
type orphan struct {
	id  uint64
	rec *queueRecord
}

// orphanQueues finds the queue ids that own records in db but have no
// readable queue record among known (the record was in a part of the store
// that does not read), and makes a record for each that has messages, so
// that they are kept: named salvaged-queue-<id> (with .fifo when its first
// message carries a FIFO sequence number; another suffix if the name is
// taken), with the default attributes but the longest retention (so that no
// message expires for want of its queue's), created when its first message
// was sent. The error is a read that failed; what was found before it is
// returned.
func orphanQueues(db pebble.Reader, known []*queueRecord) ([]orphan, error) {
	have := map[uint64]bool{}
	names := map[string]bool{}
	for _, q := range known {
		have[q.ID] = true
		if q.Account == "" {
			names[q.Name] = true
		}
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxData}, UpperBound: []byte{pfxData + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []orphan
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 9 {
			valid = it.Next()
			continue
		}
		qid := u64(k[1:9])
		if !have[qid] {
			out = append(out, orphan{id: qid, rec: orphanRecord(db, qid, names)})
		}
		if qid == math.MaxUint64 {
			break
		}
		valid = it.SeekGE(dataPrefix(qid + 1))
	}
	return out, it.Error()
}

// orphanRecord makes the queue record of orphan queue qid (see
// orphanQueues), nil when it has no readable message.
func orphanRecord(db pebble.Reader, qid uint64, names map[string]bool) *queueRecord {
	lo, hi := kindRange(qid, kindMeta)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil
	}
	defer it.Close()
	var first *msg
	for valid := it.First(); valid && first == nil; valid = it.Next() {
		k := it.Key()
		first, _ = decodeMeta(u64(k[len(k)-8:]), it.Value())
	}
	if first == nil {
		return nil
	}
	fifo := first.seq() != 0
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	name := fmt.Sprintf("salvaged-queue-%d%s", qid, suffix)
	for i := 2; names[name]; i++ {
		name = fmt.Sprintf("salvaged-queue-%d-%d%s", qid, i, suffix)
	}
	names[name] = true
	cfg := model.DefaultQueueConfig(fifo)
	cfg.Retention = model.MaxRetention
	created := time.Unix(0, first.sentAt).UTC()
	return &queueRecord{ID: qid, Name: name, Config: cfg, CreatedAt: created, ModifiedAt: created}
}
