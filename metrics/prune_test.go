package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestCountsPrunedWithoutScrape: a broker nobody scrapes must not keep the
// counters of every queue it ever served (queues made and deleted per job).
func TestCountsPrunedWithoutScrape(t *testing.T) {
	t.Parallel()
	m := New()
	b := testbroker.Start(t, testbroker.Config{Observer: m})
	m.Attach(b.Front)
	// Counts of queues that no longer exist (deleted since), never scraped.
	// Each prune is waited for, so that the count is deterministic.
	for i := range 5 * pruneMin {
		m.Count(fmt.Sprintf("job-%d", i), model.CountSent, 1)
		if m.pruning.Load() {
			testutil.Eventually(t, 10*time.Second, "prune done", func() bool { return !m.pruning.Load() })
		}
	}
	size := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.counts)
	}
	if n := size(); n >= pruneMin {
		t.Fatalf("%d queues' counters kept after %d deleted queues and no scrape, want < %d", n, 5*pruneMin, pruneMin)
	}
	// A live queue's counters stay through a prune.
	if _, err := b.Front.CreateQueue(t.Context(), "kept", nil, nil); err != nil {
		t.Fatal(err)
	}
	m.Count("kept", model.CountSent, 7)
	for i := range 2 * pruneMin {
		m.Count(fmt.Sprintf("job2-%d", i), model.CountSent, 1)
		if m.pruning.Load() {
			testutil.Eventually(t, 10*time.Second, "prune done", func() bool { return !m.pruning.Load() })
		}
	}
	m.mu.Lock()
	kept := m.counts["kept"]
	m.mu.Unlock()
	if kept == nil || kept.n[model.CountSent].Load() != 7 {
		t.Fatalf("the live queue's counters were pruned")
	}
}
