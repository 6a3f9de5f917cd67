package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// Histogram records durations with a relative error under 1/64 (about
// 1.6 %): values below 64 ns are exact; above, each power of two is split
// into 64 equal buckets, so the array is fixed (3,776 counters) and Record
// is a few instructions with no allocation. It is not safe for concurrent
// use: each goroutine records into its own and Merge combines them.
type Histogram struct {
	counts   [histBuckets]int64
	n        int64
	min, max int64
}

const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histBuckets = (64 - histSubBits) * histSub
)

func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	msb := 63 - bits.LeadingZeros64(u|1)
	if msb < histSubBits {
		return int(u)
	}
	shift := msb - histSubBits
	return (shift+1)<<histSubBits + int((u>>shift)&(histSub-1))
}

// histValue is the midpoint of bucket i.
func histValue(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	shift := i>>histSubBits - 1
	low := int64(histSub+i&(histSub-1)) << shift
	return low + (int64(1)<<shift)/2
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.counts[histIndex(v)]++
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() int64 { return h.n }

// Quantile returns the value at q (0..1), within the bucket precision and
// clamped to the recorded min and max; 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := histValue(i)
			v = max(v, h.min)
			v = min(v, h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

// Max is the largest recorded value.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Latency is a latency distribution in milliseconds, as the summary prints it.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// Latency summarizes h.
func (h *Histogram) Latency() Latency {
	return Latency{Count: h.n, P50: ms(h.Quantile(0.5)), P90: ms(h.Quantile(0.9)), P99: ms(h.Quantile(0.99)), Max: ms(h.Max())}
}
