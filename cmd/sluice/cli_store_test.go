package main

import (
	"context"
	"os"
	"path/filepath"
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

// TestCLIStoreVerifySalvage: sluice store verify lists the messages a
// flipped byte damaged and exits 1; salvage copies the rest into a new
// directory, which verifies clean; a running broker's directory is refused.
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
	if r.code != 0 || !strings.Contains(r.stdout, "1000 readable messages, 0 damaged") {
		t.Fatalf("verify of a sound directory: %+v", r)
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
	if r.code != 0 || !strings.Contains(r.stdout, "copied 1 queue ") {
		t.Fatalf("salvage: %+v", r)
	}
	r = runOffline(t, "store", "verify", "--data", to, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"damaged":[]`) {
		t.Fatalf("verify of the salvaged directory: %+v", r)
	}
	if r := runOffline(t, "store", "salvage", "--data", dir); r.code != 2 {
		t.Fatalf("salvage without --to: %+v", r)
	}
}
