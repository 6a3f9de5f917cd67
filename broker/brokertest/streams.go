package brokertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// Consumer streams (broker.Broker.Consume): the front's dispatcher leases
// messages for the stream with the most free credit and pushes them; the
// stream settles them; its leases are kept while it lives, up to its
// maximum hold; its end releases what it holds as an expired lease (an
// attempt counted), except what its consumer never took, which goes back
// without one. Every queue rule applies as for a receive: priorities,
// FIFO groups, pause, at-most-once.
var streamTests = []testCase{
	{"CreditRespected", testStreamCredit},
	{"PushedOnSend", testStreamPushOnSend},
	{"SettlementBatch", testStreamSettleBatch},
	{"SettlementBatchOverAHundred", testStreamSettleMany},
	{"LeasesKeptUpToMaxHold", testStreamMaxHold},
	{"DisconnectCountsAnAttempt", testStreamDisconnect},
	{"MostFreeCreditFirst", testStreamFairDispatch},
	{"FifoGroupNeverSplitWhileHeld", testStreamFifoGroups},
	{"Priorities", testStreamPriorities},
	{"Pause", testStreamPause},
	{"AtMostOnce", testStreamAtMostOnce},
	{"SettledThroughAnotherAPI", testStreamSettledElsewhere},
	{"ReceiptsOfOtherStreamsRefused", testStreamForeignReceipts},
	{"Refusals", testStreamRefusals},
	{"OneClaimServesManyStreams", testStreamOneClaim},
	{"CreditLoweredWhileAClaimWaits", testStreamCreditLoweredWaiting},
	{"EndWithTheirQueue", testStreamQueueDeleted},
	{"CreditLoweredAsAClaimReturns", testStreamCreditLoweredClaimed},
	{"ClosedBeforeTakingCountsNoAttempt", testStreamClosedUntaken},
	{"ClosedAsAClaimReturnsCountsNoAttempt", testStreamClosedDuringClaim},
	{"HandedWaitsForAHandOut", testStreamHandedWaitsForAHandOut},
}

// consume opens a stream on queue and closes it when the test ends.
func (e *env) consume(cfg broker.ConsumerConfig) *broker.Consumer {
	e.t.Helper()
	c, err := e.b.Consume(e.ctx, cfg)
	if err != nil {
		e.t.Fatalf("Consume(%+v): %v", cfg, err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// next waits (real time) for the stream's next batch.
func (e *env) next(c *broker.Consumer) []model.Delivery {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	ds, err := c.Next(ctx)
	if err != nil {
		e.t.Fatalf("stream %s: no delivery: %v", c.ID(), err)
	}
	return ds
}

// nextN collects the stream's deliveries until it has n messages.
func (e *env) nextN(c *broker.Consumer, n int) []model.Delivery {
	e.t.Helper()
	var out []model.Delivery
	for len(out) < n {
		out = append(out, e.next(c)...)
	}
	if len(out) != n {
		e.t.Fatalf("stream %s: %d messages delivered, want %d", c.ID(), len(out), n)
	}
	return out
}

// nothingFor checks that the stream gets no delivery for a short real time.
func (e *env) nothingFor(c *broker.Consumer, what string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	if ds, err := c.Next(ctx); err == nil {
		e.t.Fatalf("%s: stream %s got %d messages (%s…)", what, c.ID(), len(ds), ds[0].Body)
	}
}

// settle applies settlements and fails the test on any error.
func (e *env) settle(c *broker.Consumer, ss ...broker.Settlement) {
	e.t.Helper()
	errs, err := c.Settle(e.ctx, ss)
	if err != nil {
		e.t.Fatalf("Settle: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			e.t.Fatalf("settlement %d (%+v): %v", i, ss[i], err)
		}
	}
}

func ack(d model.Delivery) broker.Settlement { return broker.Settlement{Receipt: d.Receipt, Ack: true} }

// heldBy waits until the consumer list says the stream holds n messages.
func (e *env) heldBy(queue string, c *broker.Consumer, n int) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("stream %s to hold %d", c.ID(), n), func() bool { return c.Info().Held == n })
}

func testStreamCredit(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for i := range 10 {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 3})
	ds := e.nextN(c, 3)
	e.nothingFor(c, "a stream holding its credit")
	e.eventuallyStats("q", 7, 3, 0)
	e.settle(c, ack(ds[0]))
	more := e.nextN(c, 1)
	e.nothingFor(c, "a stream holding its credit again")
	if err := c.SetCredit(5); err != nil {
		t.Fatal(err)
	}
	e.nextN(c, 2)
	e.eventuallyStats("q", 4, 5, 0)
	if err := c.SetCredit(0); err != nil {
		t.Fatal(err)
	}
	e.settle(c, ack(ds[1]), ack(ds[2]), ack(more[0]))
	e.nothingFor(c, "a stream of credit 0")
	if info := c.Info(); info.Credit != 0 || info.Held != 2 || info.Acked != 4 {
		t.Fatalf("stream info = %+v, want credit 0, 2 held, 4 acked", info)
	}
}

func testStreamPushOnSend(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 10})
	e.nothingFor(c, "an empty queue")
	e.sendBody("q", "hello")
	// No clock advance: the send itself wakes the dispatcher's long poll.
	if ds := e.next(c); len(ds) != 1 || ds[0].Body != "hello" || ds[0].ReceiveCount != 1 {
		t.Fatalf("pushed %v", ds)
	}
}

func testStreamSettleBatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "30"})
	for i := range 5 {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 5})
	ds := e.nextN(c, 5)
	errs, err := c.Settle(e.ctx, []broker.Settlement{
		ack(ds[0]),
		{Receipt: ds[1].Receipt, LeaseEntry: model.LeaseEntry{Kind: model.Nack, Reason: "bad input"}},
		{Receipt: ds[2].Receipt, LeaseEntry: model.LeaseEntry{Kind: model.ChangeTimeout, Timeout: time.Hour}},
		{Receipt: ds[3].Receipt, LeaseEntry: model.LeaseEntry{Kind: model.Snooze}},
		{Receipt: "not a receipt", Ack: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs[:4] {
		if err != nil {
			t.Fatalf("settlement %d: %v", i, err)
		}
	}
	wantErr(t, "a malformed receipt", errs[4], model.ErrReceiptHandleInvalid)
	// Held: ds[2] (extended) and ds[4]; the nacked and released one come
	// back at once (no retry policy) and fill the freed credit.
	again := e.nextN(c, 2)
	got := map[string]model.Delivery{}
	for _, d := range again {
		got[d.Body] = d
	}
	if got["m1"].Attempts != 2 || got["m1"].FailureReason != "bad input" || got["m3"].Attempts != 1 || got["m3"].ReceiveCount != 2 {
		t.Fatalf("redelivered %+v: want m1 (attempt 2, reason kept) and m3 (snoozed: attempt 1 again)", again)
	}
	e.heldBy("q", c, 4)
	e.wantStats("q", 0, 4, 0)
}

// testStreamSettleMany: one Settle of more settlements than a hundred (the
// stream API takes up to MaxCredit in one frame) applies each of them.
func testStreamSettleMany(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrVisibilityTimeout: "30"})
	const n = 250
	for i := range n {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: n})
	ds := e.nextN(c, n)
	ss := make([]broker.Settlement, 0, n)
	for i, d := range ds {
		if i%2 == 0 {
			ss = append(ss, ack(d))
		} else {
			ss = append(ss, broker.Settlement{Receipt: d.Receipt, LeaseEntry: model.LeaseEntry{Kind: model.ChangeTimeout, Timeout: time.Hour}})
		}
	}
	e.settle(c, ss...)
	e.wantStats("q", 0, n/2, 0)
	e.heldBy("q", c, n/2)
	if info := c.Info(); info.Acked != n/2 {
		t.Fatalf("stream info = %+v, want %d acked", info, n/2)
	}
}

func testStreamMaxHold(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "slow")
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 1, Lease: 30 * time.Second, MaxHold: 100 * time.Second})
	first := e.next(c)[0]
	// Well past one lease, the stream's leases are kept: the message stays
	// in flight, not delivered again.
	for range 8 {
		e.advance(10 * time.Second)
		e.clock.Settle(realTimeout)
	}
	e.wantStats("q", 0, 1, 0)
	e.nothingFor(c, "a held message within its maximum hold")
	// Past the maximum hold the lease is left to end: the message is
	// delivered again (to the stream, whose credit the end freed), a
	// second attempt.
	var again model.Delivery
	e.advanceUntil(5*time.Second, 2*time.Minute, "the message delivered again after the maximum hold", func() bool {
		if ds := e.tryNext(c); len(ds) > 0 {
			again = ds[0]
			return true
		}
		return false
	})
	if again.ID != first.ID || again.Attempts != 2 || again.Receipt == first.Receipt {
		t.Fatalf("after the maximum hold: %+v, want %s again, attempt 2, a new receipt", again, first.ID)
	}
	_, err := c.Settle(e.ctx, []broker.Settlement{ack(first)})
	if err != nil {
		t.Fatal(err)
	}
}

func testStreamDisconnect(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 2)})
	e.sendBody("q", "poison")
	for round := 1; round <= 2; round++ {
		c, err := e.b.Consume(e.ctx, broker.ConsumerConfig{Queue: "q", Credit: 1, ClientName: "worker"})
		if err != nil {
			t.Fatal(err)
		}
		d := e.next(c)[0]
		if d.Attempts != round {
			t.Fatalf("round %d: attempt %d", round, d.Attempts)
		}
		c.Close() // the worker died holding it
		if round == 1 {
			// Its lease ended at once, as an expired lease: visible now,
			// an attempt counted, the reason recorded.
			e.wantStats("q", 1, 0, 0)
			if m := e.browseAll("q", model.BrowseRequest{}); len(m) != 1 || m[0].FailureReason != broker.ReasonConsumerDisconnected || m[0].Attempts != 1 {
				t.Fatalf("after the disconnect: %+v", m)
			}
		}
	}
	// The second disconnect used the last attempt: dead-lettered at once.
	e.wantStats("q", 0, 0, 0)
	e.eventuallyStats("dlq", 1, 0, 0)
}

func testStreamFairDispatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for i := range 8 {
		e.sendBody("q", fmt.Sprint("early", i))
	}
	busy := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 10, ClientName: "slow"})
	e.nextN(busy, 8) // the slow stream holds 8: 2 free
	idle := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 10, ClientName: "fast"})
	// A new message goes to the stream with the most free credit.
	for i := range 3 {
		e.sendBody("q", fmt.Sprint("late", i))
		if d := e.next(idle); len(d) != 1 || d[0].Body != fmt.Sprint("late", i) {
			t.Fatalf("late message %d went elsewhere: %v", i, bodies(d))
		}
	}
	e.nothingFor(busy, "the stream with less free credit")
	if list, err := e.b.Consumers(e.ctx, "q"); err != nil || len(list) != 2 || list[0].ClientName != "slow" || list[0].Held != 8 || list[1].Held != 3 {
		t.Fatalf("Consumers = %+v, %v", list, err)
	}
}

func testStreamFifoGroups(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	for i := range 3 {
		e.fsend("q.fifo", "g", fmt.Sprint("d", i), fmt.Sprint("g", i))
	}
	// Credit 1 each: a FIFO receive hands out several messages of one group
	// at once, which would keep the group on one stream anyway.
	a := e.consume(broker.ConsumerConfig{Queue: "q.fifo", Credit: 1})
	b := e.consume(broker.ConsumerConfig{Queue: "q.fifo", Credit: 1})
	var first model.Delivery
	var holder, other *broker.Consumer
	// Whichever stream got g0, the other gets nothing of the group while
	// g0 is held.
	eventually(t, "the group's first message", func() bool {
		if ds := e.tryNext(a); len(ds) > 0 {
			first, holder, other = ds[0], a, b
			return true
		}
		if ds := e.tryNext(b); len(ds) > 0 {
			first, holder, other = ds[0], b, a
			return true
		}
		return false
	})
	if first.Body != "g0" {
		t.Fatalf("first delivery %q, want g0", first.Body)
	}
	e.nothingFor(other, "the other stream while the group is held")
	e.settle(holder, ack(first))
	var next []model.Delivery
	eventually(t, "the group's next message", func() bool {
		next = append(next, e.tryNext(a)...)
		next = append(next, e.tryNext(b)...)
		return len(next) > 0
	})
	if next[0].Body != "g1" {
		t.Fatalf("after g0 was acked: %v, want g1", bodies(next))
	}
}

// tryNext returns the stream's next batch if one is ready now.
func (e *env) tryNext(c *broker.Consumer) []model.Delivery {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ds, _ := c.Next(ctx)
	return ds
}

func testStreamPriorities(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.send("q", withPriority("low", -5), withPriority("mid", 0), withPriority("high", 9))
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 1})
	var got []string
	for range 3 {
		d := e.next(c)[0]
		got = append(got, d.Body)
		e.settle(c, ack(d))
	}
	if fmt.Sprint(got) != "[high mid low]" {
		t.Fatalf("delivered in order %v, want [high mid low]", got)
	}
}

func testStreamPause(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.setPaused("q", true)
	e.sendBody("q", "held back")
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 5})
	e.nothingFor(c, "a paused queue")
	e.setPaused("q", false)
	if d := e.next(c); d[0].Body != "held back" {
		t.Fatalf("after resume: %v", bodies(d))
	}
}

func testStreamAtMostOnce(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce})
	e.sendBody("q", "once")
	c, err := e.b.Consume(e.ctx, broker.ConsumerConfig{Queue: "q", Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := e.next(c)[0]
	e.wantStats("q", 0, 0, 0) // gone when delivered
	c.Close()                 // holding it: nothing comes back
	e.wantStats("q", 0, 0, 0)
	if d.Body != "once" {
		t.Fatalf("delivered %q", d.Body)
	}
}

func testStreamSettledElsewhere(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	e.sendBody("q", "b")
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 1})
	d := e.next(c)[0]
	// An SQS delete with the stream's receipt ends the stream's hold and
	// frees its credit: the next message comes.
	e.mustDelete("q", d.Receipt)
	next := e.next(c)[0]
	// A visibility change to 0 through SQS does too (a nack).
	e.mustChangeVis("q", next.Receipt, 0)
	e.heldBy("q", c, 1) // the nacked message, delivered again
	if info := c.Info(); info.Acked != 1 {
		t.Fatalf("acked %d, want the one deleted through SQS", info.Acked)
	}
	// Settling on the stream what another API settled is refused.
	errs, err := c.Settle(e.ctx, []broker.Settlement{ack(d)})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "an ack of a message deleted through SQS", errs[0], model.ErrInvalidParameterValue)
}

func testStreamForeignReceipts(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.createQueue("other", nil)
	e.sendBody("q", "a")
	e.sendBody("other", "b")
	one := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 1})
	two := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 1})
	three := e.consume(broker.ConsumerConfig{Queue: "other", Credit: 1})
	var mine model.Delivery
	var holder, stranger *broker.Consumer
	eventually(t, "a delivery on q", func() bool {
		if ds := e.tryNext(one); len(ds) > 0 {
			mine, holder, stranger = ds[0], one, two
			return true
		}
		if ds := e.tryNext(two); len(ds) > 0 {
			mine, holder, stranger = ds[0], two, one
			return true
		}
		return false
	})
	fromOther := e.next(three)[0]
	for _, tc := range []struct {
		what string
		c    *broker.Consumer
		r    string
	}{
		{"another stream's receipt", stranger, mine.Receipt},
		{"another queue's receipt", holder, fromOther.Receipt},
	} {
		errs, err := tc.c.Settle(e.ctx, []broker.Settlement{{Receipt: tc.r, Ack: true}})
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, tc.what, errs[0], model.ErrInvalidParameterValue)
	}
	// Nothing was lost: both messages are still held by their streams.
	e.wantStats("q", 0, 1, 0)
	e.wantStats("other", 0, 1, 0)
	e.settle(holder, ack(mine))
}

func testStreamRefusals(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for _, tc := range []struct {
		what string
		cfg  broker.ConsumerConfig
		want error
	}{
		{"an unknown queue", broker.ConsumerConfig{Queue: "nope", Credit: 1}, model.ErrQueueDoesNotExist},
		{"credit 10001", broker.ConsumerConfig{Queue: "q", Credit: broker.MaxCredit + 1}, model.ErrInvalidParameterValue},
		{"credit -1", broker.ConsumerConfig{Queue: "q", Credit: -1}, model.ErrInvalidParameterValue},
		{"a lease of 13 h", broker.ConsumerConfig{Queue: "q", Credit: 1, Lease: 13 * time.Hour}, model.ErrInvalidParameterValue},
		{"a maximum hold of half a second", broker.ConsumerConfig{Queue: "q", Credit: 1, MaxHold: 500 * time.Millisecond}, model.ErrInvalidParameterValue},
	} {
		c, err := e.b.Consume(e.ctx, tc.cfg)
		if c != nil {
			c.Close()
		}
		wantErr(t, tc.what, err, tc.want)
	}
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 1})
	wantErr(t, "SetCredit(1e9)", c.SetCredit(1e9), model.ErrInvalidParameterValue)
	// Deleting the queue ends its streams.
	if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(realTimeout):
		t.Fatal("the stream of a deleted queue did not end")
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, broker.ErrStreamClosed) {
		t.Fatalf("Next on an ended stream: %v", err)
	}
}

// countingBackend counts the receives that reach the backend: the one
// waiting now (its MaxMessages) and those that delivered something.
type countingBackend struct {
	storage.Backend
	waiting   atomic.Int64
	mu        sync.Mutex
	delivered []int // the size of each receive that delivered
}

func (c *countingBackend) Receive(ctx context.Context, req model.ReceiveRequest) ([]model.Delivery, error) {
	c.waiting.Store(int64(req.MaxMessages))
	ds, err := c.Backend.Receive(ctx, req)
	c.waiting.Store(0)
	if len(ds) > 0 {
		c.mu.Lock()
		c.delivered = append(c.delivered, len(ds))
		c.mu.Unlock()
	}
	return ds, err
}

// testStreamOneClaim: streams with the same lease are served by one claim
// of their free credit added up (more than a receive's 10), shared by free
// credit.
func testStreamOneClaim(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.setPaused("q", true)
	const full = model.MaxDispatchMessages
	for i := range full {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	be := &countingBackend{Backend: e.be}
	b := front(t, be, e.cfg)
	var cs []*broker.Consumer
	for range 4 {
		c, err := b.Consume(e.ctx, broker.ConsumerConfig{Queue: "q", Credit: full / 4, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	eventually(t, "a claim for the four streams' credits waits", func() bool { return be.waiting.Load() == full })
	e.setPaused("q", false)
	seen := map[string]bool{}
	for _, c := range cs {
		for _, d := range e.nextN(c, full/4) {
			if seen[d.Body] {
				t.Fatalf("%s delivered twice", d.Body)
			}
			seen[d.Body] = true
		}
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(seen) != full || len(be.delivered) != 1 || be.delivered[0] != full {
		t.Fatalf("%d messages in claims of %v; want one claim of %d", len(seen), be.delivered, full)
	}
}

// testStreamCreditLoweredWaiting: a stream that lowers its credit (to 0:
// a worker stopping) while a claim for its old credit waits is not handed
// more than the new credit when messages come.
func testStreamCreditLoweredWaiting(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.setPaused("q", true)
	for i := range 10 {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	be := &countingBackend{Backend: e.be}
	b := front(t, be, e.cfg)
	c, err := b.Consume(e.ctx, broker.ConsumerConfig{Queue: "q", Credit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	eventually(t, "a claim for the stream's credit waits", func() bool { return be.waiting.Load() == 10 })
	if err := c.SetCredit(2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a claim for the lowered credit waits", func() bool { return be.waiting.Load() == 2 })
	e.setPaused("q", false)
	e.nextN(c, 2)
	e.nothingFor(c, "a stream holding its lowered credit")
	e.wantStats("q", 8, 2, 0)
}

// hookBackend runs after on every receive that leased something, before
// the receive returns.
type hookBackend struct {
	storage.Backend
	after func()
	// change, when set, runs before every ChangeVisibility.
	change func()
}

func (h *hookBackend) ChangeVisibility(ctx context.Context, q model.QueueRef, cs []model.VisibilityChange) ([]model.LeaseOutcome, error) {
	if h.change != nil {
		h.change()
	}
	return h.Backend.ChangeVisibility(ctx, q, cs)
}

func (h *hookBackend) Receive(ctx context.Context, req model.ReceiveRequest) ([]model.Delivery, error) {
	ds, err := h.Backend.Receive(ctx, req)
	if len(ds) > 0 && h.after != nil {
		h.after()
	}
	return ds, err
}

// testStreamHandedWaitsForAHandOut: Consumer.Handed (an empty settle's
// barrier) returns only once a claim being handed out has reached the
// stream: here the hand-out waits for its release of what the lowered
// credit leaves over.
func testStreamHandedWaitsForAHandOut(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for i := range 10 {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	entered, proceed := make(chan struct{}), make(chan struct{})
	var block sync.Once
	c := e.hookedStreamOn(func(be *hookBackend) {
		be.change = func() {
			block.Do(func() {
				close(entered)
				<-proceed
			})
		}
	}, func(c *broker.Consumer) {
		if err := c.SetCredit(3); err != nil {
			t.Error(err)
		}
	})
	<-entered // the hand-out is releasing the 7 past the credit
	handed := make(chan struct{})
	go func() {
		c.Handed()
		close(handed)
	}()
	select {
	case <-handed:
		t.Fatal("Handed returned while a hand-out was under way")
	default:
	}
	close(proceed)
	<-handed
	n := 0
	for ds := c.TryNext(); ds != nil; ds = c.TryNext() {
		n += len(ds)
	}
	if n != 3 {
		t.Fatalf("after Handed the stream had %d messages waiting, want 3", n)
	}
}

// hookedStream opens a stream on the paused queue q (credit 10, leases of
// a minute) through a front of its own whose first receive that leases
// something runs after(stream) before it returns, then resumes q: the
// stream's first claim is made while after runs.
func (e *env) hookedStream(after func(c *broker.Consumer)) *broker.Consumer {
	e.t.Helper()
	return e.hookedStreamOn(func(*hookBackend) {}, after)
}

// hookedStreamOn is hookedStream with more hooks, set by hooks.
func (e *env) hookedStreamOn(hooks func(be *hookBackend), after func(c *broker.Consumer)) *broker.Consumer {
	e.t.Helper()
	var c *broker.Consumer
	be := &hookBackend{Backend: e.be}
	hooks(be)
	var once sync.Once
	be.after = func() { once.Do(func() { after(c) }) }
	b := front(e.t, be, e.cfg)
	e.setPaused("q", true)
	var err error
	c, err = b.Consume(e.ctx, broker.ConsumerConfig{Queue: "q", Credit: 10, Lease: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	e.setPaused("q", false)
	return c
}

// testStreamCreditLoweredClaimed: messages a claim leased for credit that
// was lowered before they were handed out go back to the queue without an
// attempt counted; the stream gets its new credit's worth.
func testStreamCreditLoweredClaimed(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for i := range 10 {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	c := e.hookedStream(func(c *broker.Consumer) {
		if err := c.SetCredit(3); err != nil {
			t.Error(err)
		}
	})
	e.nextN(c, 3)
	e.nothingFor(c, "a stream holding its lowered credit")
	e.wantStats("q", 7, 3, 0)
	for _, m := range e.browseAll("q", model.BrowseRequest{}) {
		if m.State != model.StateVisible {
			continue
		}
		if m.Attempts != 0 {
			t.Fatalf("%s went back with %d attempts, want 0 (not counted): %+v", m.Body, m.Attempts, m)
		}
	}
}

// testStreamQueueDeleted: a queue's deletion ends its streams, those
// whose credit is used (no claim waits for them) and those of credit 0
// too, and the consumer list forgets them.
func testStreamQueueDeleted(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	full := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 1})
	e.next(full)
	paused := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 0})
	if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*broker.Consumer{full, paused} {
		select {
		case <-c.Done():
		case <-time.After(realTimeout):
			t.Fatalf("stream %s (credit %d) still open after its queue's deletion", c.ID(), c.Info().Credit)
		}
		if _, err := c.Next(e.ctx); !errors.Is(err, broker.ErrStreamClosed) {
			t.Fatalf("Next on a stream whose queue was deleted: %v, want ErrStreamClosed", err)
		}
	}
	if n := e.b.OpenStreams(); len(n) != 0 {
		t.Fatalf("open streams after the queue's deletion: %v", n)
	}
}

// wantBackUncounted checks that queue's n messages are all visible again
// with no attempt counted and no failure reason.
func (e *env) wantBackUncounted(queue string, n int64) {
	e.t.Helper()
	e.wantStats(queue, n, 0, 0)
	for _, m := range e.browseAll(queue, model.BrowseRequest{}) {
		if m.State != model.StateVisible || m.Attempts != 0 || m.FailureReason != "" {
			e.t.Fatalf("%s came back as %s with %d attempts and reason %q, want visible, 0 and none", m.Body, m.State, m.Attempts, m.FailureReason)
		}
	}
}

// testStreamClosedUntaken: messages handed to a stream that its consumer
// never took (Next) never reached a worker; when the stream closes they go
// back without an attempt counted, unlike held work (testStreamDisconnect).
func testStreamClosedUntaken(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for i := range 3 {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	c := e.consume(broker.ConsumerConfig{Queue: "q", Credit: 3, Lease: time.Minute})
	e.heldBy("q", c, 3)
	e.wantStats("q", 0, 3, 0)
	c.Close()
	e.wantBackUncounted("q", 3)
}

// testStreamClosedDuringClaim: messages a claim leased for a stream that
// closed before they were handed to it go back without an attempt counted.
func testStreamClosedDuringClaim(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for i := range 4 {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	c := e.hookedStream(func(c *broker.Consumer) {
		// Close waits for the dispatcher (whose receive this is) once the
		// queue's last stream ends: close from another goroutine, and go
		// on once the stream has ended.
		go c.Close()
		eventually(t, "the stream closed", func() bool {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := c.Next(ctx)
			return errors.Is(err, broker.ErrStreamClosed)
		})
	})
	<-c.Done()
	e.eventuallyStats("q", 4, 0, 0)
	e.wantBackUncounted("q", 4)
}
