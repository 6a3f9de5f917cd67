package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Consumer streams (docs/streams.md). A consumer opens a stream on a queue
// (Broker.Consume) with a credit: how many unsettled messages it may hold.
// The queue's dispatcher leases messages for the stream with the most free
// credit, one backend receive at a time, and pushes them to it; the stream
// settles them (Consumer.Settle), or the plain APIs do with the same
// receipts. While the stream lives the front extends the leases it holds,
// up to its maximum hold per message; when it ends, every message it still
// holds ends its lease at once as an expired lease does (an attempt counted,
// the queue's retry policy and maxReceiveCount applied), with the reason
// ReasonConsumerDisconnected, except those its consumer never took (Next, TryNext),
// which go back without an attempt counted, as do messages leased for a
// stream that ended before they were handed to it.
//
// Every rule of the queue is the backend's receive's and the planners', as
// for the other APIs: priorities, fair groups, FIFO group order (a group
// with a message in flight is not handed out again, so a group is never
// split across streams while a message of it is held), pause, retry
// policies, at-most-once. A stream is a front object: it lives in the
// broker it was opened on, and every broker dispatches to its own streams.

// The limits and defaults of consumer streams.
const (
	// MaxCredit bounds a stream's credit.
	MaxCredit = 10000
	// DefaultMaxHold is how long the front keeps extending one message's
	// lease for a stream that does not say (Pub/Sub's maximum extension).
	DefaultMaxHold = time.Hour
	// dispatchWait is the long-poll wait of a dispatcher's receive.
	dispatchWait = model.MaxWaitTime
	// dispatchRetry is the pause after a receive that failed (the store
	// unreachable), on the clock.
	dispatchRetry = time.Second
)

// ReasonConsumerDisconnected is the failure reason of a message whose
// stream ended while it held it.
const ReasonConsumerDisconnected = "consumer disconnected"

// ConsumerConfig opens a consumer stream (Broker.Consume).
type ConsumerConfig struct {
	// Queue is the queue to consume (the caller's account's, as for
	// Receive).
	Queue string
	// Credit is how many unsettled messages the stream may hold,
	// 0..MaxCredit; 0 holds delivery until SetCredit raises it.
	Credit int
	// Lease is each delivered message's lease: 1 s..12 h, or 0 for the
	// queue's VisibilityTimeout (read when the stream opens).
	Lease time.Duration
	// MaxHold caps how long the front keeps extending one message's lease:
	// 1 s..12 h, or 0 for DefaultMaxHold.
	MaxHold time.Duration
	// ClientName names the consumer in Broker.Consumers (up to 128 bytes);
	// RemoteAddr is where it connects from.
	ClientName, RemoteAddr string
}

// ConsumerInfo describes one open stream (Broker.Consumers).
type ConsumerInfo = model.ConsumerInfo

// Consumer is one open consumer stream. Its methods are safe for
// concurrent use.
type Consumer struct {
	b       *Broker
	d       *dispatcher
	id      string
	queue   string // the name the consumer gave
	lease   time.Duration
	maxHold time.Duration
	client  string
	addr    string
	since   time.Time
	ctx     context.Context // cancelled when the stream ends
	cancel  context.CancelFunc
	done    chan struct{} // closed when Close has released everything
	ready   chan struct{} // signalled when pending gets a batch (buffered 1)

	// mu guards the fields below.
	mu         sync.Mutex
	credit     int
	held       map[model.Receipt]*heldMessage
	pending    [][]model.Delivery // leased for the stream, not yet taken by Next or TryNext
	acked      int64
	ackRate    ackRate
	lastActive time.Time
	closed     bool
}

// heldMessage is a message a stream holds: delivered, not yet settled.
type heldMessage struct {
	handle    string    // the receipt handle as delivered
	leasedAt  time.Time // when it was delivered (the hold counts from it)
	leaseEnds time.Time // the end of its current lease
}

// Consume opens a consumer stream on a queue. It fails as a receive on
// the queue fails (ErrQueueDoesNotExist, ErrAccessDenied), or with
// ErrInvalidParameterValue for a value out of range. The stream lives until
// Close (or ctx's end, or the queue's deletion, or the broker's Close).
func (b *Broker) Consume(ctx context.Context, cfg ConsumerConfig) (*Consumer, error) {
	switch {
	case cfg.Credit < 0 || cfg.Credit > MaxCredit:
		return nil, model.InvalidParameterError(cfg.Credit, "credit", "must be from 0 to 10000.")
	case cfg.Lease != 0 && (cfg.Lease < time.Second || cfg.Lease > model.MaxVisibilityTimeout):
		return nil, model.InvalidParameterError(int64(cfg.Lease/time.Second), "leaseSeconds", "must be from 1 to 43200, or 0 for the queue's VisibilityTimeout.")
	case cfg.MaxHold != 0 && (cfg.MaxHold < time.Second || cfg.MaxHold > model.MaxVisibilityTimeout):
		return nil, model.InvalidParameterError(int64(cfg.MaxHold/time.Second), "maxHoldSeconds", "must be from 1 to 43200, or 0 for one hour.")
	case len(cfg.ClientName) > 128 || !model.ValidBodyChars(cfg.ClientName):
		return nil, model.InvalidParameterError(cfg.ClientName, "clientName", "must be at most 128 bytes of text.")
	}
	ref, err := b.resolve(ctx, model.ActionReceiveMessage, cfg.Queue)
	if err != nil {
		return nil, err
	}
	q, err := b.backend.GetQueue(ctx, ref)
	if err != nil {
		return nil, err
	}
	if cfg.Lease == 0 {
		cfg.Lease = max(q.Config.VisibilityTimeout, time.Second)
	}
	if cfg.MaxHold == 0 {
		cfg.MaxHold = DefaultMaxHold
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	now := b.clock.Now()
	c := &Consumer{
		b: b, id: hex.EncodeToString(idb[:]), queue: cfg.Queue, lease: cfg.Lease, maxHold: cfg.MaxHold,
		client: cfg.ClientName, addr: cfg.RemoteAddr, since: now, lastActive: now,
		done: make(chan struct{}), ready: make(chan struct{}, 1),
		credit: cfg.Credit, held: map[model.Receipt]*heldMessage{},
	}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := b.streams.add(c, ref); err != nil {
		c.cancel()
		return nil, err
	}
	// The lease keeper's timer is armed before Consume returns: a fake
	// clock advanced at once then fires it.
	go c.keepLeases(c.b.clock.NewTimer(c.leaseEvery()))
	go func() {
		select {
		case <-ctx.Done():
			c.Close()
		case <-c.ctx.Done():
		}
	}()
	return c, nil
}

// ID names the stream in the consumer list.
func (c *Consumer) ID() string { return c.id }

// Lease and MaxHold are the values in force.
func (c *Consumer) Lease() time.Duration   { return c.lease }
func (c *Consumer) MaxHold() time.Duration { return c.maxHold }

// Next returns the next batch the dispatcher leased for the stream, waiting
// for one until ctx ends (ctx's error) or the stream ends
// (ErrStreamClosed). A consumer that stops calling Next stops getting more
// once its credit is used: the front never keeps more than the stream's
// credit of messages for it.
func (c *Consumer) Next(ctx context.Context) ([]model.Delivery, error) {
	for {
		c.mu.Lock()
		if len(c.pending) > 0 {
			ds := c.pending[0]
			c.pending[0] = nil
			c.pending = c.pending[1:]
			c.mu.Unlock()
			return ds, nil
		}
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil, ErrStreamClosed
		}
		select {
		case <-c.ready:
		case <-c.ctx.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Wait returns once the stream has a batch for Next or TryNext (nil), has
// ended (ErrStreamClosed), or ctx ends (ctx's error). It takes nothing.
func (c *Consumer) Wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, closed := len(c.pending), c.closed
		c.mu.Unlock()
		switch {
		case n > 0:
			return nil
		case closed:
			return ErrStreamClosed
		}
		select {
		case <-c.ready:
		case <-c.ctx.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TryNext returns the stream's next batch, or nil when none waits.
func (c *Consumer) TryNext() []model.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return nil
	}
	ds := c.pending[0]
	c.pending[0] = nil
	c.pending = c.pending[1:]
	return ds
}

// ErrStreamClosed is Next's error once the stream has ended.
var ErrStreamClosed = errors.New("broker: the stream has ended")

// Done is closed when the stream has ended and released what it held.
func (c *Consumer) Done() <-chan struct{} { return c.done }

// SetCredit changes the stream's credit (0..MaxCredit). Lowering it below
// what the stream holds delivers nothing more until settlements free
// credit; nothing delivered is taken back.
func (c *Consumer) SetCredit(n int) error {
	if n < 0 || n > MaxCredit {
		return model.InvalidParameterError(n, "credit", "must be from 0 to 10000.")
	}
	c.mu.Lock()
	c.credit = n
	c.mu.Unlock()
	c.d.kick()
	return nil
}

// Handed returns once a claim being handed out to the streams of c's
// queue (when one is) has reached them: what it delivers to c is then in
// its pending batches (Next, TryNext). A claim whose receive had not
// returned when c's credit changed hands c nothing past the new credit,
// except what cannot go back to the queue (an at-most-once queue's
// messages, or a release the store refused). It may wait for the store
// (the releases of that hand-out); never call it from a backend's hook.
func (c *Consumer) Handed() {
	c.d.sharing.Lock()
	//lint:ignore SA2001 an empty critical section: a barrier behind share
	c.d.sharing.Unlock()
}

func (c *Consumer) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// free is the stream's free credit (credit - held), 0 once closed.
func (c *Consumer) free() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0
	}
	return max(c.credit-len(c.held), 0)
}

// Settlement is one settlement of a stream: Ack deletes the message; any
// other Kind changes its lease as Broker.ChangeLeases does (Nack, Snooze
// with Timeout 0 as a release, ChangeTimeout as an extend, DeadLetterNow).
type Settlement struct {
	Receipt string
	Ack     bool
	// Result is an ack's result (nil: none; model.DeleteEntry.Result).
	Result *string
	model.LeaseEntry
}

// errNotHeld is a settlement's answer for a receipt the stream does not
// hold.
func errNotHeld(handle string) error {
	return model.Errorf(model.ErrInvalidParameterValue,
		"The receipt %s is not held by this stream: it was delivered to another stream, or settled, or its lease ended.", handle)
}

// Settle applies a batch of settlements of messages the stream holds, and
// answers one error (or nil) per settlement once every change is durable.
// A receipt the stream does not hold fails its entry (another stream's, one
// settled already, one whose lease ended after the maximum hold). An
// extend keeps the message held; every other settlement that was applied,
// or that found the lease over, frees its credit.
func (c *Consumer) Settle(ctx context.Context, ss []Settlement) ([]error, error) {
	errs := make([]error, len(ss))
	var acks []model.DeleteEntry
	var ackAt []int
	var changes []model.LeaseEntry
	var changeAt []int
	c.mu.Lock()
	for i, s := range ss {
		r, err := c.b.receipts.Decode(s.Receipt)
		if err != nil {
			errs[i] = err
			continue
		}
		if _, ok := c.held[r]; !ok {
			errs[i] = errNotHeld(s.Receipt)
			continue
		}
		if s.Ack {
			acks = append(acks, model.DeleteEntry{ID: entryID(len(acks)), Receipt: s.Receipt, Result: s.Result})
			ackAt = append(ackAt, i)
		} else {
			le := s.LeaseEntry
			le.ID, le.Receipt = entryID(len(changes)), s.Receipt
			changes = append(changes, le)
			changeAt = append(changeAt, i)
		}
	}
	c.lastActive = c.b.clock.Now()
	c.mu.Unlock()
	for len(acks) > 0 {
		n := min(len(acks), model.MaxBatchEntries)
		res, err := c.b.Delete(ctx, c.queue, acks[:n])
		if err != nil {
			return nil, err
		}
		for j, e := range res {
			errs[ackAt[j]] = e
		}
		acks, ackAt = acks[n:], ackAt[n:]
	}
	for len(changes) > 0 {
		n := min(len(changes), model.MaxBatchEntries)
		res, err := c.b.ChangeLeases(ctx, c.queue, changes[:n])
		if err != nil {
			return nil, err
		}
		for j, e := range res {
			errs[changeAt[j]] = e
		}
		changes, changeAt = changes[n:], changeAt[n:]
	}
	return errs, nil
}

// entryID is the batch entry id of the i-th entry of a batch the stream
// makes (any i: a Settle may carry thousands).
func entryID(i int) string { return "s" + strconv.Itoa(i) }

// Close ends the stream: nothing more is delivered, and every message it
// holds ends its lease at once as an expired lease does, with the reason
// ReasonConsumerDisconnected (one its consumer never took goes back
// without an attempt counted). It returns once that is durable (or the store
// refused it: the leases then end by themselves). Idempotent.
func (c *Consumer) Close() { c.end(true) }

// Detach ends the stream without ending the leases of the messages it
// holds: each lease runs to its end, and until then the consumer can still
// settle the message through the other APIs with its receipt. The server
// detaches its streams when it shuts down, so that work in progress is not
// delivered again only because the broker restarted. Idempotent; after a
// Close it does nothing.
func (c *Consumer) Detach() { c.end(false) }

func (c *Consumer) end(release bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.done
		return
	}
	c.closed = true
	held, pending := c.held, c.pending
	c.held, c.pending = map[model.Receipt]*heldMessage{}, nil
	c.mu.Unlock()
	c.cancel()
	c.b.streams.remove(c)
	if release {
		// What the stream was handed but its consumer never took (Next, TryNext)
		// never reached a worker: it goes back without an attempt counted.
		// The rest failed as held work does.
		var untaken []model.Receipt
		for _, ds := range pending {
			for _, d := range ds {
				if r, err := c.b.receipts.Decode(d.Receipt); err == nil {
					if _, ok := held[r]; ok {
						delete(held, r)
						untaken = append(untaken, r)
					}
				}
			}
		}
		c.d.putBack(untaken, c.id)
		c.release(held, ReasonConsumerDisconnected)
	}
	close(c.done)
}

// release ends the leases of held messages at once, as failures with
// reason (chunks of 100: one store write each). Errors are logged: the
// leases end by themselves anyway.
func (c *Consumer) release(held map[model.Receipt]*heldMessage, reason string) {
	c.d.release(held, reason, c.id)
}

// putBack makes messages leased for the stream named stream, which never
// reached a consumer, visible again at once without an attempt counted (a
// release), in chunks of 100. Errors are logged: the leases end by
// themselves anyway (then as failures).
func (d *dispatcher) putBack(rs []model.Receipt, stream string) {
	changes := make([]model.VisibilityChange, 0, len(rs))
	for _, r := range rs {
		changes = append(changes, model.VisibilityChange{Receipt: r, Kind: model.Snooze})
	}
	d.change(changes, "messages leased for a stream that ended could not be put back; their leases end by themselves", stream)
}

// release ends the leases of held as failures with reason (each counts as
// an attempt), for the stream named stream.
func (d *dispatcher) release(held map[model.Receipt]*heldMessage, reason, stream string) {
	changes := make([]model.VisibilityChange, 0, len(held))
	for r := range held {
		changes = append(changes, model.VisibilityChange{Receipt: r, Kind: model.Nack, Reason: reason})
	}
	d.change(changes, "a closed stream's messages could not be released; their leases end by themselves", stream)
}

// change applies changes for the stream named stream in chunks of 100 (one
// store write each), within 30 s; at the first failure it logs failed and
// stops.
func (d *dispatcher) change(changes []model.VisibilityChange, failed, stream string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(changes) > 0 {
		n := min(len(changes), 100)
		if _, err := d.b.backend.ChangeVisibility(ctx, d.ref, changes[:n]); err != nil {
			d.b.log.Warn(failed, "queue", d.ref.String(), "stream", stream, "messages", len(changes), "err", err)
			return
		}
		changes = changes[n:]
	}
}

// deliver hands a leased batch to the stream, which holds each message
// from now. It reports false when the stream has closed (the caller then
// releases the batch).
func (c *Consumer) deliver(ds []model.Delivery) bool {
	now := c.b.clock.Now()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	for _, d := range ds {
		r, err := c.b.receipts.Decode(d.Receipt)
		if err != nil {
			continue // cannot happen: the backend made it
		}
		c.held[r] = &heldMessage{handle: d.Receipt, leasedAt: now, leaseEnds: now.Add(c.lease)}
	}
	c.lastActive = now
	c.pending = append(c.pending, ds)
	c.mu.Unlock()
	c.b.streams.hold(c, ds)
	select {
	case c.ready <- struct{}{}:
	default:
	}
	return true
}

// settled drops what a settlement (on the stream or through another API)
// ended: the messages are no longer held, and their credit is free.
func (c *Consumer) settled(rs []model.Receipt, acked int) {
	c.mu.Lock()
	for _, r := range rs {
		delete(c.held, r)
	}
	c.acked += int64(acked)
	c.ackRate.add(c.b.clock.Now(), acked)
	c.mu.Unlock()
	c.d.kick()
}

// ackRateWindow is the window of ConsumerInfo.AckedPerSecond.
const ackRateWindow = 10

// ackRate counts acks in one-second buckets over the last ackRateWindow
// seconds.
type ackRate struct {
	buckets [ackRateWindow]int64
	sec     int64 // the Unix second of the newest bucket
}

// roll moves the window to now's second, emptying the buckets it passes.
func (r *ackRate) roll(now time.Time) {
	sec := now.Unix()
	if sec <= r.sec {
		return
	}
	for s := max(r.sec+1, sec-ackRateWindow+1); s <= sec; s++ {
		r.buckets[s%ackRateWindow] = 0
	}
	r.sec = sec
}

func (r *ackRate) add(now time.Time, n int) {
	r.roll(now)
	r.buckets[now.Unix()%ackRateWindow] += int64(n)
}

// perSecond is the rate over the window, or over the time since since when
// that is shorter (at least a second).
func (r *ackRate) perSecond(now, since time.Time) float64 {
	r.roll(now)
	var sum int64
	for _, n := range r.buckets {
		sum += n
	}
	span := min(now.Sub(since).Seconds(), ackRateWindow)
	return float64(sum) / max(span, 1)
}

// extended records that a held message's lease now ends at until (an
// extend by the consumer): the stream extends it again only when less than
// two thirds of its lease is left.
func (c *Consumer) extended(r model.Receipt, until time.Time) {
	c.mu.Lock()
	if h := c.held[r]; h != nil {
		h.leaseEnds = until
	}
	c.mu.Unlock()
}

// keepLeases extends, every third of the lease, the leases of the messages
// the stream holds that have less than two thirds of the lease left, each
// until it has been held MaxHold; a message past it
// is left to its lease's end, and dropped from the stream then (its credit
// is free; it is delivered again, to any stream).
func (c *Consumer) keepLeases(t model.Timer) {
	every := c.leaseEvery()
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C():
		}
		now := c.b.clock.Now()
		var extend []model.VisibilityChange
		var ended []model.Receipt
		c.mu.Lock()
		for r, h := range c.held {
			switch {
			case h.leaseEnds.Sub(now) > c.lease-every:
				// Fresh enough (just delivered, or extended by the
				// consumer past the stream's lease).
			case now.Sub(h.leasedAt) < c.maxHold:
				// The new lease ends no later than the hold does.
				d := min(c.lease, h.leasedAt.Add(c.maxHold).Sub(now))
				h.leaseEnds = now.Add(d)
				extend = append(extend, model.VisibilityChange{Receipt: r, Timeout: d})
			case !now.Before(h.leaseEnds):
				ended = append(ended, r)
			}
		}
		c.mu.Unlock()
		if len(ended) > 0 {
			c.b.streams.drop(c, ended)
		}
		for len(extend) > 0 {
			n := min(len(extend), 100)
			outcomes, err := c.b.backend.ChangeVisibility(c.ctx, c.d.ref, extend[:n])
			if errors.Is(err, model.ErrQueueDoesNotExist) {
				// The queue was deleted (through another broker): the
				// stream ends.
				go c.Detach()
				break
			}
			if err != nil {
				if c.ctx.Err() == nil {
					c.b.log.Warn("a stream's leases could not be extended", "queue", c.d.ref.String(), "stream", c.id, "err", err)
				}
				break
			}
			// A lease that is not the latest any more (settled through
			// another API meanwhile, or ended) is not the stream's.
			var gone []model.Receipt
			for j, o := range outcomes {
				if o != model.LeaseApplied {
					gone = append(gone, extend[j].Receipt)
				}
			}
			if len(gone) > 0 {
				c.b.streams.drop(c, gone)
			}
			extend = extend[n:]
		}
		t.Reset(every)
	}
}

// leaseEvery is how often the stream's leases are looked at: a third of the
// lease (at least 100 ms).
func (c *Consumer) leaseEvery() time.Duration { return max(c.lease/3, 100*time.Millisecond) }

// Info describes the stream.
func (c *Consumer) Info() ConsumerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ConsumerInfo{ID: c.id, Broker: c.b.id, Queue: c.queue, ClientName: c.client, RemoteAddr: c.addr, Credit: c.credit,
		Held: len(c.held), Acked: c.acked, AckedPerSecond: c.ackRate.perSecond(c.b.clock.Now(), c.since), Lease: c.lease, MaxHold: c.maxHold, ConnectedAt: c.since, LastActive: c.lastActive}
}

// Consumers lists the streams open on a queue of the caller's account, in
// the order they opened: this broker's, and on a store several brokers
// share (PostgreSQL) the others' as of their latest heartbeat.
func (b *Broker) Consumers(ctx context.Context, queue string) ([]ConsumerInfo, error) {
	ref, err := b.resolve(ctx, model.ActionGetQueueAttributes, queue)
	if err != nil {
		return nil, err
	}
	if _, err := b.backend.GetQueue(ctx, ref); err != nil {
		return nil, err
	}
	var out []ConsumerInfo
	for _, c := range b.streams.of(ref) {
		out = append(out, c.Info())
	}
	// Other brokers' streams, as they recorded them in a shared store.
	others, err := b.backend.ListConsumers(ctx, ref)
	if err != nil {
		return nil, err
	}
	for _, info := range others {
		if info.Broker != b.id {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConnectedAt.Before(out[j].ConnectedAt) })
	return out, nil
}

// OpenStreams counts the streams open on this broker, by queue (for
// /metrics: queues without one are absent).
func (b *Broker) OpenStreams() map[model.QueueRef]int {
	b.streams.mu.Lock()
	defer b.streams.mu.Unlock()
	out := make(map[model.QueueRef]int, len(b.streams.queues))
	for ref, d := range b.streams.queues {
		if n := len(d.consumers()); n > 0 {
			out[ref] = n
		}
	}
	return out
}

// streams is the front's registry of open streams: the dispatcher of each
// queue that has some, and which stream holds each receipt (so that a
// settlement through another API frees the stream's credit).
type streams struct {
	mu     sync.Mutex
	queues map[model.QueueRef]*dispatcher
	holder map[model.Receipt]*Consumer
	closed bool
	beat   *heartbeat // started with the first stream
}

// add registers c on queue ref, starting its dispatcher if it has none.
func (s *streams) add(c *Consumer, ref model.QueueRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return model.ClosedError()
	}
	if s.queues == nil {
		s.queues, s.holder = map[model.QueueRef]*dispatcher{}, map[model.Receipt]*Consumer{}
	}
	if s.beat == nil {
		s.beat = startHeartbeat(c.b)
	}
	defer s.beat.kick()
	d := s.queues[ref]
	if d == nil {
		d = newDispatcher(c.b, ref)
		s.queues[ref] = d
	}
	c.d = d
	d.add(c)
	return nil
}

// remove unregisters c and drops the receipts it held; the last stream of
// a queue stops its dispatcher.
func (s *streams) remove(c *Consumer) {
	s.mu.Lock()
	for r, h := range s.holder {
		if h == c {
			delete(s.holder, r)
		}
	}
	d := c.d
	last := d.remove(c)
	if last && s.queues[d.ref] == d {
		delete(s.queues, d.ref)
	}
	beat := s.beat
	s.mu.Unlock()
	if last {
		d.stop()
	}
	beat.kick()
}

// hold records that c holds the deliveries ds, unless c has ended
// meanwhile (its end, which marks it closed before it takes s.mu to drop
// its entries, released them).
func (s *streams) hold(c *Consumer, ds []model.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.isClosed() {
		return
	}
	for _, d := range ds {
		if r, err := c.b.receipts.Decode(d.Receipt); err == nil {
			s.holder[r] = c
		}
	}
}

// drop ends c's hold on rs (settled, or its lease ended).
func (s *streams) drop(c *Consumer, rs []model.Receipt) {
	s.mu.Lock()
	for _, r := range rs {
		if s.holder[r] == c {
			delete(s.holder, r)
		}
	}
	s.mu.Unlock()
	c.settled(rs, 0)
}

// settledElsewhere is told of the receipts a call settled (deleted when
// deleted, else changed): the streams that held them stop holding them.
func (s *streams) settledElsewhere(rs []model.Receipt, deleted bool) {
	if len(rs) == 0 {
		return
	}
	by := map[*Consumer][]model.Receipt{}
	s.mu.Lock()
	for _, r := range rs {
		if c := s.holder[r]; c != nil {
			delete(s.holder, r)
			by[c] = append(by[c], r)
		}
	}
	s.mu.Unlock()
	for c, rs := range by {
		acked := 0
		if deleted {
			acked = len(rs)
		}
		c.settled(rs, acked)
	}
}

// changed is told of a visibility change's outcomes (ChangeVisibility,
// ChangeLeases, a stream's settlement): an extend that was applied keeps
// the message held with its new lease end; any other change that was
// applied, or that found the lease over, ends the stream's hold.
func (s *streams) changed(changes []model.VisibilityChange, outcomes []model.LeaseOutcome, now time.Time) {
	var ended []model.Receipt
	for j, o := range outcomes {
		ch := changes[j]
		switch {
		case o == model.LeaseOtherQueue:
		case o == model.LeaseApplied && ch.Kind == model.ChangeTimeout && ch.Timeout > 0:
			s.mu.Lock()
			c := s.holder[ch.Receipt]
			s.mu.Unlock()
			if c != nil {
				c.extended(ch.Receipt, now.Add(ch.Timeout))
			}
		default:
			ended = append(ended, ch.Receipt)
		}
	}
	s.settledElsewhere(ended, false)
}

// forget unregisters d from its queue: the next stream opened on the
// queue starts another dispatcher. d's streams still stop it when the last
// of them ends.
func (s *streams) forget(d *dispatcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues[d.ref] == d {
		delete(s.queues, d.ref)
	}
}

// endQueue ends the streams of a deleted queue (Detach: nothing is left to
// hand back) and waits for them.
func (s *streams) endQueue(ref model.QueueRef) {
	s.mu.Lock()
	d := s.queues[ref]
	s.mu.Unlock()
	if d == nil {
		return
	}
	s.forget(d)
	var wg sync.WaitGroup
	for _, c := range d.consumers() {
		wg.Go(c.Detach)
	}
	wg.Wait()
}

// of returns the streams open on ref.
func (s *streams) of(ref model.QueueRef) []*Consumer {
	s.mu.Lock()
	d := s.queues[ref]
	s.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.consumers()
}

// closeAll detaches every stream (the broker closes: the leases run to
// their ends, as after a crash) and refuses new ones.
func (s *streams) closeAll() {
	s.mu.Lock()
	s.closed = true
	var all []*Consumer
	for _, d := range s.queues {
		all = append(all, d.consumers()...)
	}
	beat := s.beat
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(c.Detach)
	}
	wg.Wait()
	beat.stop()
}

// dispatcher leases the messages of one queue for its streams, one backend
// receive at a time. One receive (a claim) serves every stream that has
// free credit and the lease of the stream with the most free credit: it asks
// for their free credit added up (at most MaxDispatchMessages), and what it
// gets goes message by message to the stream with the most credit left, so
// that a slow consumer is not handed what a fast one could take now. On a
// FIFO queue a claim serves that one stream, so that no message group is
// split across streams. A receive long polls, so a send (or a lease's end,
// a delay's end) wakes it at once.
type dispatcher struct {
	b      *Broker
	ref    model.QueueRef
	fifo   bool
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	subs []*Consumer // open streams, in the order they opened
	next int         // the tie-break: the stream after the last one served

	// sharing is held while a claim's messages are handed to the streams
	// (share): Consumer.Handed waits for a handing under way.
	sharing sync.Mutex
}

func newDispatcher(b *Broker, ref model.QueueRef) *dispatcher {
	ctx, cancel := context.WithCancel(context.Background())
	d := &dispatcher{b: b, ref: ref, fifo: strings.HasSuffix(ref.Name, ".fifo"), wake: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{})}
	go d.run(ctx)
	return d
}

func (d *dispatcher) add(c *Consumer) {
	d.mu.Lock()
	d.subs = append(d.subs, c)
	d.mu.Unlock()
	d.kick()
}

// remove unregisters c and reports whether no stream is left.
func (d *dispatcher) remove(c *Consumer) bool {
	d.mu.Lock()
	for i, s := range d.subs {
		if s == c {
			d.subs = append(d.subs[:i], d.subs[i+1:]...)
			break
		}
	}
	last := len(d.subs) == 0
	d.mu.Unlock()
	d.kick() // a receive for it alone ends
	return last
}

func (d *dispatcher) consumers() []*Consumer {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*Consumer(nil), d.subs...)
}

// kick makes the dispatcher look at the credits again.
func (d *dispatcher) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// stop ends the dispatcher and waits for it.
func (d *dispatcher) stop() {
	d.cancel()
	<-d.done
}

// claim is what one receive serves: the lease it takes, the streams it is
// for (the best first) and how many messages it asks for.
type claim struct {
	lease time.Duration
	subs  []*Consumer
	want  int
}

// plan returns the next claim: the stream with the most free credit (ties:
// the first one after the stream served last) and, but on a FIFO queue,
// every other stream with free credit and the same lease. want is 0 when no
// stream has free credit. With serve it records the best stream as the one
// served last.
func (d *dispatcher) plan(serve bool) claim {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.subs)
	free := make([]int, n)
	best, bestFree := -1, 0
	for k := range n {
		i := (d.next + k) % n
		if free[i] = d.subs[i].free(); free[i] > bestFree {
			best, bestFree = i, free[i]
		}
	}
	if best < 0 {
		return claim{}
	}
	if serve {
		d.next = best + 1
	}
	c := claim{lease: d.subs[best].lease, subs: []*Consumer{d.subs[best]}, want: bestFree}
	if !d.fifo {
		for k := range n {
			i := (best + k) % n
			if i != best && free[i] > 0 && d.subs[i].lease == c.lease {
				c.subs = append(c.subs, d.subs[i])
				c.want += free[i]
			}
		}
	}
	c.want = min(c.want, model.MaxDispatchMessages)
	return c
}

// watch cancels the receive that serves cur when, after a kick, the claim
// it would make now serves none of cur's streams (they ended, or a stream
// with another lease has more free credit than cur's best), or cur's
// streams have less free credit than it asks for (a credit lowered, a
// stream ended: the claim would lease more than they may hold), or asks
// for at least twice as many messages or a full claim (credit freed, a
// stream opened; not for every settlement, which would restart a long
// poll on PostgreSQL each time while consumers keep up): a long poll
// cancelled while it waits claims nothing, and the next claim is made at
// once. It returns when done is closed.
func (d *dispatcher) watch(cur claim, cancel context.CancelFunc, done <-chan struct{}) {
	for {
		select {
		case <-d.wake:
			now := d.plan(false)
			open, free := false, 0
			for _, c := range cur.subs {
				open = open || !c.isClosed()
				free += c.free()
			}
			grew := now.want >= 2*cur.want || (now.want > cur.want && now.want == model.MaxDispatchMessages)
			shrank := min(free, model.MaxDispatchMessages) < cur.want
			if !open || grew || shrank ||
				(now.want > 0 && now.lease != cur.lease && now.subs[0].free() > cur.subs[0].free()) {
				cancel()
				d.kick() // the loop plans again at once
				return
			}
		case <-done:
			return
		}
	}
}

// share hands the messages one claim leased to the streams: on a FIFO
// queue all to the stream it was for, else each to the stream (of the
// claim's lease, open now: one may have opened, or ended, during the
// receive) with the most credit left, ties to the first after the stream
// served last. Messages no open stream has credit for (a credit was
// lowered, or a stream ended, during the receive) go back to the queue
// without an attempt counted (a release), so that no stream holds more
// than its credit; those that cannot go back (an at-most-once queue's,
// gone once received) go to the stream with the most credit left. When
// no stream of the lease is open they go back to the queue without an
// attempt counted too: no consumer saw them.
func (d *dispatcher) share(cur claim, ds []model.Delivery) {
	if ds = d.releaseExcess(cur, ds); len(ds) == 0 {
		return
	}
	var subs []*Consumer
	if d.fifo {
		subs = cur.subs
	} else {
		d.mu.Lock()
		for k := range len(d.subs) {
			if c := d.subs[(d.next+k)%len(d.subs)]; c.lease == cur.lease {
				subs = append(subs, c)
			}
		}
		d.mu.Unlock()
	}
	left := make([]int, len(subs))
	for i, c := range subs {
		left[i] = c.free()
	}
	parts := make([][]model.Delivery, len(subs))
	for _, m := range ds {
		best := 0
		for i := range left {
			if left[i] > left[best] {
				best = i
			}
		}
		if len(subs) == 0 {
			break
		}
		parts[best] = append(parts[best], m)
		left[best]--
	}
	if len(subs) == 0 {
		parts, subs = [][]model.Delivery{ds}, []*Consumer{nil}
	}
	for i, part := range parts {
		if len(part) == 0 || (subs[i] != nil && subs[i].deliver(part)) {
			continue
		}
		// The stream ended while its messages were leased: no consumer
		// saw them, and they go back without an attempt counted.
		var rs []model.Receipt
		for _, m := range part {
			if r, err := d.b.receipts.Decode(m.Receipt); err == nil {
				rs = append(rs, r)
			}
		}
		stream := ""
		if subs[i] != nil {
			stream = subs[i].id
		}
		d.putBack(rs, stream)
	}
}

// releaseExcess releases the messages of ds past the free credit of the
// open streams share would hand them to (the last ones: a FIFO group's
// order is kept), and returns the others with those whose release was not
// applied. With no such stream open it returns ds.
func (d *dispatcher) releaseExcess(cur claim, ds []model.Delivery) []model.Delivery {
	subs := cur.subs
	if !d.fifo {
		subs = nil
		d.mu.Lock()
		for _, c := range d.subs {
			if c.lease == cur.lease {
				subs = append(subs, c)
			}
		}
		d.mu.Unlock()
	}
	free, open := 0, false
	for _, c := range subs {
		free += c.free()
		open = open || !c.isClosed()
	}
	if !open || free >= len(ds) {
		return ds
	}
	excess := ds[free:]
	out := ds[:free:free]
	changes := make([]model.VisibilityChange, 0, len(excess))
	var at []int // the index in excess of each change
	for i, m := range excess {
		r, err := d.b.receipts.Decode(m.Receipt)
		if err != nil {
			out = append(out, m) // cannot happen: the backend made it
			continue
		}
		changes = append(changes, model.VisibilityChange{Receipt: r, Kind: model.Snooze})
		at = append(at, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outcomes, err := d.b.backend.ChangeVisibility(ctx, d.ref, changes)
	if err != nil {
		d.b.log.Warn("messages leased past the streams' credit could not be released; they are delivered",
			"queue", d.ref.String(), "messages", len(changes), "err", err)
		return ds
	}
	for j, o := range outcomes {
		if o != model.LeaseApplied {
			out = append(out, excess[at[j]])
		}
	}
	return out
}

func (d *dispatcher) run(ctx context.Context) {
	defer close(d.done)
	for ctx.Err() == nil {
		cur := d.plan(true)
		if cur.want == 0 {
			select {
			case <-d.wake:
			case <-ctx.Done():
			}
			continue
		}
		// The receive ends when the streams it serves end, or the queue's
		// last stream does, or the claim to make changed (watch).
		rctx, cancel := context.WithCancel(ctx)
		watching := make(chan struct{})
		go d.watch(cur, cancel, watching)
		lease, wait := cur.lease, dispatchWait
		ds, err := d.b.backend.Receive(rctx, model.ReceiveRequest{Queue: d.ref.Name, Account: d.ref.Account,
			MaxMessages: cur.want, Dispatch: true, Visibility: &lease, WaitTime: &wait,
			InFlightCap: int64(d.b.cfg.MaxInFlight)})
		close(watching)
		cancel()
		d.b.count(d.ref.String(), model.CountReceived, len(ds))
		if len(ds) > 0 {
			d.sharing.Lock()
			d.share(cur, ds)
			d.sharing.Unlock()
		}
		switch {
		case err == nil, ctx.Err() != nil, errors.Is(err, context.Canceled):
		case errors.Is(err, model.ErrOverLimit):
			// The queue is at its in-flight cap: wait for a settlement (or
			// a second) before asking again.
			t := d.b.clock.NewTimer(dispatchRetry)
			select {
			case <-t.C():
			case <-d.wake:
			case <-ctx.Done():
			}
			t.Stop()
		case errors.Is(err, model.ErrQueueDoesNotExist), errors.Is(err, model.ErrClosed):
			// The queue is gone, or the store closes: the streams end,
			// with nothing to hand back. A stream opened from now on (on a
			// queue made again with the name) gets a dispatcher of its own.
			d.b.streams.forget(d)
			for _, s := range d.consumers() {
				go s.Detach()
			}
			<-ctx.Done()
		default:
			d.b.log.Warn("a stream dispatcher's receive failed; retrying", "queue", d.ref.String(), "err", err)
			t := d.b.clock.NewTimer(dispatchRetry)
			select {
			case <-t.C():
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
}
