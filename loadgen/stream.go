package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/client/stream"
)

// ProtocolStream drives Sluice's stream API (gRPC, client/stream): each
// producer publishes on a Publish stream and waits for each confirm; each
// consumer reads a Consume stream of credit SQSConfig.Credit and acks what
// it receives in one settlement batch.
const ProtocolStream = "stream"

// streamsPerConn is how many streams share one connection (HTTP/2
// multiplexes them; more connections spread the work over the broker's
// readers).
const streamsPerConn = 8

// DefaultStreamCredit is a stream consumer's credit when SQSConfig.Credit is 0.
const DefaultStreamCredit = 32

// streamDriver drives the stream API; the queue is created and deleted
// through the native API.
type streamDriver struct {
	*nativeDriver
	target string // the stream endpoint: the broker's own port
	token  string

	mu    sync.Mutex
	conns []*stream.Client
	users int // streams opened so far (the next one's connection)
}

func newStreamDriver(cfg SQSConfig, native *nativeDriver) (*streamDriver, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	d := &streamDriver{nativeDriver: native, target: u.Scheme + "://" + u.Host}
	if cfg.AccessKey != "" {
		d.token = cfg.AccessKey + ":" + cfg.SecretKey
	}
	return d, nil
}

func (d *streamDriver) Describe() string {
	return fmt.Sprintf("Sluice stream API (gRPC, client/stream; %d streams per connection) at %s", streamsPerConn, d.target)
}

// conn returns the connection the next stream uses.
func (d *streamDriver) conn() (*stream.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := d.users / streamsPerConn
	d.users++
	if i < len(d.conns) {
		return d.conns[i], nil
	}
	c, err := stream.Dial(d.target, stream.Options{Token: d.token, UserAgent: "sluice-bench"})
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *streamDriver) Close() error {
	d.mu.Lock()
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
	d.mu.Unlock()
	return d.nativeDriver.Close()
}

func (d *streamDriver) NewProducer(ctx context.Context, _ int) (Producer, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	p, err := c.Publisher(ctx)
	if err != nil {
		return nil, err
	}
	return &streamProducer{p: p, queue: d.cfg.Queue}, nil
}

func (d *streamDriver) NewConsumer(ctx context.Context, id int) (Consumer, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	credit := d.cfg.Credit
	if credit == 0 {
		credit = DefaultStreamCredit
	}
	s, err := c.Consume(ctx, stream.ConsumeOptions{Queue: d.cfg.Queue, Credit: credit, ClientName: fmt.Sprintf("sluice-bench-%d", id)})
	if err != nil {
		return nil, err
	}
	return &streamConsumer{s: s}, nil
}

type streamProducer struct {
	p     *stream.Publisher
	queue string
}

func (p *streamProducer) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	env := make([]*streampb.Envelope, len(bodies))
	for i, b := range bodies {
		env[i] = &streampb.Envelope{Body: string(b)}
	}
	res, err := p.p.Publish(ctx, p.queue, env...)
	if err != nil {
		return nil, err
	}
	acc := make([]bool, len(bodies))
	for i, r := range res {
		acc[i] = r.Err == nil
	}
	return acc, nil
}

func (p *streamProducer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.p.Close(ctx)
}

type streamConsumer struct{ s *stream.Consumer }

// done is an ended context: Receive with it takes what has arrived
// without waiting.
var done = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (c *streamConsumer) Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	m, err := c.s.Receive(wctx)
	cancel()
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return nil, nil // nothing came within wait
	case err != nil:
		return nil, err
	}
	out := []Received{{Body: m.GetBody(), Handle: m.GetReceipt()}}
	for len(out) < max {
		m, err := c.s.Receive(done)
		if err != nil {
			break
		}
		out = append(out, Received{Body: m.GetBody(), Handle: m.GetReceipt()})
	}
	return out, nil
}

func (c *streamConsumer) Delete(ctx context.Context, msgs []Received) error {
	acks := make([]*streampb.Settlement, len(msgs))
	for i, m := range msgs {
		acks[i] = &streampb.Settlement{Receipt: m.Handle.(string), Action: &streampb.Settlement_Ack{Ack: &streampb.Ack{}}}
	}
	errs, err := c.s.Settle(ctx, acks...)
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("ack: %w", e)
		}
	}
	return nil
}

func (c *streamConsumer) Close() error { return c.s.Close() }
