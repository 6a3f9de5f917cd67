// Package storetest is the conformance suite of idempotency.Store: every
// store runs it (the memory store in package idempotency's tests, the
// PostgreSQL store in pgstore's), so Do's semantics are proven on each.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/worker/idempotency"
)

// Run runs the suite; newStore returns an empty store for one subtest (the
// subtests run in parallel).
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	ctx := context.Background()
	t.Run("ClaimSeenForget", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		seen, err := s.Seen(ctx, "k")
		must(t, err)
		if seen {
			t.Fatal("Seen of a new key: true")
		}
		claimed, err := s.Claim(ctx, "k")
		must(t, err)
		if !claimed {
			t.Fatal("first Claim: false")
		}
		claimed, err = s.Claim(ctx, "k")
		must(t, err)
		if claimed {
			t.Fatal("second Claim: true")
		}
		if seen, err = s.Seen(ctx, "k"); err != nil || !seen {
			t.Fatalf("Seen after Claim = %v, %v; want true", seen, err)
		}
		must(t, s.Forget(ctx, "k"))
		must(t, s.Forget(ctx, "never-claimed"))
		if claimed, err = s.Claim(ctx, "k"); err != nil || !claimed {
			t.Fatalf("Claim after Forget = %v, %v; want true", claimed, err)
		}
	})
	t.Run("ConcurrentClaimsOneWins", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				ok, err := s.Claim(ctx, "race")
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d concurrent claims won; want 1", wins.Load())
		}
	})
	t.Run("NoMode", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ran, err := idempotency.Do(ctx, s, "k", 0, func(context.Context) error { return nil })
		if ran || !errors.Is(err, idempotency.ErrNoMode) {
			t.Fatalf("Do with the zero Mode = %v, %v; want false, ErrNoMode", ran, err)
		}
	})
	for _, mode := range []idempotency.Mode{idempotency.AtMostOnce, idempotency.AtLeastOnce} {
		t.Run(mode.String()+"/OncePerKey", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			var effects atomic.Int32
			for i := range 3 {
				ran, err := idempotency.Do(ctx, s, "pay-42", mode, func(context.Context) error { effects.Add(1); return nil })
				must(t, err)
				if ran != (i == 0) {
					t.Fatalf("delivery %d: ran = %v", i+1, ran)
				}
			}
			if n := effects.Load(); n != 1 {
				t.Fatalf("effect ran %d times; want 1", n)
			}
		})
		t.Run(mode.String()+"/ErrorRetries", func(t *testing.T) {
			t.Parallel()
			// An error says the effect did not happen: both modes run it on
			// the next delivery.
			s := newStore(t)
			boom := errors.New("card declined, try later")
			ran, err := idempotency.Do(ctx, s, "k", mode, func(context.Context) error { return boom })
			if !ran || !errors.Is(err, boom) {
				t.Fatalf("failing Do = %v, %v", ran, err)
			}
			ran, err = idempotency.Do(ctx, s, "k", mode, func(context.Context) error { return nil })
			if !ran || err != nil {
				t.Fatalf("retry after a failure = %v, %v; want it to run", ran, err)
			}
		})
	}
	t.Run("AtMostOnce/CrashAfterRecordSkipsForever", func(t *testing.T) {
		t.Parallel()
		// The process dies between the record and the effect: a panic
		// stands for the crash (nothing after the claim runs). The next
		// delivery finds the key and skips: the effect never happens.
		s := newStore(t)
		var effects atomic.Int32
		func() {
			defer func() { _ = recover() }()
			_, _ = idempotency.Do(ctx, s, "charge-7", idempotency.AtMostOnce, func(context.Context) error { panic("kill -9") })
		}()
		ran, err := idempotency.Do(ctx, s, "charge-7", idempotency.AtMostOnce, func(context.Context) error { effects.Add(1); return nil })
		if ran || err != nil || effects.Load() != 0 {
			t.Fatalf("redelivery after the crash: ran %v, err %v, effects %d; want skipped", ran, err, effects.Load())
		}
	})
	t.Run("AtMostOnce/UncertainKeepsKey", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		timeout := errors.New("charge API timed out after the request was sent")
		ran, err := idempotency.Do(ctx, s, "charge-8", idempotency.AtMostOnce, func(context.Context) error { return idempotency.Uncertain(timeout) })
		var u *idempotency.UncertainError
		if !ran || !errors.Is(err, timeout) || !errors.As(err, &u) {
			t.Fatalf("Do = %v, %v", ran, err)
		}
		ran, err = idempotency.Do(ctx, s, "charge-8", idempotency.AtMostOnce, func(context.Context) error { return nil })
		if ran || err != nil {
			t.Fatalf("retry after an uncertain failure = %v, %v; want skipped", ran, err)
		}
	})
	t.Run("AtLeastOnce/CrashBeforeRecordRepeats", func(t *testing.T) {
		t.Parallel()
		// The process dies after the effect, before the record: the panic
		// after the effect stands for the crash. The next delivery runs
		// the effect again.
		s := newStore(t)
		var effects atomic.Int32
		func() {
			defer func() { _ = recover() }()
			_, _ = idempotency.Do(ctx, s, "mail-3", idempotency.AtLeastOnce, func(context.Context) error { effects.Add(1); panic("kill -9") })
		}()
		ran, err := idempotency.Do(ctx, s, "mail-3", idempotency.AtLeastOnce, func(context.Context) error { effects.Add(1); return nil })
		if !ran || err != nil || effects.Load() != 2 {
			t.Fatalf("redelivery after the crash: ran %v, err %v, effects %d; want run again (2)", ran, err, effects.Load())
		}
		// Now recorded.
		if ran, _ := idempotency.Do(ctx, s, "mail-3", idempotency.AtLeastOnce, func(context.Context) error { return nil }); ran {
			t.Fatal("third delivery ran")
		}
	})
	t.Run("AtLeastOnce/RecordFailureRepeats", func(t *testing.T) {
		t.Parallel()
		// The record itself fails (the store is down): Do reports it, the
		// message is retried, and the effect repeats.
		s := &failingClaims{Store: newStore(t), fail: errors.New("store unreachable")}
		var effects atomic.Int32
		ran, err := idempotency.Do(ctx, s, "k", idempotency.AtLeastOnce, func(context.Context) error { effects.Add(1); return nil })
		if !ran || !errors.Is(err, s.fail) {
			t.Fatalf("Do with a failing record = %v, %v", ran, err)
		}
		s.fail = nil
		ran, err = idempotency.Do(ctx, s, "k", idempotency.AtLeastOnce, func(context.Context) error { effects.Add(1); return nil })
		if !ran || err != nil || effects.Load() != 2 {
			t.Fatalf("retry: ran %v, err %v, effects %d; want 2", ran, err, effects.Load())
		}
	})
	t.Run("ManyKeys", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for i := range 20 {
			ok, err := s.Claim(ctx, fmt.Sprintf("key-%d", i))
			if err != nil || !ok {
				t.Fatalf("Claim key-%d = %v, %v", i, ok, err)
			}
		}
	})
}

// failingClaims is a Store whose Claim fails with fail (when set).
type failingClaims struct {
	idempotency.Store
	fail error
}

func (f *failingClaims) Claim(ctx context.Context, key string) (bool, error) {
	if f.fail != nil {
		return false, f.fail
	}
	return f.Store.Claim(ctx, key)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
