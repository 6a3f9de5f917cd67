package loadgen

import (
	"io"
	"os"
	"sync"
)

func osGetpid() int { return os.Getpid() }

// lockedWriter lets the progress goroutine and the test share a builder.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
