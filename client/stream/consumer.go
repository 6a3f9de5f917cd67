package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/api/stream/streampb"
)

// ConsumeOptions opens a Consume stream.
type ConsumeOptions struct {
	// Queue is the queue to consume.
	Queue string
	// Credit is how many unsettled messages the stream may hold (0..10000;
	// 0 pauses delivery until SetCredit).
	Credit int
	// Lease is each message's lease (whole seconds, 1 s..12 h; 0: the
	// queue's VisibilityTimeout). The broker extends it while the stream
	// lives, up to MaxHold.
	Lease time.Duration
	// MaxHold caps how long the broker keeps one message's lease alive (1
	// s..12 h; 0: one hour).
	MaxHold time.Duration
	// ClientName names the consumer in the broker's consumer list.
	ClientName string
}

// Consumer is a consumer's stream. Its methods are safe for concurrent
// use: handlers in many goroutines can Receive and settle at once, and
// their settlements go out together.
type Consumer struct {
	st     grpc.BidiStreamingClient[streampb.ConsumeRequest, streampb.ConsumeResponse]
	cancel context.CancelFunc
	opened *streampb.Opened

	sendMu sync.Mutex // one Send at a time

	mu       sync.Mutex
	ready    []*streampb.Message // delivered, not yet taken by Receive
	arrived  chan struct{}       // signalled when ready grows (buffered 1)
	queued   []pendingSettle     // settlements not yet sent
	flushing bool                // a goroutine is sending queued
	seq      uint64
	wait     map[uint64][]pendingSettle
	syncs    map[uint64]chan error // Sync's empty frames waiting for their answer
	err      error                 // set once the stream has ended
	done     chan struct{}
}

// pendingSettle is one settlement waiting for its answer.
type pendingSettle struct {
	s   *streampb.Settlement
	res chan error // buffered 1
}

// Consume opens a Consume stream and waits for the broker to register it.
// It fails as the open does: an unknown queue (codes.NotFound), a value out
// of range (codes.InvalidArgument), a refused key (codes.Unauthenticated,
// codes.PermissionDenied).
func (c *Client) Consume(ctx context.Context, o ConsumeOptions) (*Consumer, error) {
	if o.Credit < 0 || o.Credit > 10000 || o.Lease < 0 || o.MaxHold < 0 {
		return nil, errors.New("stream: ConsumeOptions: Credit must be 0..10000, Lease and MaxHold not negative")
	}
	sctx, cancel := context.WithCancel(c.streamContext(context.WithoutCancel(ctx)))
	st, err := c.api.Consume(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	open := &streampb.Open{Queue: o.Queue, Credit: uint32(o.Credit), LeaseSeconds: uint32(o.Lease / time.Second),
		MaxHoldSeconds: uint32(o.MaxHold / time.Second), ClientName: o.ClientName}
	if err := st.Send(&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Open{Open: open}}); err != nil {
		cancel()
		return nil, recvError(st, err)
	}
	type first struct {
		r   *streampb.ConsumeResponse
		err error
	}
	got := make(chan first, 1)
	go func() {
		r, err := st.Recv()
		got <- first{r, err}
	}()
	var f first
	select {
	case f = <-got:
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	if f.err != nil {
		cancel()
		return nil, f.err
	}
	if f.r.GetOpened() == nil {
		cancel()
		return nil, errors.New("stream: the broker answered the open with something else than opened")
	}
	s := &Consumer{st: st, cancel: cancel, opened: f.r.GetOpened(), arrived: make(chan struct{}, 1),
		wait: map[uint64][]pendingSettle{}, done: make(chan struct{})}
	go s.read()
	return s, nil
}

// recvError is the status that ended a stream whose Send failed (Send
// answers io.EOF; Recv has the reason).
func recvError(st grpc.ClientStream, err error) error {
	if err == io.EOF {
		if rerr := st.RecvMsg(new(streampb.ConsumeResponse)); rerr != nil && rerr != io.EOF {
			return rerr
		}
	}
	return err
}

// ID names the stream in the broker's consumer list.
func (s *Consumer) ID() string { return s.opened.GetStreamId() }

// Lease and MaxHold are the values the broker put in force.
func (s *Consumer) Lease() time.Duration {
	return time.Duration(s.opened.GetLeaseSeconds()) * time.Second
}
func (s *Consumer) MaxHold() time.Duration {
	return time.Duration(s.opened.GetMaxHoldSeconds()) * time.Second
}

// Receive returns the next delivered message, waiting until one comes or
// ctx ends (ctx's error) or the stream ends (its error; ErrClosed after
// Close).
func (s *Consumer) Receive(ctx context.Context) (*streampb.Message, error) {
	for {
		s.mu.Lock()
		if len(s.ready) > 0 {
			m := s.ready[0]
			s.ready[0] = nil
			s.ready = s.ready[1:]
			s.mu.Unlock()
			return m, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-s.arrived:
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// SetCredit changes the stream's credit (0..10000).
func (s *Consumer) SetCredit(n int) error {
	if n < 0 || n > 10000 {
		return errors.New("stream: credit must be 0..10000")
	}
	return s.send(&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Credit{Credit: &streampb.Credit{Credit: uint32(n)}}})
}

func (s *Consumer) send(r *streampb.ConsumeRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if err := s.st.Send(r); err != nil {
		<-s.done
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.err
	}
	return nil
}

// Ack deletes a delivered message (done), once durable.
func (s *Consumer) Ack(ctx context.Context, receipt string) error {
	return s.settleOne(ctx, &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_Ack{Ack: &streampb.Ack{}}})
}

// AckWithResult deletes a delivered message (done) with its job's result
// (at most 65,536 bytes), once durable: on a queue with
// CompletedRetentionSeconds, its status by id shows the result for that
// long.
func (s *Consumer) AckWithResult(ctx context.Context, receipt, result string) error {
	if len(result) > maxResultBytes {
		// Refused here as the broker would: a result of megabytes would not
		// fit in a frame, and a frame past the broker's ends the stream.
		return &Error{Code: "invalid_parameter", Message: fmt.Sprintf("The result is %d bytes long; an ack's result is at most %d bytes (64 KiB): keep a larger result elsewhere and give its key.", len(result), maxResultBytes)}
	}
	return s.settleOne(ctx, &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_Ack{Ack: &streampb.Ack{Result: &result}}})
}

// Nack hands a message back as a failure with reason: it counts as an
// attempt, and the queue's retry policy and maxReceiveCount apply. delay,
// when not negative, is the wait before it is visible again instead of the
// policy's backoff.
func (s *Consumer) Nack(ctx context.Context, receipt, reason string, delay time.Duration) error {
	n := &streampb.Nack{Reason: reason}
	if delay >= 0 {
		d := uint32(delay / time.Second)
		n.DelaySeconds = &d
	}
	return s.settleOne(ctx, &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_Nack{Nack: n}})
}

// Extend sets a message's lease to end d from now (whole seconds, at least
// 1 s). The broker extends leases by itself while the stream lives; this
// asks for a longer (or shorter) one.
func (s *Consumer) Extend(ctx context.Context, receipt string, d time.Duration) error {
	return s.settleOne(ctx, &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_Extend{Extend: &streampb.Extend{Seconds: uint32(d / time.Second)}}})
}

// Snooze hands a message back for d without counting an attempt.
func (s *Consumer) Snooze(ctx context.Context, receipt string, d time.Duration) error {
	return s.settleOne(ctx, &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_Snooze{Snooze: &streampb.Snooze{Seconds: uint32(d / time.Second)}}})
}

// Release hands a message back at once without counting an attempt.
func (s *Consumer) Release(ctx context.Context, receipt string) error {
	return s.settleOne(ctx, &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_Release{Release: &streampb.Release{}}})
}

// DeadLetter moves a message to its queue's dead-letter queue now.
func (s *Consumer) DeadLetter(ctx context.Context, receipt, reason string) error {
	return s.settleOne(ctx, &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_DeadLetter{DeadLetter: &streampb.DeadLetter{Reason: reason}}})
}

func (s *Consumer) settleOne(ctx context.Context, st *streampb.Settlement) error {
	errs, err := s.Settle(ctx, st)
	if err != nil {
		return err
	}
	return errs[0]
}

// Settle applies settlements and returns one error (or nil) per
// settlement once the broker has made them durable; the error is the
// stream's when it ended first. Settlements of concurrent calls go out in
// one frame when they meet.
func (s *Consumer) Settle(ctx context.Context, sts ...*streampb.Settlement) ([]error, error) {
	ps := make([]pendingSettle, len(sts))
	for i, st := range sts {
		ps[i] = pendingSettle{s: st, res: make(chan error, 1)}
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.queued = append(s.queued, ps...)
	flush := !s.flushing
	s.flushing = true
	s.mu.Unlock()
	if flush {
		s.flush()
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		select {
		case errs[i] = <-p.res:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var se *settleEnded
		if errors.As(errs[i], &se) {
			return nil, se.err
		}
	}
	return errs, nil
}

// Sync sends an empty settlement frame and returns once the broker has
// answered it. The broker reads a stream's frames in order, and answers an
// empty one after sending every message it handed the stream before: after
// SetCredit(0), once Sync returns the broker leases nothing more for the
// stream, and every message the stream holds has arrived (Receive takes
// it without waiting); the exception is a claim under way as the credit
// changed whose messages cannot go back to the queue (an at-most-once
// queue's, or a release the store refused), which may still follow. It
// fails with the stream's error when the stream ends first.
func (s *Consumer) Sync(ctx context.Context) error {
	done := make(chan error, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.seq++
	seq := s.seq
	if s.syncs == nil {
		s.syncs = map[uint64]chan error{}
	}
	s.syncs[seq] = done
	s.mu.Unlock()
	if err := s.send(&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Settle{Settle: &streampb.Settle{Seq: seq}}}); err != nil {
		s.mu.Lock()
		delete(s.syncs, seq)
		s.mu.Unlock()
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.syncs, seq)
		s.mu.Unlock()
		return ctx.Err()
	}
}

// settleEnded is a settlement's result when the stream ended before its
// answer.
type settleEnded struct{ err error }

func (e *settleEnded) Error() string { return e.err.Error() }

// maxResultBytes is the longest result an ack may carry (the broker's
// limit); maxSettleFrameBytes bounds a Settle frame, below the 4 MiB the
// broker takes.
const (
	maxResultBytes      = 64 << 10
	maxSettleFrameBytes = 3 << 20
)

// flush sends what is queued, one frame at a time, until nothing is: the
// settlements queued while a frame is sent go out together in the next.
func (s *Consumer) flush() {
	for {
		s.mu.Lock()
		batch := s.queued
		s.queued = nil
		if len(batch) == 0 || s.err != nil {
			s.flushing = false
			s.mu.Unlock()
			for _, p := range batch {
				p.res <- &settleEnded{s.err}
			}
			return
		}
		// At most 10,000 settlements, and maxSettleFrameBytes (acks'
		// results make settlements of up to 64 KiB).
		n, size := 0, 0
		for n < len(batch) && n < 10000 {
			size += proto.Size(batch[n].s) + 8
			if n > 0 && size > maxSettleFrameBytes {
				break
			}
			n++
		}
		if n < len(batch) {
			s.queued = batch[n:]
			batch = batch[:n]
		}
		s.seq++
		seq := s.seq
		s.wait[seq] = batch
		s.mu.Unlock()
		frame := &streampb.Settle{Seq: seq, Settlements: make([]*streampb.Settlement, len(batch))}
		for i, p := range batch {
			frame.Settlements[i] = p.s
		}
		if err := s.send(&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Settle{Settle: frame}}); err != nil {
			// read's end answers the waiting settlements.
			s.mu.Lock()
			s.flushing = false
			s.mu.Unlock()
			return
		}
	}
}

// read takes deliveries and answers until the stream ends.
func (s *Consumer) read() {
	defer close(s.done)
	for {
		r, err := s.st.Recv()
		if err != nil {
			if err == io.EOF {
				err = ErrClosed
			}
			s.end(err)
			return
		}
		switch k := r.GetKind().(type) {
		case *streampb.ConsumeResponse_Deliveries:
			s.mu.Lock()
			s.ready = append(s.ready, k.Deliveries.GetMessages()...)
			s.mu.Unlock()
			select {
			case s.arrived <- struct{}{}:
			default:
			}
		case *streampb.ConsumeResponse_Settled:
			s.mu.Lock()
			batch := s.wait[k.Settled.GetSeq()]
			delete(s.wait, k.Settled.GetSeq())
			sc := s.syncs[k.Settled.GetSeq()]
			delete(s.syncs, k.Settled.GetSeq())
			s.mu.Unlock()
			if sc != nil {
				sc <- nil
			}
			res := k.Settled.GetResults()
			for i, p := range batch {
				var err error
				if i < len(res) {
					err = errorOf(res[i].GetError())
				} else {
					err = &Error{Code: "internal", Message: "the broker answered fewer settlements than were sent"}
				}
				p.res <- err
			}
		}
	}
}

// end records the stream's end and fails what waits on it.
func (s *Consumer) end(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	err = s.err
	waiting := s.wait
	s.wait = map[uint64][]pendingSettle{}
	syncs := s.syncs
	s.syncs = nil
	queued := s.queued
	s.queued = nil
	s.mu.Unlock()
	for _, c := range syncs {
		c <- err
	}
	for _, batch := range waiting {
		for _, p := range batch {
			p.res <- &settleEnded{err}
		}
	}
	for _, p := range queued {
		p.res <- &settleEnded{err}
	}
}

// Close ends the stream. The broker hands back every message the stream
// still holds as a failure with the reason "consumer disconnected" (an
// attempt counted), except those it had not begun to send, which go back
// uncounted: settle what is done first. Messages received but not settled
// are lost to this consumer.
func (s *Consumer) Close() error {
	s.sendMu.Lock()
	_ = s.st.CloseSend()
	s.sendMu.Unlock()
	t := time.NewTimer(5 * time.Second)
	select {
	case <-s.done:
	case <-t.C:
	}
	t.Stop()
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(s.err, ErrClosed) {
		return nil
	}
	return s.err
}

// Done is closed when the stream has ended; Err then says why.
func (s *Consumer) Done() <-chan struct{} { return s.done }

// Err is the stream's end: nil while it lives, ErrClosed after Close.
func (s *Consumer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
