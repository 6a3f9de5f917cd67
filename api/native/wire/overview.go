package wire

import "time"

// Overview is the broker at a glance (GET /v1/overview): its build, how
// long it has run, its queues' counts in all and its store's room.
type Overview struct {
	// Version is the build's version (what `sluice version` prints).
	Version string `json:"version"`
	// StartedAt is when the process started; UptimeSeconds how long ago,
	// by the broker's clock at Time.
	StartedAt     time.Time `json:"startedAt"`
	Time          time.Time `json:"time"`
	UptimeSeconds int64     `json:"uptimeSeconds"`
	// Queues is the number of queues of the caller's account, and Visible,
	// InFlight and Delayed their messages in all.
	Queues   int   `json:"queues"`
	Visible  int64 `json:"visible"`
	InFlight int64 `json:"inFlight"`
	Delayed  int64 `json:"delayed"`
	// Store is the store's room; absent when the store does not tell.
	Store *StoreFigures `json:"store,omitempty"`
	// Pool is the connection pool to PostgreSQL; absent on the embedded
	// store.
	Pool *PoolFigures `json:"pool,omitempty"`
}

// StoreFigures is how much room the store takes and has left.
type StoreFigures struct {
	// Kind is "embedded" or "postgres".
	Kind string `json:"kind"`
	// SizeBytes is the embedded store's files, or the PostgreSQL
	// database's size.
	SizeBytes int64 `json:"sizeBytes"`
	// FreeBytes is the room left on the embedded store's file system, and
	// ReserveBytes the free space below which sends are refused (absent
	// when the reserve is off); both absent on PostgreSQL.
	FreeBytes    *int64 `json:"freeBytes,omitempty"`
	ReserveBytes *int64 `json:"reserveBytes,omitempty"`
}

// PoolFigures are the PostgreSQL connection pool's figures.
type PoolFigures struct {
	// Max is the pool's size; Total the connections open, Acquired those
	// in use, Idle those waiting.
	Max      int `json:"max"`
	Total    int `json:"total"`
	Acquired int `json:"acquired"`
	Idle     int `json:"idle"`
	// Acquires counts the connections taken since the pool opened,
	// EmptyAcquires those that waited for one, AcquireWaitSeconds the
	// time spent waiting in all.
	Acquires           int64   `json:"acquires"`
	EmptyAcquires      int64   `json:"emptyAcquires"`
	AcquireWaitSeconds float64 `json:"acquireWaitSeconds"`
}
