package wire

import "time"

// Consumer is one consumer stream open on a queue (the stream API's
// Consume, docs/streams.md). A stream lives on the broker it was opened on;
// with several brokers on one PostgreSQL store, each lists the others'
// streams too, as of their latest record (every 5 s).
type Consumer struct {
	// ID names the stream (the id its Opened answer gave the consumer).
	ID string `json:"id"`
	// Broker names the broker that serves the stream (its host, process id
	// and a random part).
	Broker string `json:"broker"`
	// ClientName is the name the consumer gave when it opened the stream
	// ("" when none); RemoteAddress is where it connects from
	// ("host:port").
	ClientName    string `json:"clientName"`
	RemoteAddress string `json:"remoteAddress"`
	// Credit is how many unsettled messages the stream may hold; Held how
	// many it holds now.
	Credit int `json:"credit"`
	Held   int `json:"held"`
	// Acked counts the messages it settled with an ack (or that another
	// API deleted while it held them); AckedPerSecond is their rate over
	// the last ten seconds (or since it opened, when that is sooner),
	// rounded to hundredths.
	Acked          int64   `json:"acked"`
	AckedPerSecond float64 `json:"ackedPerSecond"`
	// LeaseSeconds is each delivered message's lease; MaxHoldSeconds how
	// long the broker keeps extending one message's lease for it.
	LeaseSeconds   int64 `json:"leaseSeconds"`
	MaxHoldSeconds int64 `json:"maxHoldSeconds"`
	// ConnectedAt is when it opened; LastActiveAt its latest delivery or
	// settlement (ConnectedAt until the first).
	ConnectedAt  time.Time `json:"connectedAt"`
	LastActiveAt time.Time `json:"lastActiveAt"`
}

// ConsumerList is the answer of GET /v1/queues/{queue}/consumers: the
// streams open on the queue, in the order they opened.
type ConsumerList struct {
	// Consumers are the streams ([] when none).
	Consumers []Consumer `json:"consumers"`
}

// Receiver is a client that received from a queue through this broker in
// the last 5 minutes over HTTP (the native API or SQS): the workers that
// poll and hold no stream.
type Receiver struct {
	// AccessKey is the key its requests were signed or authorized with
	// ("" unsigned); RemoteAddress the address of its latest receive;
	// UserAgent its User-Agent.
	AccessKey     string `json:"accessKey"`
	RemoteAddress string `json:"remoteAddress"`
	UserAgent     string `json:"userAgent"`
	// Receives counts its receive calls (empty polls too), Received the
	// messages they got.
	Receives int64 `json:"receives"`
	Received int64 `json:"received"`
	// FirstAt is its first receive in this run, LastAt its latest.
	FirstAt time.Time `json:"firstAt"`
	LastAt  time.Time `json:"lastAt"`
}

// ReceiverList answers GET /v1/queues/{queue}/receivers: the latest first.
type ReceiverList struct {
	Receivers []Receiver `json:"receivers"`
	// WindowSeconds is how long a receiver is kept after its latest
	// receive (300).
	WindowSeconds int64 `json:"windowSeconds"`
}
