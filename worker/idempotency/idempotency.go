// Package idempotency makes a message's effect happen once per message key,
// although a queue delivers at least once (a lease that ends before the ack,
// a crash between the effect and the ack, a producer's retried send).
//
// A key names the work a message asks for (Key): the producer-given
// IdempotencyKey attribute, else the message id. A Store records the keys
// whose work is done (or taken). How the record and the effect are ordered
// decides what a crash between them does, and no order makes an effect
// outside the store exactly once, so the caller chooses (there is no
// default):
//
//   - AtMostOnce records the key first, then runs the effect. A crash after
//     the record (before or during the effect) skips the effect forever:
//     for effects that must never repeat and have no idempotent API of
//     their own (charging a card through an API without an idempotency
//     key, sending a letter).
//   - AtLeastOnce runs the effect, then records the key. A crash between
//     them runs the effect again on the next delivery: for effects that
//     tolerate a repeat (an email, a cache refresh, an upsert).
//
// Exactly once is possible when the effect is a write to the store's own
// database: package pgstore records the key in the same PostgreSQL
// transaction as the effect's writes (pgstore.Store.InTx), so both commit or
// neither does.
//
// The package imports no storage driver: NewMemoryStore is for tests, and
// pgstore is the PostgreSQL store.
package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/worker"
)

// AttrIdempotencyKey is the message attribute (type String) that carries a
// producer-given idempotency key.
const AttrIdempotencyKey = "IdempotencyKey"

// Key is the idempotency key of m: its IdempotencyKey attribute (a String
// attribute the producer sets) when it has one, else its message id.
//
// A producer-given key is better. The message id names one stored message,
// so it protects against redelivery only; a producer that retries a send
// whose answer it lost (a timeout, a broker restart) stores a second message
// with a new id (unless the send carries a deduplication id and the retry
// comes within the queue's deduplication window), and a replay from a
// dead-letter queue may too. A key the
// producer derives from the work itself ("payroll-2024-05/employee-42")
// is the same on every copy. Keys share one namespace per store: make them
// unique across the queues whose workers share a store (prefix them with
// the kind of work).
func Key(m *worker.Message) string {
	if a, ok := m.Attributes[AttrIdempotencyKey]; ok && a.Value != "" {
		return a.Value
	}
	return m.ID
}

// Store records the keys whose work is done or taken. Implementations are
// safe for concurrent use; a key is recorded at most once however many
// callers race (Claim answers true to one of them).
type Store interface {
	// Claim records key unless it is recorded already, and reports whether
	// this call recorded it.
	Claim(ctx context.Context, key string) (claimed bool, err error)
	// Seen reports whether key is recorded.
	Seen(ctx context.Context, key string) (bool, error)
	// Forget removes key's record, so that a later Claim of it succeeds. A
	// key not recorded is no error.
	Forget(ctx context.Context, key string) error
}

// Mode orders the key's record and the effect (see the package comment).
// The zero Mode is invalid: choose one.
type Mode int

const (
	// AtMostOnce records the key, then runs the effect. A crash after the
	// record skips the effect forever.
	AtMostOnce Mode = iota + 1
	// AtLeastOnce runs the effect, then records the key. A crash between
	// the two runs the effect again.
	AtLeastOnce
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case AtMostOnce:
		return "AtMostOnce"
	case AtLeastOnce:
		return "AtLeastOnce"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ErrNoMode is Do's answer for a Mode that is neither AtMostOnce nor
// AtLeastOnce.
var ErrNoMode = errors.New("idempotency: choose a Mode: AtMostOnce (key first: a crash may skip the effect) or AtLeastOnce (key after: a crash may repeat it)")

// Do runs fn for key at most once (AtMostOnce) or until it succeeds once
// (AtLeastOnce), as recorded in store. ran reports whether fn was called;
// ran == false with a nil error means the key was already done (the caller
// acks its message).
//
// AtMostOnce: Do claims key, then calls fn. When fn returns an error, the
// claim is forgotten, so that a retry runs fn again: an error says that the
// effect did not happen. When fn cannot know (a timeout after the request
// left), it returns Uncertain(err) instead, which keeps the key: the effect
// is never tried again. A panic in fn keeps the key too (it propagates, as a
// crash would end the process there).
//
// AtLeastOnce: Do calls fn unless key is recorded, and records key after fn
// succeeds. Two deliveries of one key at once may both run fn. When the
// record fails, Do answers ran == true and the error: the message is
// retried, and fn repeats.
func Do(ctx context.Context, store Store, key string, mode Mode, fn func(ctx context.Context) error) (ran bool, err error) {
	if key == "" {
		return false, errors.New("idempotency: empty key")
	}
	switch mode {
	case AtMostOnce:
		claimed, err := store.Claim(ctx, key)
		if err != nil {
			return false, fmt.Errorf("idempotency: claim key %q: %w", key, err)
		}
		if !claimed {
			return false, nil
		}
		if err := fn(ctx); err != nil {
			var u *UncertainError
			if errors.As(err, &u) {
				return true, err
			}
			// The effect did not happen: let a retry run it. The
			// context may be done (the lease was lost): forget anyway.
			if ferr := store.Forget(context.WithoutCancel(ctx), key); ferr != nil {
				return true, errors.Join(err, fmt.Errorf("idempotency: forget key %q after the failure (it stays claimed: the effect will not be retried): %w", key, ferr))
			}
			return true, err
		}
		return true, nil
	case AtLeastOnce:
		seen, err := store.Seen(ctx, key)
		if err != nil {
			return false, fmt.Errorf("idempotency: look up key %q: %w", key, err)
		}
		if seen {
			return false, nil
		}
		if err := fn(ctx); err != nil {
			return true, err
		}
		// Record even if ctx ended meanwhile: the effect happened.
		if _, err := store.Claim(context.WithoutCancel(ctx), key); err != nil {
			return true, fmt.Errorf("idempotency: record key %q after the effect (the message will be retried and the effect repeated): %w", key, err)
		}
		return true, nil
	}
	return false, ErrNoMode
}

// UncertainError is an AtMostOnce effect's failure after which the effect
// may have happened: Do keeps the key claimed, so it never runs again.
type UncertainError struct{ Err error }

func (e *UncertainError) Error() string { return "effect may have happened: " + e.Err.Error() }

// Unwrap returns the effect's error.
func (e *UncertainError) Unwrap() error { return e.Err }

// Uncertain marks err as a failure after which the effect may have happened
// (see Do). Uncertain(nil) is nil.
func Uncertain(err error) error {
	if err == nil {
		return nil
	}
	return &UncertainError{Err: err}
}

// Middleware runs a handler through Do, keyed by Key(m): a message whose key
// is done is acked without calling the handler. The handler's errors
// (control errors included) pass through unchanged, so the pool nacks,
// snoozes or dead-letters as usual; under AtMostOnce such an error forgets
// the key (Do), unless it is Uncertain.
func Middleware(store Store, mode Mode) worker.Middleware {
	return func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
			_, err := Do(ctx, store, Key(m), mode, func(ctx context.Context) error { return next.HandleMessage(ctx, m) })
			return err
		})
	}
}
