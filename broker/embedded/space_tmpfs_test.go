package embedded

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// tmpfs mounts a tmpfs of the given size (e.g. "48m") on a new directory,
// unmounted at the end of the test. It skips (or fails, when SLUICE_REQUIRE
// names tmpfs) where mounting is not possible: not root, or no permission.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Missing(t, "tmpfs", "mounting a tmpfs needs root; run as root to test a real full disk")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		testutil.Missing(t, "tmpfs", "cannot mount a tmpfs here: "+strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// within runs fn and fails the test if it takes longer than d: the full
// disk used to hang every request.
func within(t *testing.T, d time.Duration, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s took longer than %v: the store hangs", what, d)
		return nil
	}
}

// TestFullDiskOnTmpfs is issue 13's reproduction: the data directory on a
// 48 MiB tmpfs, batches of ten 1 KiB messages until it fills. Sends are
// refused with ErrStoreFull within a second, never hang; receives and
// deletes keep working; after the tmpfs grows, sends resume without a
// restart, and every acknowledged message is delivered.
func TestFullDiskOnTmpfs(t *testing.T) {
	dir := tmpfs(t, "48m")
	opts := storage.Options{Logger: testLogger(t)}
	b, err := Open(Config{Dir: dir + "/data", Options: opts}) // reserve auto: 12 MiB here
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f := front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Bodies that do not compress, as real ones mostly do not.
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	randomBody := func() string {
		var sb strings.Builder
		for range 1000 {
			sb.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	acked := map[string]bool{}
	send := func(tag string) error {
		entries := make([]model.SendEntry, 10)
		for i := range entries {
			entries[i] = model.SendEntry{ID: "e" + itoa(i), Body: tag + itoa(i) + randomBody()}
		}
		return within(t, 5*time.Second, "a send", func() error {
			res, err := f.Send(ctx, "q", entries)
			if err != nil {
				return err
			}
			for i, r := range res {
				if r.Err != nil {
					return r.Err
				}
				acked[entries[i].Body] = true
			}
			return nil
		})
	}
	var refusal error
	for i := 0; i < 20000; i++ {
		if err := send("s" + itoa(i) + "."); err != nil {
			refusal = err
			break
		}
	}
	if !errors.Is(refusal, model.ErrStoreFull) {
		t.Fatalf("after %d acknowledged sends: %v, want ErrStoreFull", len(acked), refusal)
	}
	t.Logf("%d messages acknowledged, then: %v", len(acked), refusal)

	// Receives and deletes go on.
	vis, zero := time.Hour, time.Duration(0)
	got := map[string]bool{}
	receive := func(del bool) int {
		var ds []model.Delivery
		_ = within(t, 5*time.Second, "a receive", func() error {
			var err error
			ds, err = f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &zero})
			if err != nil {
				t.Fatalf("receive on a full disk: %v", err)
			}
			return nil
		})
		for _, d := range ds {
			got[d.Body] = true
		}
		if del && len(ds) > 0 {
			entries := make([]model.DeleteEntry, len(ds))
			for i, d := range ds {
				entries[i] = model.DeleteEntry{ID: "d" + itoa(i), Receipt: d.Receipt}
			}
			_ = within(t, 5*time.Second, "a delete", func() error {
				if _, err := f.Delete(ctx, "q", entries); err != nil {
					t.Fatalf("delete on a full disk: %v", err)
				}
				return nil
			})
		}
		return len(ds)
	}
	for range 50 {
		receive(true)
	}

	// Space returns: sends resume by themselves.
	if out, err := exec.Command("mount", "-o", "remount,size=128m", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	if err := send("after."); err != nil {
		t.Fatalf("send after the disk grew: %v", err)
	}
	for receive(false) > 0 {
	}
	for body := range acked {
		if !got[body] {
			t.Fatalf("acknowledged message %.20q never delivered", body)
		}
	}
	t.Logf("every one of %d acknowledged messages delivered", len(acked))
}
