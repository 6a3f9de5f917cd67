package plan

import (
	"github.com/sluicemq/sluice/broker/model"
	"testing"
	"time"
)

func TestMovePace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate, chunk int
		pace        time.Duration
	}{{1, 1, time.Second}, {10, 1, 100 * time.Millisecond}, {500, 50, 100 * time.Millisecond}, {0, 50, 100 * time.Millisecond}} {
		n := MoveChunk(c.rate)
		if n != c.chunk || MovePace(n, c.rate) != c.pace {
			t.Errorf("rate %d: chunk %d pace %v, want %d %v", c.rate, n, MovePace(n, c.rate), c.chunk, c.pace)
		}
	}
	if model.ValidateMoveRate(501) == nil || model.ValidateMoveRate(-1) == nil || model.ValidateMoveRate(0) != nil || model.ValidateMoveRate(500) != nil {
		t.Error("ValidateMoveRate bounds")
	}
}
