// Package stream serves Sluice's streaming API (streampb, docs/streams.md)
// over gRPC: a Publish stream pipelines sends and confirms each once it is
// durable; a Consume stream gets leased messages pushed while its credit
// allows and settles them in batches. Like the HTTP APIs it only decodes,
// calls the front (broker.Broker: Send, Consume, Consumer.Settle) and
// encodes: every rule of a queue is the front's.
//
// Errors: an answer's error (a refused send, a settlement that failed)
// carries the native API's code and message (api/native's error table). A
// stream that cannot go on (no key, an unknown queue, a first message that
// is no open, a value out of range) ends with a gRPC status whose
// google.rpc.ErrorInfo detail has the same code as its reason (domain
// "sluice").
package stream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/api/native"
	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Limits of the stream API.
const (
	// MaxFrameBytes is the largest frame (one gRPC message) the broker
	// reads: a send of up to 10 messages of at most 1 MiB in all, a
	// settlement batch of thousands. A larger frame ends the stream with
	// ResourceExhausted. It is also the largest Deliveries frame the broker
	// writes (gRPC's default limit in every language's client).
	MaxFrameBytes = 4 << 20
	// MaxSettlements bounds one Settle's settlements (the most a stream can
	// hold).
	MaxSettlements = broker.MaxCredit
	// publishWindow and publishBytes bound what one Publish stream has in
	// flight (sends read but not confirmed): past either the broker stops
	// reading the stream until confirms go out, so a producer that does not
	// read its confirms is held back by gRPC's flow control, and the
	// broker's memory stays bounded.
	publishWindow = 256
	publishBytes  = 16 << 20
	// settleWindow bounds a Consume stream's settlement batches in flight.
	settleWindow = 64
	// KeepaliveTime and KeepaliveTimeout: the broker pings a connection
	// quiet for KeepaliveTime and closes it when the ping is not answered
	// within KeepaliveTimeout, so a consumer cut off from the broker (a
	// killed machine, a network cut) is found within 10 s and its messages
	// go back to the queue.
	KeepaliveTime    = 5 * time.Second
	KeepaliveTimeout = 5 * time.Second
)

// Config configures the stream API.
type Config struct {
	// Keys, when not nil, are the access keys: each stream must carry a
	// bearer token of one of them ("authorization: Bearer ID:SECRET"),
	// allowed native:write. Nil: no authentication (the server's rule on
	// where a broker without keys may listen applies).
	Keys *auth.Keys
	// Drain, when done, ends every stream: Consume streams end with
	// Unavailable (the messages they hold keep their leases), Publish
	// streams stop reading and end once their sends are confirmed. The
	// server cancels it when it shuts down. Nil: never.
	Drain context.Context
	// Logger logs what the API cannot answer; nil discards.
	Logger *slog.Logger
}

// Service implements streampb.StreamsServer over a broker.
type Service struct {
	streampb.UnimplementedStreamsServer
	b        *broker.Broker
	verifier *auth.Verifier
	drain    context.Context
	log      *slog.Logger
}

// New returns the service for b.
func New(b *broker.Broker, cfg Config) *Service {
	s := &Service{b: b, drain: cfg.Drain, log: cfg.Logger}
	if s.drain == nil {
		s.drain = context.Background()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Keys != nil {
		s.verifier = auth.NewVerifier(cfg.Keys, b.Clock())
	}
	return s
}

// NewServer returns a gRPC server that serves only the stream API, with
// its keep-alives, frame limit and authentication.
func NewServer(b *broker.Broker, cfg Config) (*grpc.Server, *Service) {
	s := New(b, cfg)
	g := grpc.NewServer(
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		// Clients may ping as often as the broker does, streams or not.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(MaxFrameBytes),
		grpc.StreamInterceptor(s.authenticate),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return nil, status.Error(codes.Unimplemented, "The stream API has only streaming calls.")
		}),
	)
	streampb.RegisterStreamsServer(g, s)
	return g, s
}

// authenticate verifies a stream's key (Config.Keys) and puts the caller
// on its context, as the HTTP server does for a request.
func (s *Service) authenticate(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx := ss.Context()
	var c broker.Caller
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.Addr = p.Addr.String()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if ua := md.Get("user-agent"); len(ua) > 0 {
		c.UserAgent = ua[0]
	}
	if s.verifier != nil {
		authz := md.Get("authorization")
		var id auth.Identity
		var err error
		switch len(authz) {
		case 0:
			_, err = s.verifier.Bearer("")
		case 1:
			id, err = s.verifier.Bearer(authz[0])
		default:
			err = model.Errorf(model.ErrIncompleteSignature, "The stream has more than one authorization.")
		}
		if err == nil && !id.Allowed(auth.NativeWrite) {
			err = id.DeniedError(auth.NativeWrite)
		}
		if err != nil {
			s.log.Debug("stream refused by authentication", "addr", c.Addr, "err", err)
			return statusOf(err)
		}
		c.AccessKey, c.Authenticated, c.Account = id.AccessKeyID, true, id.Account
	}
	return h(srv, &callerStream{ServerStream: ss, ctx: broker.WithCaller(ctx, c)})
}

// callerStream is a server stream whose context carries the caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *callerStream) Context() context.Context { return c.ctx }

// errorOf is the wire form of an error in an answer.
func errorOf(err error) *streampb.Error {
	if err == nil {
		return nil
	}
	e := native.ErrorOf(err)
	return &streampb.Error{Code: e.Code, Message: e.Message}
}

// statusOf is the status that ends a stream for err: the gRPC code nearest
// to the native code, which goes in an ErrorInfo detail.
func statusOf(err error) error {
	if _, ok := status.FromError(err); ok && !isBrokerError(err) {
		return err
	}
	e := native.ErrorOf(err)
	code := codes.InvalidArgument
	switch e.Code {
	case "queue_not_found", "not_found", "message_not_found":
		code = codes.NotFound
	case "access_denied", "request_refused":
		code = codes.PermissionDenied
	case "throttled", "over_limit", "queue_full", "too_large":
		code = codes.ResourceExhausted
	case "unauthenticated", "incomplete_signature", "invalid_key", "signature_mismatch", "request_expired":
		code = codes.Unauthenticated
	case "unavailable", "store_full":
		code = codes.Unavailable
	case "conflict", "queue_exists", "queue_deleted_recently", "purge_in_progress", "message_not_in_flight":
		code = codes.FailedPrecondition
	case "unsupported":
		code = codes.Unimplemented
	case "internal":
		code = codes.Internal
	}
	st := status.New(code, e.Message)
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: e.Code, Domain: "sluice"}); derr == nil {
		st = d
	}
	return st.Err()
}

// isBrokerError reports whether err is one of the broker's (a status error
// from gRPC itself is passed on as it is).
func isBrokerError(err error) bool {
	var be *model.Error
	return errors.As(err, &be)
}

// drainError ends a stream when the broker shuts down.
func drainError() error {
	return statusOf(model.Errorf(model.ErrClosed, "The broker is shutting down: open the stream again (on this broker once it is back, or on another)."))
}

// invalid ends a stream for a frame it cannot take.
func invalid(format string, args ...any) error {
	return statusOf(model.Errorf(model.ErrInvalidRequest, format, args...))
}

// recvLoop reads a stream's frames into a channel until the stream ends
// (its error last: io.EOF when the client closed its side) or stop is
// closed (the handler returned).
func recvLoop[T any](recv func() (*T, error), stop <-chan struct{}) <-chan recvd[T] {
	ch := make(chan recvd[T])
	go func() {
		for {
			m, err := recv()
			select {
			case ch <- recvd[T]{m, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

type recvd[T any] struct {
	m   *T
	err error
}

// Publish serves a producer's stream: each send is handled as it arrives
// (a FIFO queue's in the order they arrived, one after another, so a
// group's order is the stream's), and confirmed once durable.
func (s *Service) Publish(st streampb.Streams_PublishServer) error {
	ctx := st.Context()
	var sendMu sync.Mutex
	var sendErr error
	confirm := func(c *streampb.PublishConfirm) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr == nil {
			sendErr = st.Send(c)
		}
	}
	window := semaphore.NewWeighted(publishBytes)
	slots := make(chan struct{}, publishWindow)
	var wg sync.WaitGroup // the sends in flight
	pool := newWorkers()
	defer pool.close()
	// fifo chains a FIFO queue's sends: each waits for the one before.
	fifo := map[string]chan struct{}{}
	stop := make(chan struct{})
	defer close(stop)
	frames := recvLoop(st.Recv, stop)
	defer wg.Wait()
	for {
		var f recvd[streampb.PublishRequest]
		select {
		case f = <-frames:
		case <-s.drain.Done():
			wg.Wait()
			return drainError()
		}
		if f.err == io.EOF {
			wg.Wait()
			sendMu.Lock()
			err := sendErr
			sendMu.Unlock()
			return err
		}
		if f.err != nil {
			return f.err
		}
		req := f.m
		size := int64(min(proto.Size(req), publishBytes))
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := window.Acquire(ctx, size); err != nil {
			return err
		}
		var prev, done chan struct{}
		if strings.HasSuffix(req.GetQueue(), ".fifo") {
			prev, done = fifo[req.GetQueue()], make(chan struct{})
			fifo[req.GetQueue()] = done
		}
		wg.Add(1)
		pool.run(func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer window.Release(size)
			if prev != nil {
				<-prev
			}
			c := s.publish(ctx, req)
			if done != nil {
				close(done)
			}
			confirm(c)
		})
		// A chain whose last send is done is not kept.
		for q, ch := range fifo {
			select {
			case <-ch:
				delete(fifo, q)
			default:
			}
		}
	}
}

// publish makes one send and its confirm.
func (s *Service) publish(ctx context.Context, req *streampb.PublishRequest) *streampb.PublishConfirm {
	out := &streampb.PublishConfirm{Seq: req.GetSeq()}
	if req.GetQueue() == "" {
		out.Error = errorOf(model.Errorf(model.ErrMissingParameter, "Field queue is required."))
		return out
	}
	msgs := req.GetMessages()
	if len(msgs) == 0 || len(msgs) > model.MaxBatchEntries {
		out.Error = errorOf(model.Errorf(model.ErrInvalidParameterValue, "A send carries 1 to %d messages, not %d.", model.MaxBatchEntries, len(msgs)))
		return out
	}
	now := s.b.Clock().Now()
	out.Results = make([]*streampb.SendResult, len(msgs))
	entries := make([]model.SendEntry, 0, len(msgs))
	at := make([]int, 0, len(msgs))
	for i, m := range msgs {
		e, err := toSendEntry("messages["+strconv.Itoa(i)+"]", m, now)
		if err != nil {
			out.Results[i] = &streampb.SendResult{Error: errorOf(err)}
			continue
		}
		e.ID = strconv.Itoa(i)
		entries = append(entries, e)
		at = append(at, i)
	}
	if len(entries) > 0 {
		res, err := s.b.Send(ctx, req.GetQueue(), entries)
		if err != nil {
			return &streampb.PublishConfirm{Seq: req.GetSeq(), Error: errorOf(err)}
		}
		for j, r := range res {
			out.Results[at[j]] = &streampb.SendResult{MessageId: r.MessageID, SequenceNumber: r.SequenceNumber, Error: errorOf(r.Err)}
		}
	}
	return out
}

// Consume serves a consumer's stream: an Open, then deliveries pushed by
// the front's dispatcher, settlements and credit changes from the
// consumer.
func (s *Service) Consume(st streampb.Streams_ConsumeServer) error {
	ctx := st.Context()
	stop := make(chan struct{})
	defer close(stop)
	frames := recvLoop(st.Recv, stop)
	var first recvd[streampb.ConsumeRequest]
	select {
	case first = <-frames:
	case <-s.drain.Done():
		return drainError()
	}
	if first.err != nil {
		if first.err == io.EOF {
			return nil
		}
		return first.err
	}
	open := first.m.GetOpen()
	if open == nil {
		return invalid("The first message of a Consume stream must be an open (queue, credit, lease_seconds, max_hold_seconds, client_name).")
	}
	credit, err := creditOf(open.GetCredit())
	if err != nil {
		return statusOf(err)
	}
	c, err := s.b.Consume(ctx, broker.ConsumerConfig{
		Queue: open.GetQueue(), Credit: credit,
		Lease:      time.Duration(open.GetLeaseSeconds()) * time.Second,
		MaxHold:    time.Duration(open.GetMaxHoldSeconds()) * time.Second,
		ClientName: open.GetClientName(), RemoteAddr: broker.CallerFrom(ctx).Addr,
	})
	if err != nil {
		return statusOf(err)
	}
	// The stream's end releases what it holds; the broker's shutdown only
	// detaches (Detach: the leases run on).
	release := true
	defer func() {
		if release {
			c.Close()
		} else {
			c.Detach()
		}
	}()
	var sendMu sync.Mutex
	send := func(r *streampb.ConsumeResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return st.Send(r)
	}
	if err := send(&streampb.ConsumeResponse{Kind: &streampb.ConsumeResponse_Opened{Opened: &streampb.Opened{
		StreamId: c.ID(), LeaseSeconds: uint32(c.Lease() / time.Second), MaxHoldSeconds: uint32(c.MaxHold() / time.Second),
	}}}); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 2)
	push := &pusher{s: s, c: c, queue: open.GetQueue(), send: send}
	go func() { ended <- push.run(sctx) }()
	settles := make(chan struct{}, settleWindow)
	// Settlements in flight are answered before the stream ends (the
	// deferred Close releases what is still held after them).
	pool := newWorkers()
	defer pool.close()
	for {
		var f recvd[streampb.ConsumeRequest]
		select {
		case f = <-frames:
		case err := <-ended:
			return err
		case <-s.drain.Done():
			release = false
			return drainError()
		}
		if f.err == io.EOF {
			return nil
		}
		if f.err != nil {
			return f.err
		}
		switch k := f.m.GetKind().(type) {
		case *streampb.ConsumeRequest_Credit:
			n, err := creditOf(k.Credit.GetCredit())
			if err == nil {
				err = c.SetCredit(n)
			}
			if err != nil {
				return statusOf(err)
			}
		case *streampb.ConsumeRequest_Settle:
			batch := k.Settle
			if len(batch.GetSettlements()) > MaxSettlements {
				return statusOf(model.Errorf(model.ErrTooManyEntries, "A settle carries at most %d settlements, not %d.", MaxSettlements, len(batch.GetSettlements())))
			}
			select {
			case settles <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			pool.run(func() {
				defer func() { <-settles }()
				r := s.settle(sctx, c, batch)
				answer := &streampb.ConsumeResponse{Kind: &streampb.ConsumeResponse_Settled{Settled: r}}
				var err error
				if len(batch.GetSettlements()) == 0 {
					// An empty settle is a client's barrier (Sync): every
					// frame before it was read, so after a credit of 0
					// nothing more is leased for the stream; a claim being
					// handed out under the old credit reaches the stream
					// (Handed), and what the stream was handed is sent
					// before the answer.
					c.Handed()
					err = push.flushThen(sctx, answer)
				} else {
					err = send(answer)
				}
				if err != nil {
					cancel()
				}
			})
		case *streampb.ConsumeRequest_Open:
			return invalid("The stream is open already: a Consume stream takes one open, as its first message.")
		default:
			return invalid("A Consume stream's message must be an open, a credit or a settle.")
		}
	}
}

// redriveRead is how long a stream uses the redrive policy it read.
const redriveRead = time.Second

// workers runs a stream's jobs (sends, settlements) on goroutines it
// keeps: a job goes to an idle one, or to a new one when all are busy (the
// caller bounds how many run at once: the window). A goroutine per job
// grew a new stack for each send through the store (5 % of the broker's
// CPU on a steady load).
type workers struct {
	jobs chan func()
	wg   sync.WaitGroup
}

func newWorkers() *workers { return &workers{jobs: make(chan func())} }

func (w *workers) run(job func()) {
	select {
	case w.jobs <- job: // an idle worker takes it
		return
	default:
	}
	w.wg.Go(func() {
		job()
		for j := range w.jobs {
			j()
		}
	})
}

// close waits for the jobs running and ends the workers.
func (w *workers) close() {
	close(w.jobs)
	w.wg.Wait()
}

// creditOf checks a credit's range.
func creditOf(n uint32) (int, error) {
	if n > broker.MaxCredit {
		return 0, model.InvalidParameterError(n, "credit", "must be from 0 to 10000 (0 pauses delivery).")
	}
	return int(n), nil
}

// pusher sends the batches the dispatcher leases for a stream, each batch
// whole under mu (a large one takes several frames), so that an empty
// settle's answer (flushThen) comes after every batch handed to the stream
// before it.
type pusher struct {
	s     *Service
	c     *broker.Consumer
	queue string
	send  func(*streampb.ConsumeResponse) error

	mu sync.Mutex
	// The queue's redrive policy (each message's max_attempts) is read at
	// most once per redriveRead, not for every batch (a round trip on
	// PostgreSQL).
	redrive *model.RedrivePolicy
	readAt  time.Time
}

// run sends the stream's batches until it ends.
func (p *pusher) run(ctx context.Context) error {
	for {
		if err := p.c.Wait(ctx); err != nil {
			if errors.Is(err, broker.ErrStreamClosed) {
				// The queue was deleted, or the broker closes.
				return statusOf(model.Errorf(model.ErrClosed, "The stream has ended: its queue was deleted, or the broker is shutting down."))
			}
			return err
		}
		p.mu.Lock()
		err := p.flushLocked(ctx)
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// flushThen sends the batches waiting for the stream, then answer.
func (p *pusher) flushThen(ctx context.Context, answer *streampb.ConsumeResponse) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.flushLocked(ctx); err != nil {
		return err
	}
	return p.send(answer)
}

// flushLocked sends every batch waiting for the stream (p.mu held).
func (p *pusher) flushLocked(ctx context.Context) error {
	for ds := p.c.TryNext(); ds != nil; ds = p.c.TryNext() {
		if now := time.Now(); p.readAt.IsZero() || now.Sub(p.readAt) >= redriveRead {
			if q, err := p.s.b.GetQueue(ctx, p.queue); err == nil {
				p.redrive, p.readAt = q.Config.Redrive, now
			}
		}
		frame := &streampb.Deliveries{}
		size := 0
		for i := range ds {
			m := toMessage(&ds[i], p.redrive)
			n := proto.Size(m) + 8
			if len(frame.Messages) > 0 && size+n > MaxFrameBytes/2 {
				if err := p.send(&streampb.ConsumeResponse{Kind: &streampb.ConsumeResponse_Deliveries{Deliveries: frame}}); err != nil {
					return err
				}
				frame, size = &streampb.Deliveries{}, 0
			}
			frame.Messages = append(frame.Messages, m)
			size += n
		}
		if err := p.send(&streampb.ConsumeResponse{Kind: &streampb.ConsumeResponse_Deliveries{Deliveries: frame}}); err != nil {
			return err
		}
	}
	return nil
}

// settle applies one Settle and makes its answer.
func (s *Service) settle(ctx context.Context, c *broker.Consumer, batch *streampb.Settle) *streampb.Settled {
	in := batch.GetSettlements()
	out := &streampb.Settled{Seq: batch.GetSeq(), Results: make([]*streampb.SettleResult, len(in))}
	ss := make([]broker.Settlement, 0, len(in))
	at := make([]int, 0, len(in))
	for i, st := range in {
		out.Results[i] = &streampb.SettleResult{Receipt: st.GetReceipt()}
		b, err := toSettlement(st)
		if err != nil {
			out.Results[i].Error = errorOf(err)
			continue
		}
		ss = append(ss, b)
		at = append(at, i)
	}
	if len(ss) == 0 {
		return out
	}
	errs, err := c.Settle(ctx, ss)
	for j := range ss {
		e := err
		if err == nil {
			e = errs[j]
		}
		out.Results[at[j]].Error = errorOf(e)
	}
	return out
}

// toSettlement converts one settlement.
func toSettlement(st *streampb.Settlement) (broker.Settlement, error) {
	out := broker.Settlement{Receipt: st.GetReceipt()}
	if out.Receipt == "" {
		return out, model.Errorf(model.ErrMissingParameter, "A settlement needs the receipt of the message it settles.")
	}
	secs := func(n uint32, field string) (time.Duration, error) {
		if n > uint32(model.MaxVisibilityTimeout/time.Second) {
			return 0, model.InvalidParameterError(n, field, "must be from 0 to 43200.")
		}
		return time.Duration(n) * time.Second, nil
	}
	var err error
	switch a := st.GetAction().(type) {
	case *streampb.Settlement_Ack:
		out.Ack = true
		if a.Ack != nil && a.Ack.Result != nil {
			r := a.Ack.GetResult()
			out.Result = &r
		}
	case *streampb.Settlement_Nack:
		out.Kind, out.Reason = model.Nack, a.Nack.GetReason()
		if a.Nack.DelaySeconds != nil {
			var d time.Duration
			d, err = secs(a.Nack.GetDelaySeconds(), "nack.delay_seconds")
			out.Delay = &d
		}
	case *streampb.Settlement_Extend:
		out.Kind = model.ChangeTimeout
		if a.Extend.GetSeconds() == 0 {
			return out, model.InvalidParameterError(0, "extend.seconds", "must be from 1 to 43200 (a release hands the message back).")
		}
		out.Timeout, err = secs(a.Extend.GetSeconds(), "extend.seconds")
	case *streampb.Settlement_Snooze:
		out.Kind = model.Snooze
		out.Timeout, err = secs(a.Snooze.GetSeconds(), "snooze.seconds")
	case *streampb.Settlement_Release:
		out.Kind = model.Snooze
	case *streampb.Settlement_DeadLetter:
		out.Kind, out.Reason = model.DeadLetterNow, a.DeadLetter.GetReason()
	default:
		return out, model.Errorf(model.ErrMissingParameter, "A settlement needs an action: ack, nack, extend, snooze, release or dead_letter.")
	}
	return out, err
}
