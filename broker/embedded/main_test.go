package embedded

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// waiter, a duty, or Pebble's own background work after Close).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
