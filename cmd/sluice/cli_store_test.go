package main

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// runOffline runs sluice with args and no broker.
func runOffline(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb testutil.Buffer
	code := run(context.Background(), args, func(string) string { return "" }, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestCLIStoreVerifySalvage: salvage of a sound directory copies everything
// and exits 0; sluice store verify lists the messages a flipped byte damaged
// and exits 1; salvage copies the rest into a new directory, which verifies
// clean, and exits 1 (messages were lost); a running broker's directory is
// refused.
func TestCLIStoreVerifySalvage(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()
	opts := storage.Options{Logger: testutil.Logger(t)}
	b, err := embedded.Open(embedded.Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	f, err := broker.New(b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateQueue(ctx, "jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		entries := make([]model.SendEntry, 10)
		for j := range entries {
			entries[j] = model.SendEntry{ID: "e" + string(rune('a'+j)), Body: strings.Repeat("x", 800)}
		}
		if _, err := f.Send(ctx, "jobs", entries); err != nil {
			t.Fatal(err)
		}
	}
	r := runOffline(t, "store", "verify", "--data", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "stop it first") {
		t.Fatalf("verify of a running broker's directory: %+v", r)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	r = runOffline(t, "store", "verify", "--data", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "1000 readable messages, 0 damaged messages, 0 unreadable parts") {
		t.Fatalf("verify of a sound directory: %+v", r)
	}
	r = runOffline(t, "store", "salvage", "--data", dir, "--to", filepath.Join(t.TempDir(), "sound"))
	if r.code != 0 || !strings.Contains(r.stdout, "copied 1 queue and 1000 messages") || strings.Contains(r.stdout, "Not everything") {
		t.Fatalf("salvage of a sound directory: %+v", r)
	}

	paths, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	var tbl string
	var size int64
	for _, p := range paths {
		if st, _ := os.Stat(p); st.Size() > size {
			tbl, size = p, st.Size()
		}
	}
	raw, _ := os.ReadFile(tbl)
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(tbl, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runOffline(t, "store", "verify", "--data", dir)
	t.Logf("verify:\n%s", r.stdout)
	if r.code != 1 || !strings.Contains(r.stdout, filepath.Base(tbl)) || !strings.Contains(r.stdout, "body unreadable") {
		t.Fatalf("verify of a damaged directory: %+v", r)
	}
	to := filepath.Join(t.TempDir(), "salvaged")
	r = runOffline(t, "store", "salvage", "--data", dir, "--to", to)
	t.Logf("salvage:\n%s", r.stdout)
	if r.code != 1 || !strings.Contains(r.stdout, "copied 1 queue ") || !strings.Contains(r.stdout, "Not everything was copied") {
		t.Fatalf("salvage: %+v, want exit 1 (messages lost)", r)
	}
	r = runOffline(t, "store", "verify", "--data", to, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"damaged":[]`) {
		t.Fatalf("verify of the salvaged directory: %+v", r)
	}
	if r := runOffline(t, "store", "salvage", "--data", dir); r.code != 2 {
		t.Fatalf("salvage without --to: %+v", r)
	}
}

// TestCLIStoreSalvageUnreadableTable: a flipped byte in the footer of a table
// file (issue 28): verify counts the messages of the other tables as
// readable and the table as unknown, with its size; salvage copies those
// messages, says the table's are unknown, and exits 1.
func TestCLIStoreSalvageUnreadableTable(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()
	opts := storage.Options{Logger: testutil.Logger(t)}
	b, err := embedded.Open(embedded.Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	f, err := broker.New(b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateQueue(ctx, "jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	// 8,000 messages of 1 KiB of random letters: several table files.
	r := rand.New(rand.NewPCG(3, 4))
	body := make([]byte, 1024)
	for range 800 {
		entries := make([]model.SendEntry, 10)
		for j := range entries {
			for k := range body {
				body[k] = byte('a' + r.IntN(26))
			}
			entries[j] = model.SendEntry{ID: "e" + strconv.Itoa(j), Body: string(body)}
		}
		if _, err := f.Send(ctx, "jobs", entries); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The oldest table: compacted into the last level, so no log still on
	// disk holds its records.
	paths, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(paths) < 2 {
		t.Fatalf("%d table files, want several", len(paths))
	}
	slices.Sort(paths)
	tbl := paths[0]
	raw, _ := os.ReadFile(tbl)
	raw[len(raw)-20] ^= 0xff
	if err := os.WriteFile(tbl, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	res := runOffline(t, "store", "verify", "--data", dir)
	t.Logf("verify: %s", firstLines(res.stdout, 3))
	unknown := "unreadable: " + filepath.Base(tbl)
	if res.code != 1 || strings.Contains(res.stdout, " 0 readable messages") || !strings.Contains(res.stdout, "format unknown") || !strings.Contains(res.stdout, "1 unreadable part (") || !strings.Contains(res.stdout, unknown) {
		t.Fatalf("verify: %+v", res)
	}
	res = runOffline(t, "store", "salvage", "--data", dir, "--to", filepath.Join(t.TempDir(), "salvaged"))
	t.Logf("salvage: %s", firstLines(res.stdout, 3))
	if res.code != 1 || strings.Contains(res.stdout, "and 0 messages") || !strings.Contains(res.stdout, "how many messages it held is unknown") ||
		!strings.Contains(res.stdout, unknown) || !strings.Contains(res.stdout, "Not everything was copied") {
		t.Fatalf("salvage: %+v, want exit 1 naming %s", res, filepath.Base(tbl))
	}
}

// firstLines is the first n lines of s, and how many more there are.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") + "\n(" + strconv.Itoa(len(lines)-n) + " more lines)"
}
