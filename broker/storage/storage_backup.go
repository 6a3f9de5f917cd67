package storage

import "context"

// Backuper is the optional capability of a backend that copies its store
// online (the embedded backend; PostgreSQL has its own tools).
type Backuper interface {
	// Backup writes a consistent copy of the store, holding every change
	// acknowledged before the call, into the new directory dir.
	Backup(ctx context.Context, dir string) error
}
