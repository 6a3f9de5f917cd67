package model

import "time"

// PoolStats are a connection pool's figures.
type PoolStats struct {
	// Max is the pool's size; Total the connections open, Acquired those in
	// use and Idle those waiting.
	Max, Total, Acquired, Idle int
	// Acquires counts the connections taken from the pool since it opened,
	// EmptyAcquires those that had to wait for one (the pool was
	// exhausted), and AcquireWait is the time spent waiting in all.
	Acquires, EmptyAcquires int64
	AcquireWait             time.Duration
}
