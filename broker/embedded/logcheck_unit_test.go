package embedded

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// syncChunk appends to log a full WAL-sync chunk of log num with synced
// offset synced and payload p.
func syncChunk(log []byte, num uint32, synced uint64, p []byte) []byte {
	h := make([]byte, 19)
	h[6] = 9 // WAL sync, full
	binary.LittleEndian.PutUint32(h[7:], num)
	binary.LittleEndian.PutUint64(h[11:], synced)
	binary.LittleEndian.PutUint16(h[4:], uint16(len(p)))
	body := append(h[6:19:19], p...)
	c := crc32.Checksum(body, castagnoli)
	binary.LittleEndian.PutUint32(h[0:], (c>>15|c<<17)+0xa282ead8)
	return append(append(log, h[:6]...), body...)
}

// TestFindDamage: the chunk rules on hand-made logs of log number 7: a later
// chunk proves damage only when it carries this log's number and a synced
// offset past the damage; a reused file's stale chunks (log 3) never do.
func TestFindDamage(t *testing.T) {
	t.Parallel()
	payload := []byte("0123456789abcdef0123456789abcdef")
	// Three records of log 7, then a stale tail of log 3.
	build := func(thirdSynced uint64) ([]byte, []int) {
		var log []byte
		var at []int
		for _, synced := range []uint64{0, 51, thirdSynced} {
			at = append(at, len(log))
			log = syncChunk(log, 7, synced, payload)
		}
		at = append(at, len(log))
		for range 3 {
			log = syncChunk(log, 3, 1000, payload) // stale, synced "far"
		}
		return log, at
	}
	for _, tc := range []struct {
		name    string
		synced  uint64 // the third record's synced offset
		damage  func(log []byte, at []int) []byte
		bad     int  // index into at of the expected invalid chunk
		damaged bool // a proving chunk follows
	}{
		{"clean", 102, func(l []byte, _ []int) []byte { return l }, 3, false},
		{"flip in the second record, synced past it", 102, func(l []byte, at []int) []byte { l[at[1]+25] ^= 1; return l }, 1, true},
		{"flip in the second record, next not synced past it", 40, func(l []byte, at []int) []byte { l[at[1]+25] ^= 1; return l }, 1, false},
		{"length field of the second record", 102, func(l []byte, at []int) []byte { l[at[1]+4] ^= 0x40; return l }, 1, true},
		{"zeroed third record (torn, stale tail after)", 102, func(l []byte, at []int) []byte { clear(l[at[2]:at[3]]); return l }, 2, false},
		{"cut inside the third record", 102, func(l []byte, at []int) []byte { return l[:at[2]+20] }, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, at := build(tc.synced)
			log = tc.damage(log, at)
			bad, next := findDamage(log, 0, 7, true)
			t.Logf("bad %d next %d (records at %v)", bad, next, at)
			if tc.damaged != (next >= 0) {
				t.Fatalf("damage found at %d: %v, want %v", next, next >= 0, tc.damaged)
			}
			if tc.damaged && (bad != int64(at[tc.bad]) || next != int64(at[2])) {
				t.Fatalf("bad %d next %d, want %d and %d", bad, next, at[tc.bad], at[2])
			}
		})
	}
}
