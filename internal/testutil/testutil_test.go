package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeTB records Fatalf and Log instead of failing the real test.
type fakeTB struct {
	testing.TB
	fatal    string
	logs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Log(args ...any)   { f.logs = append(f.logs, fmt.Sprint(args...)) }
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Fatalf(s string, a ...any) {
	f.fatal = fmt.Sprintf(s, a...)
	runtime.Goexit()
}

// run calls fn(f) in its own goroutine, so that Fatalf's Goexit ends only it.
func (f *fakeTB) run(fn func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
}

func TestEventuallyHolds(t *testing.T) {
	n := 0
	Eventually(t, time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestEventuallyTimesOut(t *testing.T) {
	f := &fakeTB{}
	start := time.Now()
	f.run(func(tb testing.TB) { Eventually(tb, 30*time.Millisecond, "never", func() bool { return false }) })
	if !strings.Contains(f.fatal, "never") || !strings.Contains(f.fatal, "30ms") {
		t.Fatalf("Fatalf message %q, want it to name the condition and the timeout", f.fatal)
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > 5*time.Second {
		t.Fatalf("failed after %v, want just after 30ms", d)
	}
}

func TestWriterStopsAtCleanup(t *testing.T) {
	f := &fakeTB{}
	w := Writer(f, "p: ")
	_, _ = w.Write([]byte("one\n"))
	for _, c := range f.cleanups {
		c()
	}
	_, _ = w.Write([]byte("two\n"))
	if len(f.logs) != 1 || f.logs[0] != "p: one" {
		t.Fatalf("logs %q, want [\"p: one\"]", f.logs)
	}
}

func TestLogger(t *testing.T) {
	f := &fakeTB{}
	Logger(f).Info("hello", "k", 1)
	Logger(f).Debug("hidden")
	if len(f.logs) != 1 || !strings.Contains(f.logs[0], "msg=hello k=1") {
		t.Fatalf("logs %q, want one Info record", f.logs)
	}
}
