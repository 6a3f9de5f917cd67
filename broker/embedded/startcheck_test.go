package embedded

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/storage"
)

// crashImage sends n messages one by one to a store at a new directory and
// copies the directory while the broker still runs (every send was synced:
// the copy is what a power cut would leave, minus the lock). It returns the
// copy's path and the bodies.
func crashImage(t *testing.T, n int) (string, []string) {
	t.Helper()
	e := setup(t)
	e.createQueue("q", nil)
	var bodies []string
	for i := range n {
		bodies = append(bodies, "m"+itoa(i))
		e.send("q", bodies[i])
	}
	img := filepath.Join(t.TempDir(), "img")
	if out, err := exec.Command("cp", "-a", e.dir, img).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	_ = os.Remove(filepath.Join(img, "LOCK"))
	return img, bodies
}

// newestWAL is the path of the newest .log file in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatalf("no WAL in %s", dir)
	}
	return logs[len(logs)-1] // names are zero-padded numbers
}

// TestStartTornLogTail: a log whose last record was torn (cut short by a
// crash mid-write) opens; every record before the tear is there.
func TestStartTornLogTail(t *testing.T) {
	t.Parallel()
	img, bodies := crashImage(t, 50)
	wal := newestWAL(t, img)
	st, _ := os.Stat(wal)
	// Pebble preallocates and recycles log files: cut just inside the
	// last record written, found as the end of the non-zero bytes.
	raw, _ := os.ReadFile(wal)
	end := len(raw)
	for end > 0 && raw[end-1] == 0 {
		end--
	}
	if err := os.Truncate(wal, int64(end-3)); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut %s from %d to %d bytes", filepath.Base(wal), st.Size(), end-3)
	got := drain(t, img)
	for _, b := range bodies[:len(bodies)-1] {
		if !got[b] {
			t.Fatalf("message %q before the tear is lost (%d of %d back)", b, len(got), len(bodies))
		}
	}
}

// TestStartDamagedManifest: a flipped byte in the manifest stops the start
// with an error that names the file (and so does a truncated one).
func TestStartDamagedManifest(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"flip", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.createQueue("q", nil)
			e.send("q", "a", "b")
			if err := e.be.Close(); err != nil {
				t.Fatal(err)
			}
			desc, err := pebble.Peek(e.dir, vfs.Default)
			if err != nil {
				t.Fatal(err)
			}
			ms := []string{desc.ManifestFilename} // the current one
			st, _ := os.Stat(ms[0])
			if damage == "flip" {
				flipByte(t, ms[0], 20) // inside the first record: the version edit Pebble must read
			} else if err := os.Truncate(ms[0], 20); err != nil {
				t.Fatal(err)
			}
			_, err = Open(Config{Dir: e.dir, Options: storage.Options{Clock: clocktest.NewFakeClock(t0), Logger: testLogger(t)}})
			t.Logf("%s of %s (%d bytes): open: %v", damage, filepath.Base(ms[0]), st.Size(), err)
			if err == nil || !strings.Contains(err.Error(), "MANIFEST") {
				t.Fatalf("open with a damaged manifest: %v, want an error naming the MANIFEST", err)
			}
		})
	}
}

// TestStartDamagedMetadata: a flipped byte among the metadata records (the
// start of the table, before the bodies) stops the start with an error
// naming the table; salvage skips past the damaged block and keeps every
// message outside it.
func TestStartDamagedMetadata(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 3000
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: dir}
	e.open()
	e.createQueue("q", nil)
	for i := 0; i < n; i += 10 {
		batch := make([]string, 10)
		for j := range batch {
			batch[j] = "m" + itoa(i+j) + ":" + strings.Repeat("x", 800)
		}
		e.send("q", batch...)
	}
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	tbl := largestTable(t, dir)
	flipByte(t, tbl, 20000) // well inside the metadata blocks
	name := strings.TrimSuffix(filepath.Base(tbl), ".sst")
	_, err := Open(Config{Dir: dir, Options: storage.Options{Logger: testLogger(t)}})
	t.Logf("open: %v", err)
	if err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("open with damaged metadata: %v, want an error naming %s", err, name)
	}
	to := filepath.Join(t.TempDir(), "salvaged")
	rep, err := Salvage(context.Background(), dir, to, nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("salvage: %d messages copied, %d lost entries, problems %v", rep.Messages, len(rep.Lost), rep.Problems)
	if rep.Messages < n-200 || len(rep.Lost) == 0 {
		t.Fatalf("salvage kept %d of %d messages (lost %+v)", rep.Messages, n, rep.Lost)
	}
	if got := drain(t, to); len(got) != rep.Messages {
		t.Fatalf("the salvaged directory serves %d messages, want %d", len(got), rep.Messages)
	}
}
