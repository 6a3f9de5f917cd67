// Package peers holds loadgen drivers for the brokers Sluice is measured
// against: RabbitMQ, NATS JetStream and River. It lives in the separate
// bench module so that the sluice binary links none of their clients.
package peers

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sluicemq/sluice/loadgen"
)

// RabbitMQ drives a durable RabbitMQ queue: persistent messages, publisher
// confirms (a send returns when the broker confirmed every message of it),
// manual acknowledgements (a batch is acked with one multiple-ack) and a
// prefetch per consumer. Each producer and consumer has its own connection.
type RabbitMQ struct {
	// URL is the AMQP URL, e.g. amqp://guest:guest@127.0.0.1:5672/.
	URL string
	// Queue is the queue's name; it is declared fresh and deleted at Close.
	Queue string
	// QueueType is classic (default) or quorum.
	QueueType string
	// Prefetch is each consumer's unacknowledged-message limit. Default 20.
	Prefetch int

	conn    *amqp.Connection
	version string
}

// Describe implements loadgen.Driver.
func (d *RabbitMQ) Describe() string {
	return fmt.Sprintf("RabbitMQ %s (amqp091-go): durable %s queue, persistent messages, publisher confirms, manual acks, prefetch %d",
		d.version, d.queueType(), d.prefetch())
}

func (d *RabbitMQ) queueType() string {
	if d.QueueType == "" {
		return "classic"
	}
	return d.QueueType
}

func (d *RabbitMQ) prefetch() int {
	if d.Prefetch <= 0 {
		return 20
	}
	return d.Prefetch
}

// Setup implements loadgen.Driver: it declares the queue (deleting one of
// the same name first, so the run starts empty).
func (d *RabbitMQ) Setup(ctx context.Context) error {
	c, err := amqp.Dial(d.URL)
	if err != nil {
		return err
	}
	d.conn = c
	if v, ok := c.Properties["version"].(string); ok {
		d.version = v
	}
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if _, err := ch.QueueDelete(d.Queue, false, false, false); err != nil {
		return err
	}
	_, err = ch.QueueDeclare(d.Queue, true, false, false, false, amqp.Table{"x-queue-type": d.queueType()})
	return err
}

// Close implements loadgen.Driver: it deletes the queue.
func (d *RabbitMQ) Close() error {
	if d.conn == nil {
		return nil
	}
	defer d.conn.Close()
	ch, err := d.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueueDelete(d.Queue, false, false, false)
	return err
}

type rabbitProducer struct {
	conn  *amqp.Connection
	ch    *amqp.Channel
	queue string
}

// NewProducer implements loadgen.Driver.
func (d *RabbitMQ) NewProducer(ctx context.Context, id int) (loadgen.Producer, error) {
	c, err := amqp.Dial(d.URL)
	if err != nil {
		return nil, err
	}
	ch, err := c.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return &rabbitProducer{conn: c, ch: ch, queue: d.Queue}, nil
}

func (p *rabbitProducer) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	dcs := make([]*amqp.DeferredConfirmation, len(bodies))
	for i, b := range bodies {
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, "", p.queue, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: b})
		if err != nil {
			return nil, err
		}
		dcs[i] = dc
	}
	acc := make([]bool, len(bodies))
	for i, dc := range dcs {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return nil, err
		}
		acc[i] = ok
	}
	return acc, nil
}

func (p *rabbitProducer) Close() error { return p.conn.Close() }

type rabbitConsumer struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	dlv  <-chan amqp.Delivery
}

// NewConsumer implements loadgen.Driver.
func (d *RabbitMQ) NewConsumer(ctx context.Context, id int) (loadgen.Consumer, error) {
	c, err := amqp.Dial(d.URL)
	if err != nil {
		return nil, err
	}
	ch, err := c.Channel()
	if err == nil {
		err = ch.Qos(d.prefetch(), 0, false)
	}
	var dlv <-chan amqp.Delivery
	if err == nil {
		dlv, err = ch.Consume(d.Queue, "", false, false, false, false, nil)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return &rabbitConsumer{conn: c, ch: ch, dlv: dlv}, nil
}

var errClosed = errors.New("peers: delivery channel closed")

// Receive waits for one delivery, then takes what else is already there.
func (c *rabbitConsumer) Receive(ctx context.Context, max int, wait time.Duration) ([]loadgen.Received, error) {
	return gather(ctx, max, wait, c.dlv, func(m amqp.Delivery) loadgen.Received {
		return loadgen.Received{Body: string(m.Body), Handle: m.DeliveryTag}
	})
}

// Delete acks the batch: one multiple-ack of its highest tag (deliveries on
// a channel arrive in tag order and earlier ones are already acked).
func (c *rabbitConsumer) Delete(ctx context.Context, msgs []loadgen.Received) error {
	var top uint64
	for _, m := range msgs {
		top = max(top, m.Handle.(uint64))
	}
	return c.ch.Ack(top, len(msgs) > 1)
}

func (c *rabbitConsumer) Close() error { return c.conn.Close() }

// gather waits up to wait for a first item on ch, then takes up to max in
// all of what is already queued.
func gather[T any](ctx context.Context, max int, wait time.Duration, ch <-chan T, conv func(T) loadgen.Received) ([]loadgen.Received, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	var first T
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, errClosed
		}
		first = m
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := []loadgen.Received{conv(first)}
	for len(out) < max {
		select {
		case m, ok := <-ch:
			if !ok {
				return out, nil
			}
			out = append(out, conv(m))
		default:
			return out, nil
		}
	}
	return out, nil
}
