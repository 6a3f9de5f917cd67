// Package testutil holds the small helpers that several packages' tests
// share: polling for a condition, logging to the test's log, and building a
// binary once per test process. It imports only the standard library, so
// any package's tests (internal or external) can use it without an import
// cycle.
package testutil

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// PollInterval is the pause between two checks of an Eventually condition.
const PollInterval = 5 * time.Millisecond

// Eventually calls cond every PollInterval until it returns true, and fails
// the test with t.Fatalf, naming what and timeout, once timeout has passed
// without it. Call it from the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(PollInterval)
	}
}

// Writer returns an io.Writer that logs each write with t.Log, after prefix
// and without its trailing newline, until the test's cleanups run; later
// writes (from a goroutine that outlives the test) are dropped instead of
// panicking.
func Writer(t testing.TB, prefix string) io.Writer {
	w := &tWriter{t: t, prefix: prefix}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

type tWriter struct {
	mu     sync.Mutex
	t      testing.TB
	prefix string
	done   bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(w.prefix + strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// Logger returns a text slog.Logger at level Info that writes to t.Log, as
// Writer does (records logged after the test's cleanups are dropped).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer(t, ""), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Binary is a Go main package that tests run as a separate process, built
// at most once per test process into a temporary directory. Declare it as a
// package variable; its zero value with Pkg set is ready to use.
type Binary struct {
	// Pkg is the package to build, as `go build` takes it, relative to the
	// test's working directory (its package directory): ".", "../cmd/x".
	Pkg string

	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the package on its first call and returns the executable's
// path; it fails the test when the build fails.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-test-bin")
		if err != nil {
			b.err = err
			return
		}
		b.dir = dir
		// With -o naming a directory, go build names the executable after
		// the package (cmd/sluice: sluice), as a user's build would.
		out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), b.Pkg).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.Pkg, err, out)
			return
		}
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) != 1 {
			b.err = fmt.Errorf("go build %s: want one executable in %s, got %d (%v)", b.Pkg, dir, len(ents), err)
			return
		}
		b.path = filepath.Join(dir, ents[0].Name())
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the built executable, if any. Call it from TestMain after
// m.Run (t.TempDir would vanish with the first test that built it).
func (b *Binary) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// Buffer is a bytes.Buffer that one writer and several readers may use at
// once (a process's stderr, a log handler's output).
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Required reports whether SLUICE_REQUIRE (a comma-separated list, e.g.
// "postgres,node,debian,prometheus,chromium") names part: a test that needs
// a missing part then fails instead of skipping.
func Required(part string) bool {
	for _, p := range strings.Split(os.Getenv("SLUICE_REQUIRE"), ",") {
		if strings.TrimSpace(p) == part {
			return true
		}
	}
	return false
}

// Missing ends t because part is absent: it skips with why (what is missing
// and how to get it), or fails when SLUICE_REQUIRE names part.
func Missing(t testing.TB, part, why string) {
	t.Helper()
	if Required(part) {
		t.Fatalf("%s (SLUICE_REQUIRE names %s)", why, part)
	}
	t.Skip(why)
}

// FullScale reports whether SLUICE_SCALE=full asks the load, crash and
// scale tests for their full-scale figures (the ones docs/durability.md and
// docs/benchmarks.md report); the default is CI scale, sized for a 2-core
// machine running `go test ./...` in minutes.
func FullScale() bool { return os.Getenv("SLUICE_SCALE") == "full" }

// Scale returns the size a scale test runs with: the integer in the
// variable name when it is set (at least min; a bad value fails the test),
// else full under SLUICE_SCALE=full, else ci, halved (but at least min) under
// -short: the race detector's tier (.ci/run) runs the same tests to find
// data races, which their scale does not help find.
func Scale(t testing.TB, name string, ci, full, min int) int {
	t.Helper()
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < min {
			t.Fatalf("%s=%q: want an integer of at least %d", name, s, min)
		}
		return n
	}
	if FullScale() {
		return full
	}
	if testing.Short() {
		return max(min, (ci+1)/2)
	}
	return ci
}
