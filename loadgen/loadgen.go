// Package loadgen drives a message queue with producers and consumers and
// measures it: throughput, send latency, end-to-end latency (from a
// timestamp in each body), lost and duplicated messages and, given the
// broker's pid, the broker's CPU time per message and peak memory.
//
// A system is reached through a Driver. This package holds the drivers for
// Sluice's protocols (lean SQS JSON and query clients, the AWS SDK, the
// native /v1/ API) and a null SQS server; drivers for other brokers live
// in the separate bench module so that the sluice binary links none of
// their clients. `sluice bench` is the command-line front.
//
// Modes:
//   - produce: producers send for the duration; the figure is messages sent
//     per second.
//   - drain: producers first load Messages messages (not measured), then
//     consumers receive and delete them all; the figure is messages deleted
//     per second, and each message must arrive exactly once.
//   - steady: producers and consumers at once (send, receive, delete); the
//     figure is messages deleted per second. When the producers stop, the
//     consumers drain what is left (up to TailTimeout) so lost messages can
//     be counted.
//
// With Rate set, producers send at a fixed offered rate and latency counts
// from each message's scheduled send time, so a broker that falls behind
// shows it in the latency rather than in a slower schedule.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Driver reaches one system under test. Setup creates the queue the run
// uses; Close removes it and releases what the driver holds. Each producer
// and consumer goroutine gets its own Producer or Consumer.
type Driver interface {
	// Describe names the system and how it is driven, for the summary.
	Describe() string
	Setup(ctx context.Context) error
	NewProducer(ctx context.Context, id int) (Producer, error)
	NewConsumer(ctx context.Context, id int) (Consumer, error)
	Close() error
}

// Producer sends messages.
type Producer interface {
	// Send sends the bodies (one, or a batch) and returns once the system
	// has confirmed them (durably, where the system offers that).
	// accepted is how many (in order of bodies) were confirmed.
	Send(ctx context.Context, bodies [][]byte) (accepted []bool, err error)
	Close() error
}

// Consumer receives and deletes (acknowledges) messages.
type Consumer interface {
	// Receive waits up to wait for at least one message and returns at
	// most max.
	Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error)
	// Delete acknowledges the messages (in one batch where the system can).
	Delete(ctx context.Context, msgs []Received) error
	Close() error
}

// Received is a received message: its body and the driver's handle for
// deleting it.
type Received struct {
	Body   string
	Handle any
}

// Mode is what a run does.
type Mode string

// The modes; see the package documentation.
const (
	ModeProduce Mode = "produce"
	ModeDrain   Mode = "drain"
	ModeSteady  Mode = "steady"
)

// Config is one run.
type Config struct {
	// Mode is produce, drain or steady. Default steady.
	Mode Mode
	// Producers and Consumers are the goroutines sending and receiving
	// (1..4096). Default 32 each; produce ignores Consumers.
	Producers, Consumers int
	// Batch is how many messages one send carries (1..10). Default 1.
	Batch int
	// ReceiveMax is the most messages one receive asks for (1..10).
	// Default 10. Deletes are batched per receive.
	ReceiveMax int
	// BodySize is each body's size in bytes (38..262144). Default 256.
	BodySize int
	// Rate is the offered rate in messages per second over all producers;
	// 0 sends as fast as the system confirms. Default 0.
	Rate float64
	// Duration is how long produce and steady measure. Default 10 s.
	Duration time.Duration
	// Warmup runs before the measured window and is not counted.
	// Default 1 s.
	Warmup time.Duration
	// Messages is how many messages drain loads and then receives.
	// Default 50,000.
	Messages int
	// ReceiveWait is a receive's long-poll wait. Default 1 s.
	ReceiveWait time.Duration
	// TailTimeout bounds steady's final drain. Default 10 s.
	TailTimeout time.Duration
	// PIDs are the broker's processes (and their descendants) whose CPU
	// time and peak memory the summary reports; none: not measured.
	PIDs []int
	// Progress receives a progress line each ProgressEvery; nil: none.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// DefaultConfig is the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Mode: ModeSteady, Producers: 32, Consumers: 32, Batch: 1, ReceiveMax: 10, BodySize: 256,
		Duration: 10 * time.Second, Warmup: time.Second, Messages: 50000, ReceiveWait: time.Second,
		TailTimeout: 10 * time.Second, ProgressEvery: time.Second}
}

// Validate checks the fields' ranges.
func (c *Config) Validate() error {
	switch c.Mode {
	case ModeProduce, ModeDrain, ModeSteady:
	default:
		return fmt.Errorf("mode %q: want produce, drain or steady", c.Mode)
	}
	checks := []struct {
		name     string
		v, lo, h int
	}{
		{"producers", c.Producers, 1, 4096}, {"consumers", c.Consumers, 1, 4096}, {"batch", c.Batch, 1, 10},
		{"receive-max", c.ReceiveMax, 1, 10}, {"body-size", c.BodySize, bodyMinSize, 262144},
	}
	for _, k := range checks {
		if k.v < k.lo || k.v > k.h {
			return fmt.Errorf("%s %d: want %d..%d", k.name, k.v, k.lo, k.h)
		}
	}
	if c.Rate < 0 {
		return errors.New("rate: must not be negative")
	}
	if c.Mode != ModeDrain && c.Duration <= 0 {
		return errors.New("duration: must be positive")
	}
	if c.Mode == ModeDrain && c.Messages < 1 {
		return errors.New("messages: drain needs at least 1")
	}
	if c.Warmup < 0 || c.ReceiveWait < 0 || c.TailTimeout < 0 {
		return errors.New("warmup, receive wait and tail timeout must not be negative")
	}
	return nil
}
