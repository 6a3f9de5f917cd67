package model

import "time"

// OffsetClock is a Clock that is a fixed offset from the wall clock (a
// *FakeClock): a backend whose store keeps time of its own (PostgreSQL's
// now()) then computes with the clock's reading instead of the store's.
type OffsetClock interface {
	Clock
	Offset() time.Duration
}
