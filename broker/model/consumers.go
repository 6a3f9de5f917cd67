package model

import "time"

// ConsumerInfo describes one open consumer stream (the front's
// Broker.Consumers; the store's consumer records).
type ConsumerInfo struct {
	// ID names the stream; Broker the broker that serves it (its host,
	// process and a random part); Queue is the queue's name as the consumer
	// gave it.
	ID, Broker, Queue, ClientName, RemoteAddr string
	// Credit is the stream's credit; Held how many messages it holds.
	Credit, Held int
	// Acked counts the messages it settled with an ack (or that were
	// deleted through another API while it held them); AckedPerSecond is
	// their rate over the last ten seconds (or since the stream opened,
	// when that is sooner).
	Acked          int64
	AckedPerSecond float64
	// Lease and MaxHold are the values in force.
	Lease, MaxHold time.Duration
	// ConnectedAt is when it opened; LastActive its latest delivery or
	// settlement.
	ConnectedAt, LastActive time.Time
}

// ConsumerRecord is a stream as its broker records it in a shared store:
// the queue it consumes, and its description at the broker's latest
// heartbeat.
type ConsumerRecord struct {
	Ref  QueueRef
	Info ConsumerInfo
}
