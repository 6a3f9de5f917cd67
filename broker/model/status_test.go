package model

import (
	"slices"
	"testing"
)

// TestAddFailureNeverWritesItsInput: two copies of one history, appended
// to apart, keep their own entries, even when the shared slice has spare
// capacity; a full history drops its oldest entry.
func TestAddFailureNeverWritesItsInput(t *testing.T) {
	t.Parallel()
	shared := make([]int, 2, 8)
	shared[0], shared[1] = 1, 2
	a := AddFailure(shared, 3)
	b := AddFailure(shared, 4)
	if !slices.Equal(a, []int{1, 2, 3}) || !slices.Equal(b, []int{1, 2, 4}) || !slices.Equal(shared, []int{1, 2}) {
		t.Fatalf("a %v, b %v, shared %v; want [1 2 3], [1 2 4], [1 2]", a, b, shared)
	}
	var h []int
	for i := 1; i <= MaxFailures+3; i++ {
		h = AddFailure(h, i)
	}
	if len(h) != MaxFailures || h[0] != 4 || h[MaxFailures-1] != MaxFailures+3 {
		t.Fatalf("after %d failures: %v; want the last %d", MaxFailures+3, h, MaxFailures)
	}
}
