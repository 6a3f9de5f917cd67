package model

import "time"

// Observer learns what the broker did, for metrics (package metrics
// implements it over Prometheus). The front and the backends call it after a
// change is durable, from many goroutines at once: an Observer must be safe
// for concurrent use, cheap, and must never block. broker.Config.Observer nil
// observes nothing.
//
// Queue names are the broker's own account's; the broker's internal queues
// (the webhook outbox) are not reported.
type Observer interface {
	// Count adds n (> 0) to counter c of queue.
	Count(queue string, c Counter, n int)
	// Refused counts one send refused by backpressure, with its reason
	// (DepthError.Reason).
	Refused(queue, reason string)
	// Synced reports one durable sync of the store's log: how long it took
	// and how many commits (group commit: changes of many requests) it made
	// durable. Backends without a log of their own (PostgreSQL) never call it.
	Synced(d time.Duration, commits int)
}

// Counter is a per-queue event counter of Observer.Count.
type Counter uint8

// The counters.
const (
	// CountSent: messages stored by a send (a FIFO duplicate is not).
	CountSent Counter = iota
	// CountReceived: messages delivered by a receive.
	CountReceived
	// CountDeleted: messages deleted by their consumer (a delete of the
	// message's latest lease; not purges, deletes by id or expiry).
	CountDeleted
	// CountNacked: leases handed back as failures (a native nack, or SQS's
	// ChangeMessageVisibility to 0).
	CountNacked
	// CountDeadLettered: messages moved to the queue's dead-letter queue.
	CountDeadLettered
	// CountDamaged: messages set aside because their stored body could not
	// be read (on-disk corruption); never delivered again.
	CountDamaged
	// CountExpired: messages whose time to live passed, dropped or moved to
	// the queue's dead-letter queue (a move counts as CountDeadLettered
	// too).
	CountExpired
	// CountArchived: messages of an ArchiveExpired queue whose retention
	// ended, written to the broker's archive before their removal.
	CountArchived
	// CountArchiveFailed: messages of an ArchiveExpired queue whose
	// retention ended and that were removed without being archived (the
	// archive could not be written: a full disk, an error; see
	// docs/archive.md).
	CountArchiveFailed
	// NumCounters is the number of counters.
	NumCounters
)

// String is the counter's name, as metric labels spell it.
func (c Counter) String() string {
	switch c {
	case CountSent:
		return "sent"
	case CountReceived:
		return "received"
	case CountDeleted:
		return "deleted"
	case CountNacked:
		return "nacked"
	case CountDeadLettered:
		return "dead_lettered"
	case CountDamaged:
		return "damaged"
	case CountExpired:
		return "expired"
	case CountArchived:
		return "archived"
	case CountArchiveFailed:
		return "archive_failed"
	}
	return "unknown"
}

// Observers returns an Observer that reports to each non-nil observer in
// order (Options holds one Observer: metrics and the live dashboard's
// sampler both listen). It returns nil when none is given, the only one when
// one is given.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

// multiObserver is the fan-out of Observers.
type multiObserver []Observer

func (m multiObserver) Count(queue string, c Counter, n int) {
	for _, o := range m {
		o.Count(queue, c, n)
	}
}

func (m multiObserver) Refused(queue, reason string) {
	for _, o := range m {
		o.Refused(queue, reason)
	}
}

func (m multiObserver) Synced(d time.Duration, commits int) {
	for _, o := range m {
		o.Synced(d, commits)
	}
}
