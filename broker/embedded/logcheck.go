package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// The start check of the logs: a torn tail or damage in the middle.
//
// Pebble replays its write-ahead logs (NNNNNN.log; NNNNNN-NNN.log for the
// segments of a failover WAL) and its MANIFEST record by record, and stops
// at the first chunk that does not read: a crash in the middle of a write
// leaves exactly that, an incomplete or zeroed last chunk, and the start
// must succeed with everything before it. But a flipped byte in the middle
// of a log reads the same way to Pebble, and every record after it (changes
// that Sluice synced and acknowledged) would be dropped without a word.
//
// So before Pebble opens the directory, checkLogs reads each log with
// Pebble's own readers (wal.Scan and its virtual WAL reader; record.Reader
// for the MANIFEST) up to where they stop, and then looks past that point
// for a chunk that is valid for the same log: a known chunk type, a length
// that fits its 32 KiB block, the checksum over type and payload, and, in
// the recyclable and WAL-sync formats that every WAL of Pebble v2 uses, the
// log number of this very file. Pebble reuses old log files, so their stale
// tail holds chunks that look valid but carry an older log number: those are
// not damage. A stopping point with no valid chunk of the log after it (or
// none that proves the point synced, below) is a torn tail; one with such a
// chunk after it is damage in the middle, and the start is refused with the
// file, the offsets and what to do.
//
// A chunk after the stopping point proves damage only when it shows that
// the stopping point had been synced: after a power cut, the unsynced tail of
// the last, unacknowledged writes may reach the disk with holes (the disk
// writes pages out of order), and that tail must open. Pebble v2 writes WAL
// chunks with the offset up to which the log was synced when the chunk was
// written: a later chunk of the same log whose synced offset passes the
// stopping point proves it (syncedPast). Pebble syncs each MANIFEST record
// before it writes the next, so there the start of a later record proves it
// (recordStart).
//
// In the WAL every byte past the stopping point is tried as a chunk start
// (the log number makes a false match out of the question, and a damaged
// length field cannot hide what follows). The MANIFEST's chunks carry no
// log number: there the scan resumes after the damaged chunk's stated length
// and at the start of each later 32 KiB block (a chunk never straddles one),
// and walks the valid chunks from there to a record start.
//
// The cost is one read of each log file (a WAL is bounded by the memtable
// size, 4 MiB by default; Pebble keeps one or two) and of the MANIFEST.
//
// Damage to the last synced records of a log, with nothing synced after it,
// looks exactly like a torn tail and cannot be told from one.

// ErrLogDamaged: a log or the MANIFEST of the store is damaged before its
// end: the records after the damage were synced, and opening would drop them.
var ErrLogDamaged = errors.New("a store log is damaged before its end (records after the damage would be lost)")

// logDamage is one damaged log: an invalid chunk at Bad followed by a valid
// chunk of the same log at Next.
type logDamage struct {
	File      string
	Bad, Next int64
}

func (d logDamage) String() string {
	return fmt.Sprintf("%s: invalid chunk at offset %d, valid chunk of the same log at offset %d", filepath.Base(d.File), d.Bad, d.Next)
}

// checkLogs runs the scan in Open: it refuses the start on damage.
func checkLogs(fs vfs.FS, dir string) error {
	found, err := scanLogs(fs, dir)
	if err != nil {
		return fmt.Errorf("embedded: check the logs of %s: %w", dir, err)
	}
	if len(found) == 0 {
		return nil
	}
	d := found[0]
	more := ""
	if len(found) > 1 {
		more = fmt.Sprintf(" (and %d more damaged log files)", len(found)-1)
	}
	return fmt.Errorf("embedded: %s: %w: invalid chunk at offset %d, valid chunk of the same log at offset %d%s; the broker does not start: run `sluice store verify`, then `sluice store salvage` into a new directory (it keeps every record before the damage), or restore a backup",
		d.File, ErrLogDamaged, d.Bad, d.Next, more)
}

// scanLogs checks the write-ahead logs in dir that Pebble replays and the
// current MANIFEST. A log older than the MANIFEST's minimum unflushed log
// number is obsolete (its records are in table files; Pebble, RocksDB and
// etcd never replay it, and deleting it loses nothing), so damage in it is
// no damage; with no readable MANIFEST every log is checked. The error is
// for a file that cannot be read at all.
func scanLogs(fs vfs.FS, dir string) ([]logDamage, error) {
	var found []logDamage
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		return nil, err
	}
	var minLog uint64
	desc, err := pebble.Peek(dir, fs)
	if err == nil && desc.Exists && desc.ManifestFilename != "" {
		if data, err := readFile(fs, desc.ManifestFilename); err == nil {
			minLog = minUnflushedLog(data)
		}
	}
	for _, ll := range logs {
		if uint64(ll.Num) < minLog {
			continue // obsolete
		}
		d, err := scanWAL(fs, ll)
		if err != nil {
			return nil, err
		}
		if d != nil {
			found = append(found, *d)
		}
	}
	if desc == nil || !desc.Exists || desc.ManifestFilename == "" {
		return found, nil // Pebble's own open reports a missing or bad marker
	}
	d, err := scanManifest(fs, desc.ManifestFilename)
	if err != nil {
		return nil, err
	}
	if d != nil {
		found = append(found, *d)
	}
	return found, nil
}

// scanWAL reads the logical log ll as Pebble's replay does, and where the
// replay stops early, checks the rest of that physical file.
func scanWAL(fs vfs.FS, ll wal.LogicalLog) (*logDamage, error) {
	r := ll.OpenForRead()
	defer r.Close()
	for {
		_, off, err := r.NextRecord()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || off.PhysicalFile == "" {
			return nil, nil
		}
		// An invalid record, or a corruption error: look past it.
		data, rerr := readFile(fs, off.PhysicalFile)
		if rerr != nil {
			return nil, rerr
		}
		bad, next := findDamage(data, off.Physical, uint32(ll.Num), true)
		if next < 0 {
			return nil, nil
		}
		return &logDamage{File: off.PhysicalFile, Bad: bad, Next: next}, nil
	}
}

// scanManifest reads the MANIFEST at path record by record and, where the
// reader stops early, checks the rest of it.
func scanManifest(fs vfs.FS, path string) (*logDamage, error) {
	data, err := readFile(fs, path)
	if err != nil {
		return nil, err
	}
	r := record.NewReader(&byteReader{b: data}, 0)
	for {
		at := r.Offset()
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			bad, next := findDamage(data, at, 0, false)
			if next < 0 {
				return nil, nil
			}
			return &logDamage{File: path, Bad: bad, Next: next}, nil
		}
	}
}

// minUnflushedLog is the minimum unflushed log number the MANIFEST data
// records (0 when none is readable): the largest log number of its version
// edits, read up to the first record that does not read. Pebble writes an
// edit's fields in a fixed order, the comparator's name (tag 1) first when
// present and then the log number (tag 2), so only an edit's first fields
// are decoded; an edit that starts otherwise holds no log number
// (TestMinUnflushedLog checks the order against Pebble's own MANIFESTs).
func minUnflushedLog(data []byte) uint64 {
	var minLog uint64
	r := record.NewReader(&byteReader{b: data}, 0)
	for {
		rec, err := r.Next()
		if err != nil {
			return minLog
		}
		edit, err := io.ReadAll(rec)
		if err != nil {
			return minLog
		}
		if num, ok := editLogNumber(edit); ok {
			minLog = max(minLog, num)
		}
	}
}

// editLogNumber is the log number of a MANIFEST version edit, if it has one
// (see minUnflushedLog for the order of the fields).
func editLogNumber(edit []byte) (uint64, bool) {
	const tagComparator, tagLogNumber = 1, 2
	tag, n := binary.Uvarint(edit)
	if n > 0 && tag == tagComparator {
		l, m := binary.Uvarint(edit[n:])
		if m <= 0 || uint64(len(edit)-n-m) < l {
			return 0, false
		}
		edit = edit[n+m+int(l):]
		tag, n = binary.Uvarint(edit)
	}
	if n > 0 && tag == tagLogNumber {
		if num, m := binary.Uvarint(edit[n:]); m > 0 {
			return num, true
		}
	}
	return 0, false
}

// byteReader is an io.Reader over b (bytes.Reader would do, but
// record.Reader needs nothing more).
type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// The chunk format (pebble/v2/record, record.go):
//
//	legacy:     CRC (4) | length (2) | type (1) | payload
//	recyclable: CRC (4) | length (2) | type (1) | log number (4) | payload
//	WAL sync:   CRC (4) | length (2) | type (1) | log number (4) | synced offset (8) | payload
//
// types 1-4 are legacy, 5-8 recyclable, 9-12 WAL sync (full, first, middle,
// last); the CRC is Castagnoli's over type..payload, masked as LevelDB does.
// Chunks never straddle a 32 KiB block; a block's last bytes, too few for
// a header, are zero.
const (
	chunkBlock     = 32 << 10
	chunkLegacyHdr = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkHeader returns the header size of chunk type t, 0 for an unknown one.
func chunkHeader(t byte) int {
	switch {
	case t >= 1 && t <= 4:
		return chunkLegacyHdr
	case t >= 5 && t <= 8:
		return chunkLegacyHdr + 4
	case t >= 9 && t <= 12:
		return chunkLegacyHdr + 12
	}
	return 0
}

// chunkAt reports whether a valid chunk starts at offset o of data, and its
// end. With wal set the chunk must carry logNum (Pebble writes every WAL
// chunk with a log number); an EOF trailer (logNum+1) is not a chunk of
// the log.
func chunkAt(data []byte, o int, logNum uint32, wal bool) (end int, ok bool) {
	blockEnd := min((o/chunkBlock+1)*chunkBlock, len(data))
	if o+chunkLegacyHdr > blockEnd {
		return 0, false
	}
	hs := chunkHeader(data[o+6])
	if hs == 0 || o+hs > blockEnd {
		return 0, false
	}
	if hs > chunkLegacyHdr {
		if binary.LittleEndian.Uint32(data[o+7:]) != logNum {
			return 0, false
		}
	} else if wal {
		return 0, false
	}
	end = o + hs + int(binary.LittleEndian.Uint16(data[o+4:]))
	if end > blockEnd {
		return 0, false
	}
	c := crc32.Checksum(data[o+6:end], castagnoli)
	if binary.LittleEndian.Uint32(data[o:]) != (c>>15|c<<17)+0xa282ead8 {
		return 0, false
	}
	return end, true
}

// findDamage walks the chunks of data from offset from (where Pebble's
// reader stopped) to the first one that is not valid, bad, and returns the
// offset of a valid chunk of the same log after it, next, or -1 when there
// is none (a torn tail, or no invalid chunk at all).
func findDamage(data []byte, from int64, logNum uint32, wal bool) (bad, next int64) {
	p := int(from)
	for {
		if p >= len(data) {
			return -1, -1
		}
		blockEnd := min((p/chunkBlock+1)*chunkBlock, len(data))
		if p+chunkLegacyHdr > blockEnd || zeros(data[p:blockEnd]) && blockEnd-p < chunkLegacyHdr+12 {
			p = blockEnd // a block's zeroed trailer
			continue
		}
		end, ok := chunkAt(data, p, logNum, wal)
		if !ok {
			break
		}
		p = end
	}
	bad = int64(p)
	if wal {
		for o := p + 1; o+chunkLegacyHdr <= len(data); o++ {
			if _, ok := chunkAt(data, o, logNum, true); ok && syncedPast(data, o, bad) {
				return bad, int64(o)
			}
		}
		return bad, -1
	}
	// Without a log number: resume after the bad chunk's stated length, and
	// at each later block.
	starts := []int{}
	if hs := chunkHeader(data[p+6]); hs != 0 && p+hs <= len(data) {
		starts = append(starts, p+hs+int(binary.LittleEndian.Uint16(data[p+4:])))
	}
	for b := (p/chunkBlock + 1) * chunkBlock; b < len(data); b += chunkBlock {
		starts = append(starts, b)
	}
	for _, s := range starts {
		// Walk the valid chunks from s to the first that opens a record.
		for o := s; o > p && o < len(data); {
			blockEnd := min((o/chunkBlock+1)*chunkBlock, len(data))
			if o+chunkLegacyHdr > blockEnd || zeros(data[o:blockEnd]) {
				o = blockEnd
				continue
			}
			end, ok := chunkAt(data, o, 0, false)
			if !ok {
				break
			}
			if recordStart(data[o+6]) {
				return bad, int64(o)
			}
			o = end
		}
	}
	return bad, -1
}

// syncedPast reports whether the valid WAL chunk at o proves that offset bad
// was synced: a WAL-sync chunk carries the offset up to which the log was
// synced when the chunk was written, and one beyond bad means bad held
// synced (so valid) data. A chunk that claims less may be part of an
// unsynced tail that the disk wrote out of order before a power cut: not
// proof. A recyclable chunk carries no such offset, and is not proof either
// (Pebble writes it only in the first log of a directory created before
// Open made new directories at the newest format; see createNewest).
func syncedPast(data []byte, o int, bad int64) bool {
	if t := data[o+6]; t < 9 || t > 12 {
		return false
	}
	return binary.LittleEndian.Uint64(data[o+11:]) > uint64(bad)
}

// recordStart reports whether chunk type t opens a record (a full or first
// chunk). Pebble syncs each MANIFEST record before it writes the next one,
// so the start of a later record proves that the damaged one was synced; a
// later chunk of the same record does not.
func recordStart(t byte) bool {
	switch t {
	case 1, 2, 5, 6, 9, 10:
		return true
	}
	return false
}

// createNewest creates a Pebble store in dir when there is none yet, and
// closes it: Pebble writes the first log of a new store before it settles
// the format, in the recyclable chunk format, which carries no synced
// offset; every later log, including the first of each open, carries them.
func createNewest(fs vfs.FS, dir string, l pebbleLogger) error {
	if desc, err := pebble.Peek(dir, fs); err != nil || desc.Exists {
		return nil // Pebble's own open reports what Peek could not read
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: l, FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		return err
	}
	return db.Close()
}

// zeros reports whether b is all zero bytes.
func zeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// cutFS shows each damaged log cut at its damage, so that a read-only open
// (Verify, Salvage) replays every record before the damage; Pebble alone
// refuses the whole log when a later chunk proves the damage.
type cutFS struct {
	vfs.FS
	cut map[string]int64 // file path -> offset of the damage
}

// withCuts returns fs with the damaged logs of found cut, or fs as it is.
func withCuts(fs vfs.FS, found []logDamage) vfs.FS {
	if len(found) == 0 {
		return fs
	}
	c := &cutFS{FS: fs, cut: map[string]int64{}}
	for _, d := range found {
		c.cut[filepath.Clean(d.File)] = d.Bad
	}
	return c
}

// Open opens name, cut at its damage if it is a damaged log.
func (c *cutFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	if n, ok := c.cut[filepath.Clean(name)]; ok {
		return &cutFile{File: f, n: n}, nil
	}
	return f, nil
}

// cutFile reads as if the file ended at n.
type cutFile struct {
	vfs.File
	n, off int64
}

func (f *cutFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *cutFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.n {
		return 0, io.EOF
	}
	if rest := f.n - off; int64(len(p)) > rest {
		n, err := f.File.ReadAt(p[:rest], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return f.File.ReadAt(p, off)
}
