package model

import (
	"testing"
	"time"
)

type countingObserver struct{ counts, refused, synced int }

func (c *countingObserver) Count(string, Counter, int) { c.counts++ }
func (c *countingObserver) Refused(string, string)     { c.refused++ }
func (c *countingObserver) Synced(time.Duration, int)  { c.synced++ }

func TestObserversFanOut(t *testing.T) {
	t.Parallel()
	if Observers() != nil || Observers(nil, nil) != nil {
		t.Error("Observers of none is not nil")
	}
	a, b := &countingObserver{}, &countingObserver{}
	if Observers(nil, a) != Observer(a) {
		t.Error("Observers of one is not that one")
	}
	o := Observers(a, nil, b)
	o.Count("q", CountSent, 1)
	o.Refused("q", "max_depth")
	o.Synced(time.Millisecond, 2)
	for _, c := range []*countingObserver{a, b} {
		if c.counts != 1 || c.refused != 1 || c.synced != 1 {
			t.Errorf("observer got %+v, want one of each", *c)
		}
	}
}
