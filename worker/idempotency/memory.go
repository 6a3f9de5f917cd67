package idempotency

import (
	"context"
	"sync"
)

// MemoryStore is a Store in a map, for tests and single-process demos. It
// is unbounded (every key stays until Forget) and forgets everything when
// the process ends, which defeats the purpose across crashes: production
// workers use a durable store (package pgstore).
type MemoryStore struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{keys: map[string]struct{}{}} }

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return false, nil
	}
	s.keys[key] = struct{}{}
	return true, nil
}

// Seen implements Store.
func (s *MemoryStore) Seen(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[key]
	return ok, nil
}

// Forget implements Store.
func (s *MemoryStore) Forget(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, key)
	return nil
}

// Len is the number of recorded keys.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}
