package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// waiter is one waiting receive on this broker. ch (buffered 1) is signalled
// to make it look again; wakeAt is when its own timer fires (zero while it
// is attempting: then any change wakes it).
type waiter struct {
	ch chan struct{}
	// max is how many messages the receive takes at most (its MaxMessages):
	// wakeSome counts a woken receive for that many; share is how many of
	// the messages that woke it it was counted for (what it passes on if it
	// ends before it looks).
	max, share int
	wakeAt     time.Time
	// missed is the earliest deadline a change announced while the
	// waiter was attempting (wakeAt zero), which its look may have read
	// too early to see; arm wakes it by then.
	missed time.Time
}

// waiters are this broker's waiting receives by queue id, guarded by mu.
type waiters struct {
	mu      sync.Mutex
	byQueue map[int64]map[*waiter]struct{}
}

func (ws *waiters) init() { ws.byQueue = map[int64]map[*waiter]struct{}{} }

func (ws *waiters) add(qid int64, max int) *waiter {
	w := &waiter{ch: make(chan struct{}, 1), max: max}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	m := ws.byQueue[qid]
	if m == nil {
		m = map[*waiter]struct{}{}
		ws.byQueue[qid] = m
	}
	m[w] = struct{}{}
	return w
}

func (ws *waiters) remove(qid int64, w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.byQueue[qid], w)
	if len(ws.byQueue[qid]) == 0 {
		delete(ws.byQueue, qid)
	}
}

// arm sets when w's timer fires (zero: w is attempting, and any change
// concerns it) and returns that time: at, or the deadline w missed while it
// attempted when that is earlier.
func (ws *waiters) arm(w *waiter, at time.Time) time.Time {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !at.IsZero() && !w.missed.IsZero() && w.missed.Before(at) {
		at = w.missed
	}
	w.wakeAt, w.missed = at, time.Time{}
	return at
}

// wake signals the waiters of qid whose timer fires after due (all of them
// when due is zero): a message is ready at due, or a deadline moved there.
func (ws *waiters) wake(qid int64, due time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.byQueue[qid] {
		if w.wakeAt.IsZero() && !due.IsZero() {
			// Attempting: a deadline (a lease taken or moved, a
			// delay) does not need another look now, only a timer
			// no later than due (arm). Signalling it made every
			// attempting receive look again after each claim.
			if w.missed.IsZero() || due.Before(w.missed) {
				w.missed = due
			}
			continue
		}
		if due.IsZero() || due.Before(w.wakeAt) {
			select {
			case w.ch <- struct{}{}:
				w.share = 1
			default:
			}
		}
	}
}

// wakeSome signals the waiters of qid after a commit that made n messages
// ready now: sleeping ones not signalled yet until their MaxMessages add up
// to n (one receive of up to 10 for a send of 10 messages, not 10
// receives), or, when those cannot take n, also every waiter that is
// attempting (wakeAt zero: it looks once more after its attempt, so none of them misses the
// messages for a look that began before the commit). A woken receive
// claims what it can of the n messages or finds them claimed by another
// receive; waking every waiter for each message made them all look and all
// but a few find nothing. A woken receive that ends before it looks passes
// its wake-up on (passOn).
func (ws *waiters) wakeSome(qid int64, n int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.byQueue[qid] {
		if n > 0 && !w.wakeAt.IsZero() && len(w.ch) == 0 {
			w.ch <- struct{}{}
			w.share = min(n, max(1, w.max))
			n -= w.share
		}
	}
	if n <= 0 {
		return
	}
	ws.signalAttempting(qid)
}

// passOn gives a wake-up that a receive of qid took but will not act on
// (it is ending) to others: as wakeSome does for the n messages the ending
// receive was counted for (sleeping waiters not signalled yet, or,
// when they cannot take that many, every waiter that is attempting: its
// look may have begun before the commit that made the messages ready, and
// wakeSome may have signalled only the receive now ending).
func (ws *waiters) passOn(qid int64, n int) { ws.wakeSome(qid, max(1, n)) }

// shareOf is how many messages w's latest wake-up counted it for
// (wakeSome; 1 for any other wake-up).
func (ws *waiters) shareOf(w *waiter) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return w.share
}

// signalAttempting signals every waiter of qid that is attempting (wakeAt
// zero): it looks once more after its attempt. ws.mu is held.
func (ws *waiters) signalAttempting(qid int64) {
	for w := range ws.byQueue[qid] {
		if w.wakeAt.IsZero() {
			select {
			case w.ch <- struct{}{}:
				w.share = 1
			default:
			}
		}
	}
}

// wakeAll signals every waiter (after the listener reconnects: notifications
// may have been missed).
func (ws *waiters) wakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, m := range ws.byQueue {
		for w := range m {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

// changed is called after a commit that made a message of queue qid ready at
// due (zero: now), moved a deadline to due, or deleted the queue (force). It
// wakes this broker's waiters at once and, when other brokers' waiters could
// need it sooner than their next poll, asks the notifier to tell them.
func (b *Backend) changed(qid int64, due time.Time, force bool) {
	b.waiters.wake(qid, due)
	if force || due.IsZero() || due.Before(b.clock.Now().Add(b.cfg.PollInterval)) {
		b.notifier.add(qid)
	}
}

// readied is called after a commit that made n messages of queue qid ready
// now (a send to a queue without a MaxReceivesPerSecond: see Send): it wakes
// n of this broker's sleeping waiters (wakeSome) and asks the notifier to
// tell the other brokers.
func (b *Backend) readied(qid int64, n int) {
	b.waiters.wakeSome(qid, n)
	b.notifier.add(qid)
}

// notifier sends this broker's wake-ups to the other brokers. It keeps NOTIFY
// out of the callers' transactions: a NOTIFY takes a cluster-wide lock at
// commit, which would serialize every send's commit. Instead, after a commit
// the queue id joins a pending set; one goroutine sends the whole set in one
// NOTIFY on its own connection (with synchronous_commit off: a wake-up is a
// hint), then waits NotifyInterval before the next. A burst of sends on one
// queue thus costs one NOTIFY per interval.
type notifier struct {
	b       *Backend
	cc      *pgx.ConnConfig
	mu      sync.Mutex
	pending map[int64]struct{}
	kick    chan struct{}
}

func newNotifier(b *Backend, cc *pgx.ConnConfig) *notifier {
	cc = cc.Copy()
	cc.RuntimeParams["synchronous_commit"] = "off"
	return &notifier{b: b, cc: cc, pending: map[int64]struct{}{}, kick: make(chan struct{}, 1)}
}

func (n *notifier) add(qid int64) {
	n.mu.Lock()
	n.pending[qid] = struct{}{}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// maxPayload keeps a NOTIFY payload under PostgreSQL's 8000-byte limit.
const maxPayload = 7000

func (n *notifier) loop(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	pause := time.NewTimer(0)
	defer pause.Stop()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		n.mu.Lock()
		ids := make([]int64, 0, len(n.pending))
		for id := range n.pending {
			ids = append(ids, id)
		}
		clear(n.pending)
		n.mu.Unlock()
		for len(ids) > 0 {
			var sb strings.Builder
			sb.WriteString(n.b.id)
			for len(ids) > 0 && sb.Len() < maxPayload {
				sb.WriteByte(' ')
				sb.WriteString(strconv.FormatInt(ids[0], 10))
				ids = ids[1:]
			}
			var err error
			if conn == nil {
				conn, err = pgx.ConnectConfig(ctx, n.cc)
			}
			if err == nil {
				// Bounded like the pool's statements (deadline.go): behind
				// a partition the connection would otherwise take the
				// notifier with it for good.
				ectx, cancel := context.WithTimeout(ctx, n.b.answerTimeout())
				_, err = conn.Exec(ectx, "SELECT pg_notify($1, $2)", n.b.channel, sb.String())
				cancel()
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// Dropped: the other brokers' polls still find the messages.
				n.b.log.Warn("notify failed; other brokers will find the change by polling", "err", err)
				if conn != nil {
					conn.Close(context.Background())
					conn = nil
				}
				ids = nil
				pause.Reset(backoff)
				backoff = min(2*backoff, 5*time.Second)
				select {
				case <-ctx.Done():
					return
				case <-pause.C:
				}
				continue
			}
			backoff = 50 * time.Millisecond
		}
		if n.b.cfg.NotifyInterval > 0 {
			pause.Reset(n.b.cfg.NotifyInterval)
			select {
			case <-ctx.Done():
				return
			case <-pause.C:
			}
		}
	}
}

// listenLoop holds this broker's listening connection: it LISTENs on the
// schema's channel and wakes the local waiters of the queues other brokers
// name. On a connection failure it reconnects with backoff and then wakes
// every waiter, since notifications may have been lost meanwhile.
func (b *Backend) listenLoop(ctx context.Context, cc *pgx.ConnConfig) {
	backoff := 50 * time.Millisecond
	retry := time.NewTimer(0)
	defer retry.Stop()
	<-retry.C
	first := true
	for ctx.Err() == nil {
		err := b.listenOnce(ctx, cc, &first)
		if ctx.Err() != nil {
			return
		}
		b.listenLost.Add(1)
		b.log.Warn("listener connection lost; reconnecting (waiting receives poll meanwhile)", "err", err)
		retry.Reset(backoff)
		backoff = min(2*backoff, 5*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		}
	}
}

// listenCheck is how long the listening connection may stay quiet before
// it is pinged (Config.listenCheck replaces it in tests).
const listenCheck = 15 * time.Second

func (b *Backend) listenOnce(ctx context.Context, cc *pgx.ConnConfig, first *bool) error {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// Bounded like the ping below: a partition right after the connect
	// would otherwise hold the listener here, deaf, for good.
	lctx, cancel := context.WithTimeout(ctx, b.answerTimeout())
	_, err = conn.Exec(lctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize())
	cancel()
	if err != nil {
		return err
	}
	if !*first {
		b.waiters.wakeAll()
	}
	*first = false
	for {
		// A quiet connection is asked to answer every listenCheck: a
		// partition that TCP does not see (a proxy or a NAT that keeps
		// the connection and forwards nothing) would otherwise leave this
		// broker deaf to the others for good, its waiting receives woken
		// only by their polls. A wait that times out keeps the connection
		// (pgconn's deadline handler); the ping has the answer deadline.
		wctx, cancel := context.WithTimeout(ctx, cmp.Or(b.cfg.listenCheck, listenCheck))
		nt, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			pctx, cancel := context.WithTimeout(ctx, b.answerTimeout())
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("the listening connection did not answer a ping within %v: %w", b.answerTimeout(), err)
			}
			continue
		}
		if err != nil {
			return err
		}
		fields := strings.Fields(nt.Payload)
		if len(fields) == 0 || fields[0] == b.id {
			continue // our own: local waiters were woken at commit
		}
		for _, f := range fields[1:] {
			if id, err := strconv.ParseInt(f, 10, 64); err == nil {
				b.waiters.wake(id, time.Time{})
			}
		}
	}
}
