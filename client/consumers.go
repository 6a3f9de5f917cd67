package client

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// Consumer is one consumer stream open on a queue: a consumer of the stream
// API (package client/stream), which gets messages pushed while its credit
// allows. Consumers that poll with Receive hold no stream.
type Consumer struct {
	// ID names the stream; Broker the broker that serves it (host, process
	// id and a random part); ClientName is the name its consumer gave (""
	// when none); RemoteAddress where it connects from ("host:port").
	ID, Broker, ClientName, RemoteAddress string
	// Credit is how many unsettled messages it may hold; Held how many it
	// holds now.
	Credit, Held int
	// Acked counts the messages it acked since it opened; AckedPerSecond
	// is their rate over the last ten seconds.
	Acked          int64
	AckedPerSecond float64
	// Lease is each delivered message's lease, which the broker extends
	// while the stream lives, up to MaxHold per message.
	Lease, MaxHold time.Duration
	// ConnectedAt is when it opened; LastActiveAt its latest delivery or
	// settlement.
	ConnectedAt, LastActiveAt time.Time
}

// Consumers answers the consumer streams open on the queue, in the order
// they opened; none is an empty list. With several brokers on one
// PostgreSQL store, any of them lists every broker's streams (the others'
// as of their latest record, every 5 s). An unknown queue is
// ErrQueueNotFound.
func (c *Client) Consumers(ctx context.Context, queue string) ([]Consumer, error) {
	var out wire.ConsumerList
	if err := c.do(ctx, request{method: http.MethodGet, path: queuePath(queue, "consumers"), idempotent: true}, &out); err != nil {
		return nil, err
	}
	cs := make([]Consumer, len(out.Consumers))
	for i, w := range out.Consumers {
		cs[i] = Consumer{ID: w.ID, Broker: w.Broker, ClientName: w.ClientName, RemoteAddress: w.RemoteAddress,
			Credit: w.Credit, Held: w.Held, Acked: w.Acked, AckedPerSecond: w.AckedPerSecond,
			Lease: time.Duration(w.LeaseSeconds) * time.Second, MaxHold: time.Duration(w.MaxHoldSeconds) * time.Second,
			ConnectedAt: w.ConnectedAt, LastActiveAt: w.LastActiveAt}
	}
	return cs, nil
}
