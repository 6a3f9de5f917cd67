package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
)

// recordStates maps message_records.state to the record's state.
var recordStates = map[string]model.JobState{"c": model.JobCompleted, "e": model.JobExpired, "p": model.JobReplayed}

// LookupMessage implements storage.Backend: the live row of the message
// (messages_message_id), read as Browse reads rows, else its record in
// message_records (before its due time).
func (b *Backend) LookupMessage(ctx context.Context, name model.QueueRef, id string) (_ model.MessageLookup, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.MessageLookup{}, err
	}
	defer b.life.Done()
	q, err := b.getQueue(ctx, b.pool, name)
	if err != nil {
		return model.MessageLookup{}, err
	}
	if !messageIDRe.MatchString(id) {
		return model.MessageLookup{}, nil // no message has such an id
	}
	id = strings.ToLower(id)
	l, ended, err := b.lookupLive(ctx, q, id)
	for try := 0; err == nil && ended && hasRetryOrRedrive(q.cfg) && try < 3; try++ {
		// A lease that ended on a queue with a policy is planned first (as
		// Delete does): its message may be backing off or dead-lettered by
		// now, which the row shows once planned. promote skips the rows
		// other transactions hold: when the row is still unplanned, one
		// held it (the sweeper planning it, most likely), and the lookup
		// read the row as it was before. Wait for that transaction (a
		// shared lock, taken and let go by one autocommit statement), then
		// plan and read again.
		if try > 0 {
			if _, err := b.pool.Exec(ctx, `SELECT 1 FROM messages WHERE queue_id = $1 AND message_id = $2::uuid FOR SHARE`,
				q.mid, id); err != nil {
				return model.MessageLookup{}, dbErr("lookup message", err)
			}
		}
		moved, _, perr := b.promote(ctx, q)
		if perr != nil {
			return model.MessageLookup{}, perr
		}
		b.deadLettered(ctx, q, moved)
		l, ended, err = b.lookupLive(ctx, q, id)
	}
	if err != nil || l.Live != nil {
		return l, err
	}
	var rec model.MessageRecord
	var st string
	var replayedAs, reason, source *string
	err = b.pool.QueryRow(ctx, `SELECT state::text, at, attempts, result, replayed_as, reason, source FROM message_records
		WHERE queue_id = $2 AND message_id = $3::uuid AND due > `+nowSQL, b.tnow(), q.id, id).
		Scan(&st, &rec.At, &rec.Attempts, &rec.Result, &replayedAs, &reason, &source)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.MessageLookup{}, nil
	}
	if err != nil {
		return model.MessageLookup{}, dbErr("lookup message record", err)
	}
	rec.ID, rec.State = id, recordStates[st]
	if replayedAs != nil {
		rec.ReplayedAs = *replayedAs
	}
	if reason != nil {
		rec.Reason = *reason
	}
	if source != nil {
		rec.Source = *source
	}
	return model.MessageLookup{Record: &rec}, nil
}

// pushFailureSQL is the SQL of failure history h (a messages.failures
// value) with one more failure of reason r at instant at (SQL expressions of
// text and timestamptz): the count goes up by one and the list keeps its
// last model.MaxFailures entries (it held at most that many before, so one
// drop is enough).
func pushFailureSQL(h, r, at string) string {
	l := "(coalesce(" + h + "->'list', '[]') || jsonb_build_array(jsonb_build_object('reason', " + r + "::text, 'at', " + at + "::timestamptz)))"
	return "jsonb_build_object('count', coalesce((" + h + "->>'count')::bigint, 0) + 1, 'list', CASE WHEN jsonb_array_length(" + l + ") > " +
		strconv.Itoa(model.MaxFailures) + " THEN " + l + " - 0 ELSE " + l + " END)"
}

// failuresJSON is a messages.failures value (pushFailureSQL).
type failuresJSON struct {
	Count int `json:"count"`
	List  []struct {
		Reason string    `json:"reason"`
		At     time.Time `json:"at"`
	} `json:"list"`
}

// lookupLive reads the live row of message id of queue q (LookupMessage):
// ended tells that it is in flight with its lease over (not planned yet).
func (b *Backend) lookupLive(ctx context.Context, q queueRow, id string) (_ model.MessageLookup, ended bool, err error) {
	row := b.pool.QueryRow(ctx, `SELECT state::text, visible_at, `+nowSQL+`, failures, `+msgCols("m")+` FROM messages m
		WHERE queue_id = $2 AND message_id = $3::uuid AND sent_at > `+nowSQL+` - $4 * interval '1 microsecond'
			AND NOT (coalesce(expires_at <= `+nowSQL+`, false) AND NOT (state = 'i' AND visible_at > `+nowSQL+`))
		LIMIT 1`, b.tnow(), q.mid, id, micros(q.cfg.Retention))
	var state rowState
	var visibleAt, now time.Time
	var h *failuresJSON
	_, _, d, err := b.scanDelivery(row.Scan, []any{&state, &visibleAt, &now, &h}, q)
	switch {
	case err == nil:
		// A ready row's visible_at is when it became visible (a lookup
		// answers it; Browse does not).
		bm := model.BrowsedMessage{Message: d.Message, State: model.StateVisible, VisibleAt: visibleAt}
		if state != rowReady && visibleAt.After(now) {
			bm.State, bm.VisibleAt = model.StateDelayed, visibleAt
			if state == rowInFlight {
				bm.State = model.StateInFlight
			}
		}
		l := model.MessageLookup{Live: &bm}
		if h != nil {
			l.FailureCount = h.Count
			for _, f := range h.List {
				l.Failures = append(l.Failures, model.Failure{Reason: f.Reason, At: f.At})
			}
		}
		return l, state == rowInFlight && !visibleAt.After(now), nil
	case !errors.Is(err, pgx.ErrNoRows):
		return model.MessageLookup{}, false, dbErr("lookup message", err)
	}
	return model.MessageLookup{}, false, nil
}
