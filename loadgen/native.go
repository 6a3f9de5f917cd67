package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"time"

	sclient "github.com/sluicemq/sluice/client"
)

// nativeDriver drives Sluice's native /v1/ API through the client package
// (no retries, so errors show), sharing the pooled HTTP client.
type nativeDriver struct {
	cfg SQSConfig
	hc  *http.Client
	c   *sclient.Client
}

func newNativeDriver(cfg SQSConfig, hc *http.Client) (*nativeDriver, error) {
	opts := []sclient.Option{sclient.WithHTTPClient(hc), sclient.WithRetries(0), sclient.WithUserAgent("sluice-bench")}
	if cfg.AccessKey != "" {
		opts = append(opts, sclient.WithToken(cfg.AccessKey, cfg.SecretKey))
	}
	c, err := sclient.New(cfg.Endpoint, opts...)
	if err != nil {
		return nil, err
	}
	return &nativeDriver{cfg: cfg, hc: hc, c: c}, nil
}

func (d *nativeDriver) Describe() string {
	return fmt.Sprintf("Sluice native /v1/ API (client package) at %s", d.cfg.Endpoint)
}

func (d *nativeDriver) Setup(ctx context.Context) error {
	if _, err := d.c.GetQueue(ctx, d.cfg.Queue); err == nil {
		return nil
	}
	_, err := d.c.CreateQueue(ctx, d.cfg.Queue, nil)
	return err
}

func (d *nativeDriver) Close() error {
	defer d.c.Close()
	if d.cfg.Keep {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.c.DeleteQueue(ctx, d.cfg.Queue)
}

func (d *nativeDriver) NewProducer(context.Context, int) (Producer, error) {
	return nativeConn{d: d}, nil
}
func (d *nativeDriver) NewConsumer(context.Context, int) (Consumer, error) {
	return nativeConn{d: d}, nil
}

type nativeConn struct {
	nopCloser
	d *nativeDriver
}

func (c nativeConn) Send(ctx context.Context, bodies [][]byte) ([]bool, error) {
	if len(bodies) == 1 {
		if _, err := c.d.c.Send(ctx, c.d.cfg.Queue, sclient.Message{Body: string(bodies[0])}); err != nil {
			return nil, err
		}
		return okAll(1), nil
	}
	msgs := make([]sclient.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = sclient.Message{Body: string(b)}
	}
	res, err := c.d.c.SendBatch(ctx, c.d.cfg.Queue, msgs)
	if err != nil {
		return nil, err
	}
	acc := make([]bool, len(bodies))
	for i, r := range res {
		acc[i] = r.Err == nil
	}
	return acc, nil
}

func (c nativeConn) Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error) {
	ds, err := c.d.c.Receive(ctx, c.d.cfg.Queue, sclient.MaxMessages(max), sclient.WaitTime(wait))
	if err != nil {
		return nil, err
	}
	msgs := make([]Received, len(ds))
	for i, m := range ds {
		msgs[i] = Received{Body: m.Body, Handle: m.Receipt}
	}
	return msgs, nil
}

func (c nativeConn) Delete(ctx context.Context, msgs []Received) error {
	if len(msgs) == 1 {
		return c.d.c.Ack(ctx, c.d.cfg.Queue, msgs[0].Handle.(string))
	}
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.Handle.(string)
	}
	errs, err := c.d.c.AckBatch(ctx, c.d.cfg.Queue, receipts)
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("ack batch: %w", e)
		}
	}
	return nil
}
