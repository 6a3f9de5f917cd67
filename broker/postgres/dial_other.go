//go:build !linux

package postgres

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not known: the
// keepalives and the answer deadline still hold (dial.go).
func setUserTimeout(uintptr, time.Duration) error { return nil }
