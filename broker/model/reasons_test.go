package model

import "testing"

func TestMaxAttempts(t *testing.T) {
	t.Parallel()
	r := &RedrivePolicy{MaxReceiveCount: 4}
	for _, c := range []struct {
		r         *RedrivePolicy
		own, want int
	}{
		{nil, 0, 0}, {nil, 3, 0}, {r, 0, 4}, {r, 2, 2}, {r, 9, 9},
	} {
		if got := MaxAttempts(c.r, c.own); got != c.want {
			t.Errorf("MaxAttempts(%v, %d) = %d, want %d", c.r, c.own, got, c.want)
		}
	}
}
