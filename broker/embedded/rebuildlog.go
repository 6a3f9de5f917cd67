package embedded

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// The logs of a store read table by table (rebuild.go): which are live, the
// records of their batches, and obsolete ones standing in for an unreadable
// table.

// logBatch is one batch of a write-ahead log: its first sequence number, how
// many it takes, and its encoding.
type logBatch struct {
	seq   uint64
	count uint64
	repr  []byte
}

// readLog reads the batches of log ll up to its end or the first record that
// does not read (damage in a live log is reported by scanLogs).
func readLog(ll wal.LogicalLog) []logBatch {
	r := ll.OpenForRead()
	defer r.Close()
	var out []logBatch
	for {
		rec, _, err := r.NextRecord()
		if err != nil {
			return out
		}
		repr, err := io.ReadAll(rec)
		if err != nil {
			return out
		}
		h, ok := batchrepr.ReadHeader(repr)
		if !ok {
			return out
		}
		out = append(out, logBatch{seq: uint64(h.SeqNum), count: uint64(h.Count), repr: repr})
	}
}

// readLogs reads the live logs of dir, and the obsolete ones that stand in
// for an unreadable table of unreadable.
func (rb *rebuilder) readLogs(fs vfs.FS, dir string, unreadable []rawTable) error {
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		rb.problems = append(rb.problems, "logs: "+firstLine(err))
		return nil
	}
	minLog := storeMinLog(fs, dir)
	all := map[wal.NumWAL][]logBatch{}
	for _, ll := range logs {
		if uint64(ll.Num) < minLog {
			continue
		}
		bs := readLog(ll)
		all[ll.Num] = bs
		if len(bs) == 0 || lastSeq(bs) <= rb.maxSeq {
			continue // flushed: obsolete
		}
		for _, b := range bs {
			if err := rb.putBatch(b, nil); err != nil {
				return err
			}
		}
	}
	for _, t := range unreadable {
		if !t.known || t.minSeq == 0 {
			continue
		}
		for _, ll := range logs {
			if _, ok := all[ll.Num]; !ok {
				all[ll.Num] = readLog(ll)
			}
		}
		var spans [][2]uint64
		for _, ll := range logs {
			for _, b := range all[ll.Num] {
				if b.count > 0 {
					spans = append(spans, [2]uint64{b.seq, b.seq + b.count - 1})
				}
			}
		}
		if !covers(spans, t.minSeq, t.maxSeq) {
			continue
		}
		for _, ll := range logs {
			for _, b := range all[ll.Num] {
				if err := rb.putBatch(b, &t); err != nil {
					return err
				}
			}
		}
		// The table was rebuilt from its logs: nothing of it is unknown.
		file := fs.PathBase(t.path)
		rb.unknown = slices.DeleteFunc(rb.unknown, func(u UnreadablePart) bool { return u.File == file })
		rb.problems = append(rb.problems, fmt.Sprintf("table %s does not read; its records (sequence numbers %d to %d) were read from the log%s it was written from, still on disk: nothing of it is lost",
			file, t.minSeq, t.maxSeq, logList(fs, logs, all, t)))
	}
	return nil
}

// logList names the logs that hold sequence numbers of table t: " 000013.log".
func logList(fs vfs.FS, logs []wal.LogicalLog, all map[wal.NumWAL][]logBatch, t rawTable) string {
	var names []string
	for _, ll := range logs {
		for _, b := range all[ll.Num] {
			if b.count > 0 && b.seq+b.count-1 >= t.minSeq && b.seq <= t.maxSeq {
				_, path := ll.SegmentLocation(0)
				names = append(names, fs.PathBase(path))
				break
			}
		}
	}
	s := " " + strings.Join(names, ", ")
	if len(names) > 1 {
		s = "s" + s
	}
	return s
}

func lastSeq(bs []logBatch) uint64 {
	b := bs[len(bs)-1]
	return b.seq + b.count - 1
}

// covers reports whether spans (inclusive sequence-number ranges) hold every
// number from lo to hi.
func covers(spans [][2]uint64, lo, hi uint64) bool {
	slices.SortFunc(spans, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	next := lo
	for _, s := range spans {
		if s[0] > next {
			break
		}
		if s[1] >= next {
			next = s[1] + 1
			if next > hi {
				return true
			}
		}
	}
	return next > hi
}

// putBatch adds the records of a log batch; with t set, only those inside
// table t's sequence numbers and key bounds (range deletions cut to them).
func (rb *rebuilder) putBatch(b logBatch, t *rawTable) error {
	if t != nil && (b.count == 0 || b.seq > t.maxSeq || b.seq+b.count-1 < t.minSeq) {
		return nil
	}
	inside := func(seq uint64, k []byte) bool {
		return t == nil || seq >= t.minSeq && seq <= t.maxSeq && bytes.Compare(k, t.lower) >= 0 && bytes.Compare(k, t.upper) <= 0
	}
	r := batchrepr.Read(b.repr)
	seq := b.seq
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			rb.problems = append(rb.problems, fmt.Sprintf("a log batch at sequence number %d does not decode: %s", b.seq, firstLine(err)))
			return nil
		}
		if !ok {
			return nil
		}
		switch kind {
		case pebble.InternalKeyKindLogData:
			continue // takes no sequence number
		case pebble.InternalKeyKindSet, pebble.InternalKeyKindSetWithDelete:
			if inside(seq, k) {
				if err := rb.put(k, seq, versionSet, v); err != nil {
					return err
				}
			}
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
			if inside(seq, k) {
				if err := rb.put(k, seq, versionDelete, nil); err != nil {
					return err
				}
			}
		case pebble.InternalKeyKindRangeDelete:
			start, end := k, v
			if t != nil {
				if seq < t.minSeq || seq > t.maxSeq {
					break
				}
				if bytes.Compare(start, t.lower) < 0 {
					start = t.lower
				}
				if upper := append(bytes.Clone(t.upper), 0); bytes.Compare(end, upper) > 0 {
					end = upper
				}
			}
			if bytes.Compare(start, end) < 0 {
				rb.dels = append(rb.dels, rangeDel{start: bytes.Clone(start), end: bytes.Clone(end), seq: seq})
			}
		}
		seq++
	}
}

// storeMinLog is the minimum unflushed log number of the store at dir, from
// its MANIFEST (0 when none reads).
func storeMinLog(fs vfs.FS, dir string) uint64 {
	if c, ok := fs.(*cutFS); ok {
		fs = c.FS // the whole MANIFEST, past its damage too
	}
	path := ""
	if desc, err := pebble.Peek(dir, fs); err == nil && desc.Exists {
		path = desc.ManifestFilename
	}
	if path == "" { // no readable marker: the newest MANIFEST
		names, _ := fs.List(dir)
		best := ""
		for _, n := range names {
			if strings.HasPrefix(n, "MANIFEST-") && (len(n) > len(best) || len(n) == len(best) && n > best) {
				best = n
			}
		}
		if best == "" {
			return 0
		}
		path = fs.PathJoin(dir, best)
	}
	data, err := readFile(fs, path)
	if err != nil {
		return 0
	}
	return manifestMinLog(data)
}

// manifestMinLog is the minimum unflushed log number that the MANIFEST data
// records: the largest log number of every version edit that reads, those
// past damage too (0 when none reads). Unlike minUnflushedLog (the start's
// check, which stops at the first record that does not read), it looks past
// a chunk that does not read for the next valid one; the number only grows
// from edit to edit, so the largest readable one is the best lower bound.
func manifestMinLog(data []byte) uint64 {
	var minLog uint64
	var rec []byte
	inRecord := false
	done := func() {
		if n, ok := editLogNumber(rec); ok {
			minLog = max(minLog, n)
		}
	}
	for p := 0; p < len(data); {
		blockEnd := min((p/chunkBlock+1)*chunkBlock, len(data))
		if p+chunkLegacyHdr > blockEnd {
			p = blockEnd // a block's zeroed trailer
			continue
		}
		end, ok := chunkAt(data, p, 0, false)
		if !ok {
			p++ // damage: look for the next valid chunk
			inRecord = false
			continue
		}
		payload := data[p+chunkHeader(data[p+6]) : end]
		switch (data[p+6] - 1) % 4 {
		case 0: // a whole record
			rec = append(rec[:0], payload...)
			inRecord = false
			done()
		case 1: // a record's first chunk
			rec = append(rec[:0], payload...)
			inRecord = true
		case 2: // a middle one
			if inRecord {
				rec = append(rec, payload...)
			}
		case 3: // the last one
			if inRecord {
				rec = append(rec, payload...)
				done()
			}
			inRecord = false
		}
		p = end
	}
	return minLog
}
