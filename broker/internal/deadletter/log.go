package deadletter

import (
	"log/slog"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Log logs moves to dead-letter queues at warn level, at most
// Burst lines per Interval (the rest are counted and reported with the next
// line that is written), so that a poison-pill storm cannot flood the log.
// Backends share one per store. Safe for concurrent use.
type Log struct {
	Log      *slog.Logger
	Clock    model.Clock
	Interval time.Duration // default 1 s
	Burst    int           // default 10
	// Observer, when not nil, counts every move (CountDeadLettered), logged
	// or not.
	Observer model.Observer

	mu         sync.Mutex
	windowFrom time.Time
	written    int
	dropped    int
}

// Moved logs that message id moved from queue source to its dead-letter
// queue dlq, with its reason and attempts.
func (l *Log) Moved(id string, source, dlq model.QueueRef, reason string, attempts int) {
	if l == nil {
		return
	}
	if l.Observer != nil {
		l.Observer.Count(source.String(), model.CountDeadLettered, 1) // <account>/<name> for another account's queue
	}
	if l.Log == nil {
		return
	}
	interval, burst := l.Interval, l.Burst
	if interval <= 0 {
		interval = time.Second
	}
	if burst <= 0 {
		burst = 10
	}
	now := time.Now()
	if l.Clock != nil {
		now = l.Clock.Now()
	}
	l.mu.Lock()
	if now.Sub(l.windowFrom) >= interval || now.Before(l.windowFrom) {
		l.windowFrom, l.written = now, 0
	}
	if l.written >= burst {
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.written++
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	args := []any{"message_id", id, "queue", source.String(), "dead_letter_queue", dlq.String(), "reason", reason, "attempts", attempts}
	if dropped > 0 {
		args = append(args, "not_logged_before", dropped)
	}
	l.Log.Warn("message moved to the dead-letter queue", args...)
}
