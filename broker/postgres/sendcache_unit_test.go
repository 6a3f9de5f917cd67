package postgres

import (
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// TestSendCacheable: only a standard queue without a depth limit is kept in
// the send cache; the others read their row on every send, so caching
// theirs would only cost a map write per send.
func TestSendCacheable(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  model.QueueConfig
		want bool
	}{
		{"standard", model.QueueConfig{}, true},
		{"fifo", model.QueueConfig{Fifo: true}, false},
		{"max depth", model.QueueConfig{MaxDepth: 10}, false},
		{"low-priority max depth", model.QueueConfig{LowPriorityMaxDepth: 10}, false},
	} {
		if got := (queueRow{cfg: c.cfg}).sendCacheable(); got != c.want {
			t.Errorf("%s: sendCacheable = %v, want %v", c.name, got, c.want)
		}
	}
}
