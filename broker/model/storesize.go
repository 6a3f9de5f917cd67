package model

// StoreSize is how much room a store takes and has left. A figure a store
// does not have is absent (nil), not zero.
type StoreSize struct {
	// Kind names the store: "embedded" or "postgres".
	Kind string
	// SizeBytes is what the store takes: the embedded store's files (its
	// tables and log), or the PostgreSQL database's size
	// (pg_database_size).
	SizeBytes int64
	// FreeBytes is the room left on the embedded store's file system for
	// the broker's user, and ReserveBytes the free space below which sends
	// are refused (its --disk-reserve, resolved); nil on PostgreSQL, whose
	// disk the broker cannot see.
	FreeBytes, ReserveBytes *int64
}
