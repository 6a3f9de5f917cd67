package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Rate limits (model/config_limits.go: MaxInFlight, MaxReceivesPerSecond).
//
// The claims of a queue with a limit (QueueConfig.Limited) run in one
// transaction each that first locks the queue's queue_limits row (migration
// 13), so that they are serialized across every broker: each reads the
// in-flight count and the rate's instant after the claim before it
// committed, plans its room with plan.ClaimRoom, claims at most that many
// messages, and stores the instant moved by what it leased
// (plan.RateTaken) before it commits. A queue without limits pays nothing:
// its claim is the one statement it always was, with no row lock.
//
// A claim holding the row must not wait for what an application's open
// transaction holds (SendTx), or every receive of the queue would wait
// until that commits: a SendTx counts its messages on counter rows no
// broker statement picks (txShard), and a FIFO claim that finds every
// receivable group locked waits for one after its transaction, without the
// row (claimFifo). Its queue row, which a SendTx holds FOR SHARE, is why
// the row is in a table of its own (migration 13).
//
// A limited claim costs three round trips more than an unlimited one
// (BEGIN, the lock and reads, COMMIT) and one more when it leased messages
// on a queue with a rate (the instant's update); its claims wait for each
// other's commits, which a queue limited to a rate can afford.

// limitedClaim is a claim under its queue's limits: what the receive asks
// (Max, the front's cap) and what lockLimits read and planned.
type limitedClaim struct {
	max int
	cap int64
	// room is plan.ClaimRoom's answer; rateAt the stored instant (zero:
	// none yet); now the claim's instant, read once the row is locked
	// (lockLimitsSQL), which the claim leases at.
	room        plan.Room
	rateAt, now time.Time
}

// lockLimitsSQL are the statements of lockLimits, sent as one batch: the
// row is made if missing (a queue's first limited claim) and locked; the
// count is read by a statement that starts once the lock is held, so its
// snapshot holds every claim that held the lock before (READ COMMITTED: a
// statement sees what committed before it started). That statement also
// reads the claim's instant: statement_timestamp(), not now(), which is the
// transaction's start, before the wait for the lock (a rate planned as of
// then would let too few messages go and wake its receives late, and the
// leases would be shortened by the wait); the test clock's reading with a
// test clock, as nowSQL.
var lockLimitsSQL = [3]string{
	`INSERT INTO queue_limits (queue_id) VALUES ($1) ON CONFLICT (queue_id) DO NOTHING`,
	`SELECT rate_at FROM queue_limits WHERE queue_id = $1 FOR UPDATE`,
	`SELECT coalesce(sum(inflight), 0), coalesce($1::timestamptz, statement_timestamp()) FROM counts WHERE queue_id = $2`,
}

// lockLimits locks queue q's limits row in tx, reads its in-flight count
// and rate instant, and plans lc's room (lc.room) with plan.ClaimRoom: one
// round trip.
func (b *Backend) lockLimits(ctx context.Context, tx pgx.Tx, q queueRow, lc *limitedClaim) error {
	var batch pgx.Batch
	batch.Queue(lockLimitsSQL[0], q.id)
	batch.Queue(lockLimitsSQL[1], q.id)
	batch.Queue(lockLimitsSQL[2], b.tnow(), q.mid)
	br := tx.SendBatch(ctx, &batch)
	var rateAt *time.Time
	var inflight int64
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	if err := br.QueryRow().Scan(&rateAt); err != nil {
		br.Close()
		return err
	}
	if err := br.QueryRow().Scan(&inflight, &lc.now); err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	lc.rateAt = time.Time{}
	if rateAt != nil {
		lc.rateAt = *rateAt
	}
	var err error
	lc.room, err = plan.ClaimRoom(q.cfg, q.name, plan.ClaimFacts{Max: lc.max, InFlight: inflight, Cap: lc.cap,
		RateAt: lc.rateAt, Now: lc.now})
	return err
}

// storeRate stores queue q's rate instant after lc leased k messages, in
// lc's transaction tx: only on a queue with a rate, and only when k > 0.
// The instant is rounded up to the microsecond (timestamptz's precision),
// so that rounding never lets the rate run faster.
func (b *Backend) storeRate(ctx context.Context, tx pgx.Tx, q queueRow, lc *limitedClaim, k int) error {
	if q.cfg.ReceiveRate <= 0 || k <= 0 {
		return nil
	}
	at := plan.RateTaken(q.cfg, lc.rateAt, lc.now, k)
	if r := at.Truncate(time.Microsecond); !r.Equal(at) {
		at = r.Add(time.Microsecond)
	}
	_, err := tx.Exec(ctx, `UPDATE queue_limits SET rate_at = $2 WHERE queue_id = $1`, q.id, at)
	return err
}

// claimLimited is the claim of standard queue q under its limits (see the
// top of this file): lockLimits, the claim of at most the room, and the
// rate's instant, in one transaction. It returns what was leased and moved,
// how many it dropped past their time to live (leased messages only take
// the rate's room), and lc's plan (lc.room.N == 0: the limits left no room).
func (b *Backend) claimLimited(ctx context.Context, q queueRow, to claimTo, lc *limitedClaim, vis time.Duration) ([]model.Delivery, []movedLetter, int, error) {
	var out []model.Delivery
	var moved []movedLetter
	var dropped int
	err := retry(func() error {
		out, moved, dropped = nil, nil, 0
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if err := b.lockLimits(ctx, tx, q, lc); err != nil || lc.room.N == 0 {
				return err
			}
			var err error
			if out, moved, dropped, err = b.claim(ctx, tx, q, to, lc.now, lc.room.N, vis, nil, ""); err != nil {
				return err
			}
			return b.storeRate(ctx, tx, q, lc, len(out))
		})
	})
	if err != nil {
		return nil, nil, 0, txErr("receive", err)
	}
	return out, moved, dropped, nil
}

// limitWait is how a receive whose claim the limits left without room
// waits (held false: they did not hold it).
type limitWait struct {
	held bool
	// in, when > 0, is how long until the rate lets the next message go
	// (from the claim's instant: a broker's clock may differ from the
	// database's).
	in time.Duration
	// at is in counted on the broker's clock from its reading before the
	// claim (attempt): the receive wakes then. Counted from a reading
	// after the claim, it woke late by the claim's time, or, on a fake
	// clock moved meanwhile, by the move (RateLimits/RateServesEveryWaiter
	// missed the rate's instant so in CI).
	at time.Time
}

// wait is how a receive waits after lc planned no room.
func (lc *limitedClaim) wait() limitWait {
	if lc.room.N > 0 {
		return limitWait{}
	}
	w := limitWait{held: true}
	if !lc.room.Next.IsZero() {
		w.in = max(lc.room.Next.Sub(lc.now), time.Microsecond)
	}
	return w
}
