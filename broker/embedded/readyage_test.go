package embedded

import (
	"math/rand/v2"
	"testing"
)

// TestReadyAges checks readyAges against a plain multiset of instants under
// random adds and drops (the oldest second is the least second of the
// multiset), and that its heap stays bounded by the live seconds.
func TestReadyAges(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var r readyAges
	var live []int64 // the visibleAt of the counted messages
	now := int64(1_700_000_000e9)
	for i := range 100_000 {
		switch {
		case len(live) == 0 || rng.IntN(100) < 52:
			// Mostly now, sometimes a second or minutes back (an expired
			// lease's end, a restart).
			at := now
			if rng.IntN(10) == 0 {
				at -= rng.Int64N(300e9)
			}
			live = append(live, at)
			r.add(at)
		default:
			j := rng.IntN(len(live))
			if rng.IntN(4) > 0 {
				j = 0 // mostly the oldest goes first, as receives take them
			}
			r.drop(live[j])
			live = append(live[:j], live[j+1:]...)
		}
		now += rng.Int64N(5e8)
		got, ok := r.oldest()
		if len(live) == 0 {
			if ok {
				t.Fatalf("step %d: oldest %d with nothing counted", i, got)
			}
			continue
		}
		want := second(live[0])
		for _, at := range live {
			want = min(want, second(at))
		}
		if !ok || got != want {
			t.Fatalf("step %d: oldest = %d, %v; want %d", i, got, ok, want)
		}
		if len(r.secs) > 2*len(r.counts)+65 {
			t.Fatalf("step %d: %d heap entries for %d live seconds", i, len(r.secs), len(r.counts))
		}
	}
	if second(-1) != -1 || second(-1e9) != -1 || second(1e9-1) != 0 {
		t.Error("second does not round down")
	}
}
