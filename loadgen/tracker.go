package loadgen

import "sync"

// tracker remembers which ids were confirmed sent and which were received,
// per producer, as bitsets: a receive of an id already seen is a duplicate,
// a confirmed id never received is missing. Receives of ids no producer
// of this run wrote (a null server's synthetic messages, leftovers) are
// counted as foreign.
type tracker struct {
	mu       sync.Mutex
	sent     map[int][]uint64
	seen     map[int][]uint64
	dups     int64
	foreign  int64
	received int64
}

func newTracker() *tracker {
	return &tracker{sent: map[int][]uint64{}, seen: map[int][]uint64{}}
}

func setBit(m map[int][]uint64, p int, n uint64) (was bool) {
	b := m[p]
	w := int(n / 64)
	if w >= len(b) {
		nb := make([]uint64, max(w+1, 2*len(b)))
		copy(nb, b)
		b = nb
		m[p] = b
	}
	mask := uint64(1) << (n % 64)
	was = b[w]&mask != 0
	b[w] |= mask
	return was
}

// confirmed records ids that the broker accepted.
func (t *tracker) confirmed(ids []uint64) {
	t.mu.Lock()
	for _, id := range ids {
		p, n := SplitID(id)
		setBit(t.sent, p, n)
	}
	t.mu.Unlock()
}

// receivedIDs records received ids and returns how many were duplicates.
func (t *tracker) receivedIDs(ids []uint64) {
	t.mu.Lock()
	for _, id := range ids {
		p, n := SplitID(id)
		if _, ok := t.sent[p]; !ok && p >= foreignProducer {
			t.foreign++
			continue
		}
		t.received++
		if setBit(t.seen, p, n) {
			t.dups++
		}
	}
	t.mu.Unlock()
}

// foreignProducer and above are producer numbers the generator never uses
// (the null server writes its synthetic messages as one of them).
const foreignProducer = 1 << 23

// missing counts confirmed ids never received.
func (t *tracker) missing() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for p, sent := range t.sent {
		seen := t.seen[p]
		for i, w := range sent {
			var s uint64
			if i < len(seen) {
				s = seen[i]
			}
			n += int64(popcount(w &^ s))
		}
	}
	return n
}

func popcount(x uint64) int {
	n := 0
	for x != 0 {
		x &= x - 1
		n++
	}
	return n
}
