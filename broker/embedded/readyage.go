package embedded

import "container/heap"

// readyAges knows, to the second, when the longest-visible ready message of
// a queue became visible (model.QueueStats.OldestVisibleSince), without a
// field in msg (which is at its size class: TestIndexEntrySize) and without
// a scan: ready messages are counted by the second of their visibleAt,
// which for a ready message is when it became visible and does not change
// while it is ready (every change of visibleAt happens after unplace).
//
// counts holds the seconds that have ready messages; secs is a min-heap of
// seconds, one entry pushed when a second gets its first message. An entry
// whose second is no longer in counts is stale: drop pops the stale entries
// at the top, so secs[0] is always live; stale entries below the top are
// dropped when secs holds more than twice the live seconds (compact). Memory is bounded by the number
// of distinct seconds among the ready messages, a few entries per second of
// traffic on a queue that keeps up, far fewer than its messages on a deep
// one. Guarded by Backend.mu, like the rest of the queue.
type readyAges struct {
	counts map[int64]int64
	secs   secHeap
}

// second is the whole second (Unix) of a Unix-nanosecond instant, rounded
// down.
func second(ns int64) int64 {
	s := ns / 1e9
	if ns < 0 && ns%1e9 != 0 {
		s--
	}
	return s
}

// add counts a message that became ready, visible since visibleAt.
func (r *readyAges) add(visibleAt int64) {
	if r.counts == nil {
		r.counts = map[int64]int64{}
	}
	s := second(visibleAt)
	r.counts[s]++
	if r.counts[s] > 1 {
		return
	}
	if !r.compact() { // a rebuild includes s
		heap.Push(&r.secs, s)
	}
}

// compact rebuilds secs from counts when it holds more than twice the live
// seconds (plus a margin), and reports whether it did. A rebuild costs the
// live seconds; since the last one, at least as many changes made stale
// entries, so its cost is amortised over them.
func (r *readyAges) compact() bool {
	if len(r.secs) <= 2*len(r.counts)+64 {
		return false
	}
	r.secs = r.secs[:0]
	for k := range r.counts {
		r.secs = append(r.secs, k)
	}
	heap.Init(&r.secs)
	return true
}

// drop uncounts a ready message (visible since visibleAt) that leaves ready.
func (r *readyAges) drop(visibleAt int64) {
	s := second(visibleAt)
	n, ok := r.counts[s]
	if !ok {
		return // not counted: cannot happen while the hooks are complete (TestReadyAges checks them)
	}
	if n > 1 {
		r.counts[s] = n - 1
		return
	}
	delete(r.counts, s)
	if r.compact() {
		return
	}
	for len(r.secs) > 0 {
		if _, live := r.counts[r.secs[0]]; live {
			break
		}
		heap.Pop(&r.secs)
	}
}

// oldest is the second the longest-visible ready message became visible
// (ok false when none is ready).
func (r *readyAges) oldest() (sec int64, ok bool) {
	if len(r.secs) == 0 {
		return 0, false
	}
	return r.secs[0], true
}

// secHeap is a min-heap of Unix seconds.
type secHeap []int64

func (h secHeap) Len() int           { return len(h) }
func (h secHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h secHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *secHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *secHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}
