package peers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/loadgen"
)

// JetStream drives a NATS JetStream work-queue stream (a message is removed
// when acknowledged) with file storage and one replica, through one durable
// pull consumer with explicit acks that every consumer shares. A single
// send is Publish (it waits for the stream's PubAck); a batch is
// PublishAsync of each message, then a wait for every PubAck. A delete is
// DoubleAck (it waits for the server to confirm the ack). Whether the
// stream fsyncs before its PubAck is the server's setting (sync_interval),
// not the client's.
type JetStream struct {
	// URL is the server's URL, e.g. nats://127.0.0.1:4222.
	URL string
	// Stream is the stream's name (its subject is Stream + ".msgs");
	// created fresh and deleted at Close.
	Stream string
	// Sync names the server's fsync setting for the summary ("lazy" or
	// "always"); it changes nothing.
	Sync string

	nc      *nats.Conn
	js      jetstream.JetStream
	version string
}

const jsConsumer = "workers"

// Describe implements loadgen.Driver.
func (d *JetStream) Describe() string {
	return fmt.Sprintf("NATS JetStream %s (nats.go): work-queue stream, file storage, fsync %s, pull consumer, DoubleAck", d.version, d.Sync)
}

func (d *JetStream) subject() string { return d.Stream + ".msgs" }

// Setup implements loadgen.Driver.
func (d *JetStream) Setup(ctx context.Context) error {
	nc, err := nats.Connect(d.URL)
	if err != nil {
		return err
	}
	d.nc = nc
	d.version = nc.ConnectedServerVersion()
	if d.js, err = jetstream.New(nc); err != nil {
		return err
	}
	if err := d.js.DeleteStream(ctx, d.Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	if _, err = d.js.CreateStream(ctx, jetstream.StreamConfig{Name: d.Stream, Subjects: []string{d.subject()},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: 1}); err != nil {
		return err
	}
	_, err = d.js.CreateOrUpdateConsumer(ctx, d.Stream, jetstream.ConsumerConfig{Durable: jsConsumer,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 100000})
	return err
}

// Close implements loadgen.Driver: it deletes the stream.
func (d *JetStream) Close() error {
	if d.nc == nil {
		return nil
	}
	defer d.nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.js.DeleteStream(ctx, d.Stream)
}

type jsProducer struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	subj string
}

// NewProducer implements loadgen.Driver.
func (d *JetStream) NewProducer(ctx context.Context, id int) (loadgen.Producer, error) {
	nc, err := nats.Connect(d.URL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &jsProducer{nc: nc, js: js, subj: d.subject()}, nil
}

func (p *jsProducer) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	if len(bodies) == 1 {
		if _, err := p.js.Publish(ctx, p.subj, bodies[0]); err != nil {
			return nil, err
		}
		return []bool{true}, nil
	}
	futs := make([]jetstream.PubAckFuture, len(bodies))
	for i, b := range bodies {
		f, err := p.js.PublishAsync(p.subj, b)
		if err != nil {
			return nil, err
		}
		futs[i] = f
	}
	acc := make([]bool, len(bodies))
	for i, f := range futs {
		select {
		case <-f.Ok():
			acc[i] = true
		case <-f.Err():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return acc, nil
}

func (p *jsProducer) Close() error { p.nc.Close(); return nil }

type jsConsumerConn struct {
	nc *nats.Conn
	it jetstream.MessagesContext
	ch chan jetstream.Msg
}

// NewConsumer implements loadgen.Driver: the consumer keeps pull requests
// outstanding (Messages, up to 20 buffered) and Receive takes from them.
func (d *JetStream) NewConsumer(ctx context.Context, id int) (loadgen.Consumer, error) {
	nc, err := nats.Connect(d.URL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	var cons jetstream.Consumer
	if err == nil {
		cons, err = js.Consumer(ctx, d.Stream, jsConsumer)
	}
	var it jetstream.MessagesContext
	if err == nil {
		it, err = cons.Messages(jetstream.PullMaxMessages(20))
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := &jsConsumerConn{nc: nc, it: it, ch: make(chan jetstream.Msg, 20)}
	go func() {
		defer close(c.ch)
		for {
			m, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) || errors.Is(err, nats.ErrConnectionClosed) {
					return
				}
				continue
			}
			c.ch <- m
		}
	}()
	return c, nil
}

func (c *jsConsumerConn) Receive(ctx context.Context, max int, wait time.Duration) ([]loadgen.Received, error) {
	return gather(ctx, max, wait, c.ch, func(m jetstream.Msg) loadgen.Received {
		return loadgen.Received{Body: string(m.Data()), Handle: m}
	})
}

// Delete double-acks each message (JetStream has no batch ack for a
// work-queue consumer's individual messages).
func (c *jsConsumerConn) Delete(ctx context.Context, msgs []loadgen.Received) error {
	for _, m := range msgs {
		if err := m.Handle.(jetstream.Msg).DoubleAck(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (c *jsConsumerConn) Close() error {
	c.it.Stop()
	c.nc.Close()
	for range c.ch {
	}
	return nil
}
