package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/sstable/block/blockkind"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Reading a store table by table, for Verify and Salvage when Pebble cannot
// read it as a whole.
//
// Pebble reads a store through its MANIFEST (the list of live table files,
// and the log number below which the write-ahead logs are obsolete) and
// through a merged view of the tables: a table whose footer or index is
// damaged fails every read of the key range it covers, however many other
// tables hold that range, and a damaged MANIFEST fails the open. Then the
// store is read as RocksDB's repair does: each table file on its own with
// Pebble's sstable package, and each live write-ahead log with its record
// reader and batch decoding, collecting every version of every key (user
// key, sequence number, kind). For each user key the version with the
// highest sequence number wins; a delete, or a range deletion with a higher
// number, hides the older ones. The winners are written into a scratch
// Pebble store, which the usual walk (verify.go) then reads.
//
// What is read:
//   - Tables: the MANIFEST's when Pebble opens the store, else every table
//     file in the directory. (Pebble deletes a compaction's input tables
//     right after it; one left behind by a crash at that moment, with the
//     MANIFEST damaged too, could bring back an older version of a record.)
//   - Logs: a log below the MANIFEST's minimum unflushed log number is
//     obsolete: its records are in tables, where a newer change to them may
//     since have been compacted away (a compaction into the last level drops
//     a deleted record with its delete, and numbers the survivors 0), so its
//     records could bring back a deleted message. Pebble keeps a few obsolete
//     logs to reuse their files. The number is the largest of every MANIFEST
//     record that reads, also past damage (manifestMinLog). A log whose every
//     record is at or below the highest sequence number of a readable table
//     was flushed, so it is obsolete too.
//   - An obsolete log stands in for an unreadable table when the MANIFEST
//     gives the table's sequence numbers and key bounds, and the logs still on
//     disk hold every sequence number of that range: their records inside the
//     table's bounds are then what the table was built from (a flush writes
//     the records of one log; a table whose numbers a compaction into the
//     last level set to 0 cannot be covered so).
//
// What cannot be read at all (a table whose footer or index is damaged, the
// damaged blocks of a table) is reported as an UnreadablePart with its size:
// how many messages it held cannot be told.

// UnreadablePart is a part of the store that could not be read at all, so
// that how many messages it held is unknown.
type UnreadablePart struct {
	// File is the store file.
	File string `json:"file"`
	// Bytes is the size of what could not be read.
	Bytes int64 `json:"bytes"`
	// Problem says what is wrong.
	Problem string `json:"problem"`
}

// rawTable is a table file to read on its own.
type rawTable struct {
	path string
	// From the MANIFEST (known): the table's sequence numbers and its user
	// key bounds (both inclusive).
	known          bool
	minSeq, maxSeq uint64
	lower, upper   []byte
}

// Kinds of the versions store's values (the first byte; the record's value
// follows a set).
const (
	versionSet        byte = 1
	versionDelete     byte = 2
	versionUnreadable byte = 3 // a record whose value does not read: hides older versions, copies nothing
)

// rangeDel is a range deletion: it hides the versions of [start, end) below seq.
type rangeDel struct {
	start, end []byte
	seq        uint64
}

// rebuilder collects the versions of every record into a scratch store.
type rebuilder struct {
	ctx      context.Context
	versions *pebble.DB
	batch    *pebble.Batch
	dels     []rangeDel
	maxSeq   uint64 // the highest sequence number read from a table
	unknown  []UnreadablePart
	problems []string
}

// tableReaderOptions are the options to read Sluice's tables with: Pebble's
// defaults, as Open writes them.
func tableReaderOptions() sstable.ReaderOptions {
	o := &pebble.Options{}
	o.EnsureDefaults()
	return o.MakeReaderOptions()
}

// rebuild reads the tables and the live logs of the store at dir on their
// own (fs shows damaged logs cut at their damage) and writes the record that
// wins for each key into a new Pebble store in scratchDir on scratchFS, which
// it returns open, with what it could not read.
func rebuild(ctx context.Context, fs vfs.FS, dir string, tables []rawTable, scratchFS vfs.FS, scratchDir string, log *slog.Logger) (db *pebble.DB, unknown []UnreadablePart, problems []string, err error) {
	pl := newPebbleLogger(log)
	scratch := func(name string) (*pebble.DB, error) {
		return pebble.Open(scratchFS.PathJoin(scratchDir, name), &pebble.Options{
			FS: scratchFS, DisableWAL: true, Logger: pl, FormatMajorVersion: pebble.FormatNewest,
		})
	}
	versions, err := scratch("versions")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("embedded: scratch store in %s: %w", scratchDir, err)
	}
	defer func() {
		_ = versions.Close()
		_ = scratchFS.RemoveAll(scratchFS.PathJoin(scratchDir, "versions"))
	}()
	rb := &rebuilder{ctx: ctx, versions: versions, batch: versions.NewBatch()}
	defer func() { _ = rb.batch.Close() }()
	ro := tableReaderOptions()
	var unreadable []rawTable
	for _, t := range tables {
		ok, err := rb.readTable(fs, t, ro)
		if err != nil {
			return nil, nil, nil, err
		}
		if !ok {
			unreadable = append(unreadable, t)
		}
	}
	if err := rb.readLogs(fs, dir, unreadable); err != nil {
		return nil, nil, nil, err
	}
	if err := rb.flush(); err != nil {
		return nil, nil, nil, err
	}
	out, err := scratch("resolved")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("embedded: scratch store in %s: %w", scratchDir, err)
	}
	if err := rb.resolve(out); err != nil {
		_ = out.Close()
		return nil, nil, nil, err
	}
	return out, rb.unknown, rb.problems, nil
}

// put adds a version of user key k.
func (rb *rebuilder) put(k []byte, seq uint64, kind byte, v []byte) error {
	vk := versionKey(k, seq)
	val := make([]byte, 1+len(v))
	val[0] = kind
	copy(val[1:], v)
	if err := rb.batch.Set(vk, val, nil); err != nil {
		return err
	}
	if rb.batch.Len() < 4<<20 {
		return nil
	}
	return rb.flush()
}

func (rb *rebuilder) flush() error {
	if err := rb.ctx.Err(); err != nil {
		return err
	}
	if rb.batch.Empty() {
		return nil
	}
	err := rb.batch.Commit(pebble.NoSync)
	_ = rb.batch.Close()
	rb.batch = rb.versions.NewBatch()
	return err
}

// putKV adds a record read from a table: user key k, its sequence number
// and kind, and its value (read only for a set).
func (rb *rebuilder) putKV(k []byte, seq pebble.SeqNum, kind pebble.InternalKeyKind, value func([]byte) ([]byte, bool, error), file string) error {
	switch kind {
	case pebble.InternalKeyKindSet, pebble.InternalKeyKindSetWithDelete:
		v, _, err := value(nil)
		if err != nil {
			rb.problems = append(rb.problems, fmt.Sprintf("table %s: the value of %s does not read: %s", file, describeKey(k), firstLine(err)))
			return rb.put(k, uint64(seq), versionUnreadable, nil)
		}
		return rb.put(k, uint64(seq), versionSet, v)
	case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
		return rb.put(k, uint64(seq), versionDelete, nil)
	}
	return nil // Sluice writes no other kind
}

// openTable opens the table at path with the sstable package (the reader
// reads the footer, the metaindex and the properties).
func openTable(ctx context.Context, fs vfs.FS, path string, ro sstable.ReaderOptions) (*sstable.Reader, error) {
	if n, err := strconv.ParseUint(strings.TrimSuffix(fs.PathBase(path), ".sst"), 10, 64); err == nil {
		setUint(&ro.CacheOpts.FileNum, n) // Pebble's errors name the file by it
	}
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	rd, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	r, err := sstable.NewReader(ctx, rd, ro)
	if err != nil {
		_ = rd.Close()
		return nil, err
	}
	return r, nil
}

// setUint sets *p to n (for a field of an unexported Pebble type).
func setUint[T ~uint64](p *T, n uint64) { *p = T(n) }

// checkTable opens the table at path and reads the blocks that every read of
// it needs (index, range deletions, filters), not its data blocks: a table
// that passes fails only the reads of its damaged data blocks, which the
// walk steps past (scanRange).
func checkTable(ctx context.Context, fs vfs.FS, path string, ro sstable.ReaderOptions) error {
	r, err := openTable(ctx, fs, path, ro)
	if err != nil {
		return err
	}
	defer r.Close()
	l, err := r.Layout()
	if err != nil {
		return err
	}
	it, err := r.NewRawRangeDelIter(ctx, sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return err
	}
	if it != nil {
		it.Close()
	}
	for _, f := range l.Filter {
		if err := readBlock(ctx, r, f.Handle, blockkind.Filter); err != nil {
			return err
		}
	}
	return nil
}

// readBlock reads (and checks the checksum of) one block of r.
func readBlock(ctx context.Context, r *sstable.Reader, bh block.Handle, kind blockkind.Kind) error {
	h, err := r.BlockReader().Read(ctx, block.NoReadEnv, nil, bh, kind, func(*block.Metadata, []byte) error { return nil })
	if err != nil {
		return err
	}
	h.Release()
	return nil
}

// readTable reads every readable record of table t. It reports false when
// the table does not read at all.
func (rb *rebuilder) readTable(fs vfs.FS, t rawTable, ro sstable.ReaderOptions) (bool, error) {
	file := fs.PathBase(t.path)
	var size int64
	if st, err := fs.Stat(t.path); err == nil {
		size = st.Size()
	}
	r, err := openTable(rb.ctx, fs, t.path, ro)
	if err == nil {
		if _, lerr := r.Layout(); lerr != nil { // the index
			_ = r.Close()
			r, err = nil, lerr
		}
	}
	if err != nil {
		rb.unknown = append(rb.unknown, UnreadablePart{File: file, Bytes: size,
			Problem: "the table does not read (" + firstLine(err) + "): how many messages it held is unknown"})
		return false, nil
	}
	defer r.Close()

	// Range deletions (purges, deleted queues).
	if it, err := r.NewRawRangeDelIter(rb.ctx, sstable.NoFragmentTransforms, sstable.NoReadEnv); err != nil {
		rb.problems = append(rb.problems, fmt.Sprintf("table %s: its range deletions do not read (%s): messages purged or of deleted queues may come back", file, firstLine(err)))
	} else if it != nil {
		s, err := it.First()
		for ; s != nil; s, err = it.Next() {
			for _, k := range s.Keys {
				if k.Kind() == pebble.InternalKeyKindRangeDelete {
					rb.dels = append(rb.dels, rangeDel{start: bytes.Clone(s.Start), end: bytes.Clone(s.End), seq: uint64(k.SeqNum())})
					rb.maxSeq = max(rb.maxSeq, uint64(k.SeqNum()))
				}
			}
		}
		it.Close()
		if err != nil {
			rb.problems = append(rb.problems, fmt.Sprintf("table %s: its range deletions do not read (%s): messages purged or of deleted queues may come back", file, firstLine(err)))
		}
	}

	// Point records: forward up to the first damaged block, then backward
	// from the end down to the last one.
	it, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.TableBlobContext{})
	if err != nil {
		return false, err
	}
	var last []byte
	for kv := it.First(); kv != nil; kv = it.Next() {
		if err := rb.putKV(kv.K.UserKey, kv.SeqNum(), kv.Kind(), kv.Value, file); err != nil {
			_ = it.Close()
			return false, err
		}
		rb.maxSeq = max(rb.maxSeq, uint64(kv.SeqNum()))
		last = append(last[:0], kv.K.UserKey...)
	}
	ferr := it.Error()
	_ = it.Close()
	if ferr == nil {
		return true, nil
	}
	it, err = r.NewIter(sstable.NoTransforms, nil, nil, sstable.TableBlobContext{})
	if err != nil {
		return false, err
	}
	var first []byte
	for kv := it.Last(); kv != nil; kv = it.Prev() {
		if last != nil && bytes.Compare(kv.K.UserKey, last) <= 0 {
			break
		}
		if err := rb.putKV(kv.K.UserKey, kv.SeqNum(), kv.Kind(), kv.Value, file); err != nil {
			_ = it.Close()
			return false, err
		}
		rb.maxSeq = max(rb.maxSeq, uint64(kv.SeqNum()))
		first = append(first[:0], kv.K.UserKey...)
	}
	_ = it.Close()
	n, bad, nbytes := damagedDataBlocks(rb.ctx, r)
	from, to := "its start", "its end"
	if last != nil {
		from = describeKey(last)
	}
	if first != nil {
		to = describeKey(first)
	}
	rb.unknown = append(rb.unknown, UnreadablePart{File: file, Bytes: nbytes,
		Problem: fmt.Sprintf("%d of its %d data blocks do not read (%s): the records after %s and before %s are unknown", bad, n, firstLine(ferr), from, to)})
	return true, nil
}

// damagedDataBlocks counts the data blocks of r that do not read, and
// their bytes.
func damagedDataBlocks(ctx context.Context, r *sstable.Reader) (n, bad int, size int64) {
	l, err := r.Layout()
	if err != nil {
		return 0, 0, 0
	}
	for _, bh := range l.Data {
		if readBlock(ctx, r, bh.Handle, blockkind.SSTableData) != nil {
			bad++
			size += int64(bh.Length)
		}
	}
	return len(l.Data), bad, size
}

// resolve writes, for each user key of the versions store, the winning
// version into out, unless a delete or a range deletion hides it.
func (rb *rebuilder) resolve(out *pebble.DB) error {
	slices.SortFunc(rb.dels, func(a, b rangeDel) int { return bytes.Compare(a.start, b.start) })
	var active []rangeDel
	next := 0
	// hidden reports whether a range deletion above seq covers k (keys come
	// in ascending order).
	hidden := func(k []byte, seq uint64) bool {
		for next < len(rb.dels) && bytes.Compare(rb.dels[next].start, k) <= 0 {
			active = append(active, rb.dels[next])
			next++
		}
		active = slices.DeleteFunc(active, func(d rangeDel) bool { return bytes.Compare(d.end, k) <= 0 })
		for _, d := range active {
			if d.seq > seq {
				return true
			}
		}
		return false
	}
	it, err := rb.versions.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	batch := out.NewBatch()
	defer func() { _ = batch.Close() }()
	var prev []byte
	unreadable := 0
	for valid := it.First(); valid; valid = it.Next() {
		k, seq, ok := splitVersionKey(it.Key())
		if !ok {
			return fmt.Errorf("embedded: rebuild: bad version key %x", it.Key())
		}
		if prev != nil && bytes.Equal(k, prev) {
			continue // an older version
		}
		prev = append(prev[:0], k...)
		v := it.Value()
		switch {
		case v[0] == versionUnreadable:
			unreadable++
			continue
		case v[0] != versionSet, hidden(k, seq):
			continue
		}
		if err := batch.Set(k, v[1:], nil); err != nil {
			return err
		}
		if batch.Len() >= 4<<20 {
			if err := batch.Commit(pebble.NoSync); err != nil {
				return err
			}
			_ = batch.Close()
			batch = out.NewBatch()
			if err := rb.ctx.Err(); err != nil {
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("embedded: rebuild: read the scratch store: %w", err)
	}
	return batch.Commit(pebble.NoSync)
}

// versionKey is the versions store's key of version seq of user key k: k
// with each 0x00 written 0x00 0xff, then 0x00 0x01, then the sequence number
// inverted, so that the store orders by user key, then newest first.
func versionKey(k []byte, seq uint64) []byte {
	out := make([]byte, 0, len(k)+12)
	for _, c := range k {
		out = append(out, c)
		if c == 0 {
			out = append(out, 0xff)
		}
	}
	out = append(out, 0, 1)
	return binary.BigEndian.AppendUint64(out, ^seq)
}

// splitVersionKey is versionKey's inverse.
func splitVersionKey(vk []byte) (k []byte, seq uint64, ok bool) {
	if len(vk) < 10 {
		return nil, 0, false
	}
	body, tail := vk[:len(vk)-10], vk[len(vk)-10:]
	if tail[0] != 0 || tail[1] != 1 {
		return nil, 0, false
	}
	k = make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		k = append(k, body[i])
		if body[i] == 0 {
			if i+1 >= len(body) || body[i+1] != 0xff {
				return nil, 0, false
			}
			i++
		}
	}
	return k, ^binary.BigEndian.Uint64(tail[2:]), true
}

// describeKey names a store key for a report: "message 42 of queue id 3
// (metadata)", or the key in hex.
func describeKey(k []byte) string {
	if len(k) == 18 && k[0] == pfxData {
		qid, key := u64(k[1:9]), u64(k[10:])
		switch k[9] {
		case kindMeta:
			return fmt.Sprintf("the metadata of message key %d of queue id %d", key, qid)
		case kindBody:
			return fmt.Sprintf("the body of message key %d of queue id %d", key, qid)
		}
	}
	return fmt.Sprintf("key %x", k)
}
