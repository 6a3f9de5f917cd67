package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/model"
)

// Offline checks: Verify reads every record of a stopped broker's data
// directory and lists what is damaged; Salvage copies every readable record
// into a new directory. Both open the store read-only, and take its lock,
// so a directory that a running broker holds is refused (ErrDirLocked).
//
// A damaged block hides the records inside it and nothing else: each range
// (the queue records, each queue's metadata, its bodies, its other records)
// is scanned on its own, and a scan that meets damage skips ahead (scanRange)
// and carries on past it, reporting the keys it could not read.

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
	// Format is the directory's format version.
	Format uint64 `json:"format"`
	// Queues and Messages count what was read.
	Queues   int `json:"queues"`
	Messages int `json:"messages"`
	// Damaged lists the messages that cannot be delivered.
	Damaged []DamagedMessage `json:"damaged"`
	// Problems lists other damage: records that are not messages' (queue
	// records, FIFO dedup entries, move tasks) or key ranges that could not
	// be read, each with its file when known.
	Problems []string `json:"problems"`
}

// OK reports whether nothing is damaged.
func (r *VerifyReport) OK() bool { return len(r.Damaged) == 0 && len(r.Problems) == 0 }

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
		Logger: l, EventListener: pebbleEvents(l),
	})
	if err != nil {
		return nil, openError("open store in", dir, err)
	}
	return db, nil
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
// problem, the records before the damage are read). The error is for a
// directory that cannot be checked at all (missing, locked by a running
// broker, or with a MANIFEST that Pebble cannot read).
func Verify(ctx context.Context, dir string, fs vfs.FS, log *slog.Logger) (*VerifyReport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if fs == nil {
		fs = vfs.Default
	}
	rep := &VerifyReport{Damaged: []DamagedMessage{}, Problems: []string{}}
	// Damage in the middle of a log (logcheck.go): the store is read as if
	// the log ended at the damage.
	logs, err := scanLogs(fs, dir)
	if err != nil {
		rep.Problems = append(rep.Problems, "logs: "+err.Error())
	}
	for _, d := range logs {
		rep.Problems = append(rep.Problems, d.String()+": the records after the damage are lost (the broker refuses to start; salvage keeps the records before it)")
	}
	db, err := openReadOnly(dir, withCuts(fs, logs), log)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	err = walk(ctx, db, walker{
		format: func(v uint64) { rep.Format = v },
		queue:  func(*queueRecord) { rep.Queues++ },
		message: func(q *queueRecord, key uint64, meta, body []byte) error {
			rep.Messages++
			return nil
		},
		damaged: func(d DamagedMessage) { rep.Damaged = append(rep.Damaged, d) },
		problem: func(p string) { rep.Problems = append(rep.Problems, p) },
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
	// dedup and receive-attempt entries), and for the counters and move
	// tasks (q nil).
	other   func(q *queueRecord, k, v []byte) error
	damaged func(d DamagedMessage)
	problem func(p string)
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
	if v == 0 {
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
		d := DamagedMessage{Queue: name, File: corruptFile(err), Problem: "metadata unreadable (messages after this key are unknown until the scan resumes): " + firstLine(err)}
		if len(after) >= 8 {
			d.Key = u64(after[len(after)-8:])
		}
		w.damaged(d)
	})
	if err != nil {
		return err
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
	// Bodies without metadata are not read: nothing would deliver them.
	return nil
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

// SalvageReport is what Salvage copied and what it could not.
type SalvageReport struct {
	// Queues and Messages count what was copied.
	Queues   int `json:"queues"`
	Messages int `json:"messages"`
	// Lost lists the messages that were not copied: unreadable, or set
	// aside earlier (SetAside; their damage records are copied).
	Lost []DamagedMessage `json:"lost"`
	// Problems lists other records that could not be read (see VerifyReport).
	Problems []string `json:"problems"`
}

// Salvage copies every readable record of the data directory from (of a
// stopped broker) into the new directory to, which must not exist or be
// empty, and reports what it could not copy. A broker then serves to; from
// is left as it was.
func Salvage(ctx context.Context, from, to string, fs vfs.FS, log *slog.Logger) (*SalvageReport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if fs == nil {
		fs = vfs.Default
	}
	if names, err := fs.List(to); err == nil && len(names) > 0 {
		return nil, fmt.Errorf("embedded: salvage into %s: the directory is not empty", to)
	}
	logs, _ := scanLogs(fs, from) // damaged logs are read up to the damage (logcheck.go)
	src, err := openReadOnly(from, withCuts(fs, logs), log)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	rep := &SalvageReport{Lost: []DamagedMessage{}, Problems: []string{}}
	for _, d := range logs {
		rep.Problems = append(rep.Problems, d.String()+": the records after the damage are lost")
	}
	if err := fs.MkdirAll(to, 0o755); err != nil {
		return nil, openError("create", to, err)
	}
	dst, err := pebble.Open(to, &pebble.Options{FS: fs, Logger: newPebbleLogger(log), FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		return nil, openError("create store in", to, err)
	}
	batch := dst.NewBatch()
	set := func(k, v []byte) error {
		if err := batch.Set(k, v, nil); err != nil {
			return err
		}
		if batch.Len() < 4<<20 {
			return nil
		}
		err := batch.Commit(pebble.NoSync)
		_ = batch.Close()
		batch = dst.NewBatch()
		return err
	}
	err = walk(ctx, src, walker{
		format: func(uint64) {},
		queue: func(q *queueRecord) {
			rep.Queues++
			if err := set(queueKey(q.ref()), q.encode()); err != nil {
				rep.Problems = append(rep.Problems, "write: "+err.Error())
			}
		},
		message: func(q *queueRecord, key uint64, meta, body []byte) error {
			rep.Messages++
			if err := set(msgKey(q.ID, kindMeta, key), meta); err != nil {
				return err
			}
			return set(msgKey(q.ID, kindBody, key), body)
		},
		other:   func(_ *queueRecord, k, v []byte) error { return set(k, v) },
		damaged: func(d DamagedMessage) { rep.Lost = append(rep.Lost, d) },
		problem: func(p string) { rep.Problems = append(rep.Problems, p) },
	})
	if err == nil {
		err = set(keyFormat, u64Bytes(formatCurrent))
	}
	if err == nil {
		err = batch.Commit(pebble.Sync)
	}
	_ = batch.Close()
	if err == nil {
		err = dst.Flush()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("embedded: salvage into %s: %w", to, err)
	}
	return rep, nil
}
