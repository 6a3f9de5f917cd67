package postgres_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a
// waiter, a duty such as the sweeper or the move-task runner, or a pool's
// background work after Close), and drops the pooled schemas at the end.
func TestMain(m *testing.M) {
	code := m.Run()
	dropPooledSchemas()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: a goroutine outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
