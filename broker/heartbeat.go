package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

const (
	// consumerHeartbeat is how often a broker records its open streams
	// in the store (RecordConsumers), besides at once when one opens or
	// ends.
	consumerHeartbeat = 5 * time.Second
	// consumerTTL is how long a record lasts without a heartbeat: a killed
	// broker's streams leave the consumer list after it.
	consumerTTL = 3 * consumerHeartbeat
)

// brokerID names a broker in the store's consumer records: its host, its
// process and a random part (several fronts may run in one process).
func brokerID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// heartbeat records this broker's open streams in the store every
// consumerHeartbeat and whenever it is kicked (a stream opened or ended),
// so that every broker sharing the store lists them (Broker.Consumers). It
// runs while streams are open, and until it has removed their records.
type heartbeat struct {
	b       *Broker
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	stopped sync.Once
}

func startHeartbeat(b *Broker) *heartbeat {
	ctx, cancel := context.WithCancel(context.Background())
	h := &heartbeat{b: b, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go h.run(ctx)
	return h
}

// kick asks for a record now. A nil heartbeat (no stream ever opened)
// ignores it.
func (h *heartbeat) kick() {
	if h == nil {
		return
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// stop ends the heartbeat and removes this broker's records (the broker
// closes). A nil heartbeat does nothing.
func (h *heartbeat) stop() {
	if h == nil {
		return
	}
	h.stopped.Do(func() {
		h.cancel()
		<-h.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.b.backend.RecordConsumers(ctx, h.b.id, nil, consumerTTL); err != nil {
			h.b.log.Warn("the broker's consumer records could not be removed; they expire by themselves", "err", err)
		}
	})
}

func (h *heartbeat) run(ctx context.Context) {
	defer close(h.done)
	recorded := false // whether the store may hold records of ours
	for {
		recs, retire := h.b.streams.records(h, recorded)
		if retire {
			return
		}
		if len(recs) > 0 || recorded {
			rctx, cancel := context.WithTimeout(ctx, consumerHeartbeat)
			err := h.b.backend.RecordConsumers(rctx, h.b.id, recs, consumerTTL)
			cancel()
			switch {
			case err == nil:
				recorded = len(recs) > 0
				if !recorded {
					continue // retire, unless a stream opened meanwhile
				}
			case errors.Is(err, model.ErrClosed):
				return // the store closed: nothing more to record
			case ctx.Err() == nil:
				h.b.log.Warn("the broker could not record its consumer streams; retrying", "err", err)
			}
		}
		t := h.b.clock.NewTimer(consumerHeartbeat)
		select {
		case <-t.C():
		case <-h.wake:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// records describes every open stream for the store. When none is open
// and h has recorded none (recorded false), h retires instead: the next
// stream starts a heartbeat again.
func (s *streams) records(h *heartbeat, recorded bool) (_ []model.ConsumerRecord, retire bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queues) == 0 && !recorded && s.beat == h {
		s.beat = nil
		return nil, true
	}
	var out []model.ConsumerRecord
	for ref, d := range s.queues {
		for _, c := range d.consumers() {
			out = append(out, model.ConsumerRecord{Ref: ref, Info: c.Info()})
		}
	}
	return out, false
}
