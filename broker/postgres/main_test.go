package postgres_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// waiter, a duty such as the sweeper or the move-task runner, or a pool's
// background work after Close).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
