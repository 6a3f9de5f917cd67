package broker

import (
	"context"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// ReceiverWindow is how long a receiver stays in a queue's recent
// receivers after its latest receive.
const ReceiverWindow = 5 * time.Minute

// maxReceivers bounds the receivers kept per queue: past it the one heard
// from least recently goes.
const maxReceivers = 100

// maxReceiverField bounds the User-Agent and access key kept of a
// receiver, in bytes: the client sets both, a header may hold 64 KiB and
// more, and a queue keeps 100 receivers.
const maxReceiverField = 256

// receiverSweep is how often seen drops, in every queue, the receivers
// whose window has passed: without it a queue's stayed until its
// receivers were read or it was deleted.
const receiverSweep = time.Minute

// clip cuts s to maxReceiverField bytes, on a character's boundary.
func clip(s string) string {
	if len(s) <= maxReceiverField {
		return s
	}
	return strings.ToValidUTF8(s[:maxReceiverField], "")
}

// Receiver is one client that received from a queue through this broker
// within ReceiverWindow, told apart by its access key, host and
// User-Agent: the workers that poll over HTTP (the native API or SQS), who
// hold no stream.
type Receiver struct {
	// AccessKey is the key the requests were signed or authorized with
	// ("" unsigned); Addr the address of its latest receive (host:port);
	// UserAgent its User-Agent.
	AccessKey, Addr, UserAgent string
	// Receives counts its receive calls in the window's run (empty ones
	// too: a poll that found nothing), Received the messages they got.
	Receives, Received int64
	// FirstAt is its first receive since it was last forgotten, LastAt its
	// latest, by the broker's clock.
	FirstAt, LastAt time.Time
}

type receiverKey struct{ accessKey, host, userAgent string }

// receivers keeps each queue's recent receivers (queue ref -> key ->
// receiver). Safe for concurrent use.
type receivers struct {
	mu      sync.Mutex
	byQueue map[string]map[receiverKey]*Receiver
	swept   time.Time // the latest sweep of every queue
}

// seen records a receive by the request's caller that got n messages at
// now. An in-process call (no caller address) is not recorded.
func (r *receivers) seen(ctx context.Context, queue string, n int, now time.Time) {
	c := CallerFrom(ctx)
	if c.Addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		host = c.Addr
	}
	k := receiverKey{clip(c.AccessKey), clip(host), clip(c.UserAgent)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byQueue == nil {
		r.byQueue = make(map[string]map[receiverKey]*Receiver)
	}
	if now.Sub(r.swept) >= receiverSweep {
		r.swept = now
		for q, m := range r.byQueue {
			for key, x := range m {
				if now.Sub(x.LastAt) > ReceiverWindow {
					delete(m, key)
				}
			}
			if len(m) == 0 {
				delete(r.byQueue, q)
			}
		}
	}
	m := r.byQueue[queue]
	if m == nil {
		m = make(map[receiverKey]*Receiver)
		r.byQueue[queue] = m
	}
	rc := m[k]
	if rc == nil || now.Sub(rc.LastAt) > ReceiverWindow {
		if rc == nil && len(m) >= maxReceivers {
			var oldest receiverKey
			first := true
			for key, x := range m {
				if first || x.LastAt.Before(m[oldest].LastAt) {
					oldest, first = key, false
				}
			}
			delete(m, oldest)
		}
		rc = &Receiver{AccessKey: k.accessKey, UserAgent: k.userAgent, FirstAt: now}
		m[k] = rc
	}
	rc.Addr = clip(c.Addr)
	rc.Receives++
	rc.Received += int64(n)
	rc.LastAt = now
}

// of returns queue's receivers heard from within the window before now,
// the latest first, and forgets the others.
func (r *receivers) of(queue string, now time.Time) []Receiver {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []Receiver{}
	for k, x := range r.byQueue[queue] {
		if now.Sub(x.LastAt) > ReceiverWindow {
			delete(r.byQueue[queue], k)
			continue
		}
		out = append(out, *x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastAt.After(out[j].LastAt) })
	return out
}

func (r *receivers) forget(queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byQueue, queue)
}

// RecentReceivers returns the clients that received from queue through
// this broker within ReceiverWindow (5 minutes), the latest first: the
// workers that poll over HTTP, told apart by access key, host and
// User-Agent. Streams are listed by Consumers. With several brokers on one
// store, each knows only its own receivers. Authorized as reading the
// queue's attributes.
func (b *Broker) RecentReceivers(ctx context.Context, queue string) ([]Receiver, error) {
	ref, err := b.resolve(ctx, model.ActionGetQueueAttributes, queue)
	if err != nil {
		return nil, err
	}
	if _, err := b.backend.GetQueue(ctx, ref); err != nil {
		return nil, err
	}
	return b.receivers.of(ref.String(), b.clock.Now()), nil
}
