package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/stream"
)

// Protocol names how NewSource reaches a Sluice broker.
type Protocol string

// The protocols of NewSource.
const (
	// ProtocolStream is a consumer stream of the broker's stream API (the
	// default): the broker pushes messages while the stream's credit
	// allows, and keeps their leases alive while the stream lives.
	ProtocolStream Protocol = "stream"
	// ProtocolHTTP is the native HTTP API: long-polling receives, and the
	// pool's heartbeat extending the leases. For a broker, or a proxy in
	// front of it, that does not pass gRPC (HTTP/2) through.
	ProtocolHTTP Protocol = "http"
)

// SourceOption configures NewSource.
type SourceOption func(*sourceConfig)

type sourceConfig struct {
	protocol   Protocol
	maxHold    time.Duration
	clientName string
	stream     *stream.Options
}

// WithProtocol chooses how NewSource reaches the broker: ProtocolStream
// (the default) or ProtocolHTTP.
func WithProtocol(p Protocol) SourceOption { return func(c *sourceConfig) { c.protocol = p } }

// WithMaxHold caps how long the broker keeps one message's lease alive for
// a stream (1 s..12 h, whole seconds; 0: the broker's default, one hour).
// A handler still running after it has its context cancelled with cause
// ErrLeaseLost, and its outcome is not applied: the message's lease ends
// then and it is delivered again. ProtocolStream only.
func WithMaxHold(d time.Duration) SourceOption { return func(c *sourceConfig) { c.maxHold = d } }

// WithClientName names the stream in the broker's consumer list (up to 128
// bytes, a longer name is cut at a character's boundary; default
// "sluice-worker HOST/PID"). ProtocolStream only.
func WithClientName(name string) SourceOption {
	return func(c *sourceConfig) { c.clientName = name }
}

// WithStreamOptions sets the stream connection's options (the access key,
// TLS, the user agent) instead of the ones taken from the client
// (client.Client.Connection). ProtocolStream only.
func WithStreamOptions(o stream.Options) SourceOption {
	return func(c *sourceConfig) { c.stream = &o }
}

// StreamSource is a Source whose broker pushes messages over a stream, up
// to a credit: NewSource's default. A pool drives it: it sets the credit to
// its slots + Prefetch when it starts and whenever they change (0 while
// its CPU guard pauses it), receives with the longest wait and no pause
// between waits, calls Stop when it stops receiving and Close once every
// message it received is settled.
type StreamSource interface {
	Source
	// SetCredit sets how many messages the stream may hold for the pool:
	// those received and not settled, and those delivered but not received
	// yet. A stream opened later opens with it.
	SetCredit(n int)
	// Stop sets the credit to 0 and releases the messages delivered but not
	// received yet (the attempt does not count). The stream stays open for
	// the settlements of the messages received.
	Stop(ctx context.Context) error
	// Close ends the stream after a Stop: the messages received and not
	// settled are handed back by the broker as failures ("consumer
	// disconnected"). A later Receive opens a new stream.
	Close(ctx context.Context) error
}

// maxStreamWait is how long a pool's receive waits on a stream: the
// longest wait of a long poll.
const maxStreamWait = 20 * time.Second

// streamOpenTimeout bounds one open of a stream (connect, open, opened).
const streamOpenTimeout = 30 * time.Second

// NewSource returns a Source reading queue from the Sluice broker c talks
// to. It is also a Backlogger (the queue's visible messages, from its stats
// over the native API).
//
// By default (ProtocolStream) it is a StreamSource: a consumer stream of
// the broker's stream API on the broker's address (c.Connection: the same
// address, access key and TLS), opened at the first Receive. The broker
// pushes messages while the stream holds fewer than its credit, which a
// pool sets to its slots + Prefetch, and extends their leases while the
// stream lives, up to the stream's maximum hold (WithMaxHold); the pool's
// heartbeat then costs nothing for them. When the stream breaks (the
// broker restarted, the connection was cut) Receive answers the error and
// the next Receive opens a new stream on a new connection (a pool retries
// with its receive backoff). Messages received from a stream that has
// ended are settled and extended through the native API with their
// receipts: a broker that restarted kept their leases, which run on.
// Outcomes map to the stream's settlements as to the native controls
// below; delays are whole seconds, rounded up.
//
// With WithProtocol(ProtocolHTTP) it polls the native API instead: long
// receives, and the pool's heartbeat extends the leases. Outcomes map to
// the native controls one to one: KindAck is an ack, KindNack a nack with
// the reason (Delay 0 follows the queue's RetryPolicy), KindSnooze a
// snooze (the attempt does not count), KindRelease a release,
// KindDeadLetter a dead-letter now (the queue needs a RedrivePolicy).
//
// Either way, a settlement on a lease that has ended (message_not_in_flight,
// a receipt gone stale or that a stream no longer holds: invalid_parameter
// on the receipt, a receipt that does not decode: invalid_receipt) is
// ErrLeaseLost, wrapping the broker's error; any other invalid_parameter
// (a delay out of range) is returned as is. A negative Delay is taken as 0.
// An ack of a stale receipt through the native API succeeds on the broker,
// without effect.
//
// An unknown protocol makes a Source whose every call fails, and which a
// pool's Config.Validate refuses.
func NewSource(c *client.Client, queue string, opts ...SourceOption) Source {
	cfg := sourceConfig{protocol: ProtocolStream}
	for _, o := range opts {
		o(&cfg)
	}
	native := &nativeSource{c: c, queue: queue}
	switch cfg.protocol {
	case ProtocolHTTP:
		return native
	case ProtocolStream, "":
	default:
		return badSource{fmt.Errorf("worker: protocol %q: want worker.ProtocolStream (%q) or worker.ProtocolHTTP (%q)",
			cfg.protocol, ProtocolStream, ProtocolHTTP)}
	}
	if cfg.maxHold < 0 || cfg.maxHold > 12*time.Hour {
		return badSource{fmt.Errorf("worker: WithMaxHold(%v): must be 1s..12h, or 0 for the broker's default (one hour)", cfg.maxHold)}
	}
	if cfg.clientName == "" {
		host, _ := os.Hostname()
		cfg.clientName = fmt.Sprintf("sluice-worker %s/%d", host, os.Getpid())
	}
	if len(cfg.clientName) > 128 {
		// Cut at a character's boundary: a cut inside one is no text.
		n := 128
		for n > 0 && !utf8.RuneStart(cfg.clientName[n]) {
			n--
		}
		cfg.clientName = cfg.clientName[:n]
	}
	opt := stream.Options{}
	conn := c.Connection()
	if cfg.stream != nil {
		opt = *cfg.stream
	} else {
		opt = stream.Options{Token: conn.Token, TLS: conn.TLS, UserAgent: conn.UserAgent}
	}
	return &streamSource{native: native, queue: queue, endpoint: conn.BaseURL, opts: opt, cfg: cfg,
		credit: maxReceive, held: map[string]*streamHeld{}}
}

// badSource is NewSource's answer to options it cannot use: every call
// fails with err, and Config.Validate refuses it.
type badSource struct{ err error }

func (b badSource) Receive(context.Context, ReceiveRequest) ([]*Message, error) { return nil, b.err }
func (b badSource) Settle(context.Context, *Message, Outcome) error             { return b.err }
func (b badSource) Extend(context.Context, []*Message, time.Duration) ([]error, error) {
	return nil, b.err
}
func (b badSource) Backlog(context.Context) (int64, error) { return 0, b.err }
func (b badSource) sourceError() error                     { return b.err }

// streamSource is NewSource's StreamSource. The stream in use is cur (nil
// when none is open); each message received is remembered with the stream
// it came from until it is settled, so that a message of a stream that has
// ended goes through the native API.
type streamSource struct {
	native   *nativeSource
	queue    string
	endpoint string
	opts     stream.Options
	cfg      sourceConfig

	openMu   sync.Mutex // one open (or Close) at a time
	creditMu sync.Mutex // one credit change sent at a time, the latest last

	mu     sync.Mutex
	cur    *streamConn
	credit int
	lease  time.Duration
	held   map[string]*streamHeld // by receipt
}

// streamConn is one stream and its connection.
type streamConn struct {
	c       *stream.Client
	con     *stream.Consumer
	maxHold time.Duration
}

// live reports whether the stream has not ended.
func (sc *streamConn) live() bool { return sc.con.Err() == nil }

// close ends the stream and its connection.
func (sc *streamConn) close() {
	_ = sc.con.Close()
	_ = sc.c.Close()
}

// streamHeld is a received message not yet settled.
type streamHeld struct {
	conn *streamConn
	at   time.Time // when it was received
}

var (
	_ StreamSource = (*streamSource)(nil)
	_ Backlogger   = (*streamSource)(nil)
)

// open returns the stream in use, opening one (on a new connection) when
// there is none or it has ended.
func (s *streamSource) open(ctx context.Context, lease time.Duration) (*streamConn, error) {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.mu.Lock()
	cur := s.cur
	if cur != nil && cur.live() {
		s.mu.Unlock()
		return cur, nil
	}
	s.cur = nil
	if lease > 0 {
		s.lease = lease
	}
	credit, lease := s.credit, s.lease
	s.mu.Unlock()
	if cur != nil {
		cur.close()
	}

	c, err := stream.Dial(s.endpoint, s.opts)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, streamOpenTimeout)
	defer cancel()
	con, err := c.Consume(octx, stream.ConsumeOptions{Queue: s.queue, Credit: credit, Lease: lease,
		MaxHold: s.cfg.maxHold, ClientName: s.cfg.clientName})
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("worker: opening a stream on queue %s at %s: %w", s.queue, s.endpoint, err)
	}
	sc := &streamConn{c: c, con: con, maxHold: con.MaxHold()}
	// A credit set while the stream opened is sent now.
	s.creditMu.Lock()
	defer s.creditMu.Unlock()
	s.mu.Lock()
	s.cur = sc
	now := s.credit
	s.mu.Unlock()
	if now != credit {
		_ = con.SetCredit(now)
	}
	return sc, nil
}

// ended forgets sc as the stream in use: the next Receive opens another.
func (s *streamSource) ended(sc *streamConn) {
	s.mu.Lock()
	if s.cur == sc {
		s.cur = nil
	}
	s.mu.Unlock()
	sc.close()
}

// Receive answers up to req.Max messages the stream delivered, waiting up
// to req.Wait for a first one (Wait 0: only those delivered already). It
// opens the stream, with req.Lease, when none is open. A stream that ended
// is the error (after the messages it delivered before its end).
func (s *streamSource) Receive(ctx context.Context, req ReceiveRequest) ([]*Message, error) {
	sc, err := s.open(ctx, req.Lease)
	if err != nil {
		return nil, err
	}
	n := max(req.Max, 1)
	wctx, cancel := context.WithTimeout(ctx, max(req.Wait, 0))
	defer cancel()
	var out []*Message
	for len(out) < n {
		m, err := sc.con.Receive(wctx)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return out, ctx.Err()
			case wctx.Err() != nil:
				return out, nil
			}
			s.ended(sc)
			if len(out) > 0 {
				return out, nil
			}
			return nil, fmt.Errorf("worker: the stream on queue %s ended (a new one opens at the next receive): %w", s.queue, err)
		}
		out = append(out, s.message(sc, m))
		if len(out) == 1 {
			// The first came: take what else is there without waiting.
			cancel()
		}
	}
	return out, nil
}

// message converts a delivery and remembers its stream.
func (s *streamSource) message(sc *streamConn, m *streampb.Message) *Message {
	var attrs map[string]Attribute
	if len(m.GetAttributes()) > 0 {
		attrs = make(map[string]Attribute, len(m.GetAttributes()))
		for name, a := range m.GetAttributes() {
			attrs[name] = Attribute{Type: a.GetType(), Value: a.GetStringValue(), Binary: a.GetBinaryValue()}
		}
	}
	s.mu.Lock()
	s.held[m.GetReceipt()] = &streamHeld{conn: sc, at: time.Now()}
	s.mu.Unlock()
	return &Message{
		ID: m.GetId(), Queue: s.queue, Body: []byte(m.GetBody()), Attributes: attrs,
		ReceiveCount: int(m.GetReceiveCount()), Attempts: int(m.GetAttempts()), MaxAttempts: int(m.GetMaxAttempts()),
		Priority: int(m.GetPriority()), CorrelationID: m.GetCorrelationId(), TraceContext: m.GetTraceContext(),
		GroupID: m.GetGroupId(), SentAt: time.UnixMilli(m.GetSentAtUnixMs()), FailureReason: m.GetFailureReason(),
		Receipt: m.GetReceipt(),
	}
}

// Settle applies o to m on the stream that delivered it, or through the
// native API when that stream has ended (or ends before its answer).
func (s *streamSource) Settle(ctx context.Context, m *Message, o Outcome) error {
	s.mu.Lock()
	h := s.held[m.Receipt]
	delete(s.held, m.Receipt)
	s.mu.Unlock()
	if h == nil || !h.conn.live() {
		return s.native.Settle(ctx, m, o)
	}
	err := settleOnStream(ctx, h.conn.con, m.Receipt, o)
	var se *stream.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return streamLeaseError(se)
	case ctx.Err() != nil:
		return err
	}
	// The stream ended first: its messages' leases run on when the broker
	// went away, and the native API settles them.
	return s.native.Settle(ctx, m, o)
}

// settleOnStream sends one settlement.
func settleOnStream(ctx context.Context, con *stream.Consumer, receipt string, o Outcome) error {
	delay := max(o.Delay, 0)
	switch o.Kind {
	case KindAck:
		return con.Ack(ctx, receipt)
	case KindNack:
		if delay == 0 {
			return con.Nack(ctx, receipt, o.Reason, -1) // the queue's retry policy
		}
		return con.Nack(ctx, receipt, o.Reason, ceilSeconds(delay))
	case KindSnooze:
		return con.Snooze(ctx, receipt, ceilSeconds(delay))
	case KindRelease:
		return con.Release(ctx, receipt)
	case KindDeadLetter:
		return con.DeadLetter(ctx, receipt, o.Reason)
	}
	return fmt.Errorf("worker: outcome kind %d is none of KindAck..KindDeadLetter", o.Kind)
}

// ceilSeconds rounds d up to whole seconds (the stream's unit).
func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// streamLeaseError makes a settlement's error on an ended lease
// ErrLeaseLost (the broker's error wrapped beside it).
func streamLeaseError(e *stream.Error) error {
	lost := e.Code == "message_not_in_flight" || e.Code == "invalid_receipt" ||
		(e.Code == "invalid_parameter" && (staleReceiptText(e.Message) || strings.Contains(strings.ToLower(e.Message), "not held by this stream")))
	if lost {
		return fmt.Errorf("%w: %w", ErrLeaseLost, e)
	}
	return e
}

// Extend answers for each message: nil for those a live stream holds (the
// broker extends their leases), ErrLeaseLost for those held past the
// stream's maximum hold (the broker lets their lease end), and for the
// messages of a stream that has ended, the native API's extend.
func (s *streamSource) Extend(ctx context.Context, msgs []*Message, lease time.Duration) ([]error, error) {
	errs := make([]error, len(msgs))
	var orphans []*Message
	var at []int
	now := time.Now()
	s.mu.Lock()
	for i, m := range msgs {
		h := s.held[m.Receipt]
		switch {
		case h == nil || !h.conn.live():
			orphans = append(orphans, m)
			at = append(at, i)
		case now.Sub(h.at) >= h.conn.maxHold:
			// The pool loses the message on this answer and never settles
			// it, so its entry goes now (kept, it stayed until Close).
			delete(s.held, m.Receipt)
			errs[i] = fmt.Errorf("%w: held past the stream's maximum hold (%v)", ErrLeaseLost, h.conn.maxHold)
		}
	}
	s.mu.Unlock()
	if len(orphans) == 0 {
		return errs, nil
	}
	oerrs, err := s.native.Extend(ctx, orphans, lease)
	for j, e := range oerrs {
		errs[at[j]] = e
	}
	return errs, err
}

// Backlog answers the queue's visible messages (the native API's stats).
func (s *streamSource) Backlog(ctx context.Context) (int64, error) { return s.native.Backlog(ctx) }

// SetCredit sets the stream's credit, now on the stream in use and later
// on the streams opened.
func (s *streamSource) SetCredit(n int) {
	n = min(max(n, 0), 10000)
	s.creditMu.Lock()
	defer s.creditMu.Unlock()
	s.mu.Lock()
	s.credit = n
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		// A stream that has ended refuses it; the next one opens with it.
		_ = cur.con.SetCredit(n)
	}
}

// Stop sets the credit to 0, waits (up to half of ctx's time left, at most
// 5 s) for the broker to answer an empty frame sent after it, and releases
// what was delivered and not received.
func (s *streamSource) Stop(ctx context.Context) error {
	s.creditMu.Lock()
	s.mu.Lock()
	s.credit = 0
	cur := s.cur
	s.mu.Unlock()
	if cur == nil || !cur.live() {
		s.creditMu.Unlock()
		return nil
	}
	_ = cur.con.SetCredit(0)
	s.creditMu.Unlock()
	// The broker answers the empty frame after reading the credit frame
	// and sending every message it handed the stream: all have arrived by
	// then, and are released below rather than handed back as a
	// disconnected stream's failures when the stream closes.
	// Half of what is left of ctx (at most 5 s) goes to the wait, so that
	// the release below still has time.
	wait := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	sctx, cancel := context.WithTimeout(ctx, wait)
	_ = cur.con.Sync(sctx)
	cancel()
	return releaseUnreceived(ctx, cur.con)
}

// releaseUnreceived releases the messages con delivered that no Receive
// took.
func releaseUnreceived(ctx context.Context, con *stream.Consumer) error {
	var rel []*streampb.Settlement
	now, cancel := context.WithCancel(ctx)
	cancel()
	for {
		m, err := con.Receive(now)
		if err != nil {
			break
		}
		rel = append(rel, &streampb.Settlement{Receipt: m.GetReceipt(), Action: &streampb.Settlement_Release{Release: &streampb.Release{}}})
	}
	if len(rel) == 0 {
		return nil
	}
	if _, err := con.Settle(ctx, rel...); err != nil {
		return fmt.Errorf("worker: releasing %d messages the stream delivered and the pool did not receive: %w", len(rel), err)
	}
	return nil
}

// Close stops the stream (Stop) and ends it and its connection.
func (s *streamSource) Close(ctx context.Context) error {
	err := s.Stop(ctx)
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.mu.Lock()
	cur := s.cur
	s.cur = nil
	s.held = map[string]*streamHeld{}
	s.mu.Unlock()
	if cur != nil {
		cur.close()
	}
	return err
}
