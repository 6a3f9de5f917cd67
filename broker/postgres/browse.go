package postgres

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
)

// browseChunk is how many rows one Browse statement reads while a filter
// keeps the page short (at most model.BrowseScanLimit per page in all).
const browseChunk = 500

// Browse implements storage.Backend: the queue's live messages in row id
// order (send order; newest first when asked), read in chunks without
// locking or changing them, filtered with model.BrowseFilter.Match after
// reading. The cursor is the last examined row id, as a decimal string. A
// page examines at most model.BrowseScanLimit rows: a filter that matches
// little returns a short page and a cursor to go on from.
func (b *Backend) Browse(ctx context.Context, name model.QueueRef, req model.BrowseRequest) (_ model.BrowsePage, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return model.BrowsePage{}, err
	}
	defer b.life.Done()
	q, err := b.getQueue(ctx, b.pool, name)
	if err != nil {
		return model.BrowsePage{}, err
	}
	var after *int64
	if req.After != "" {
		v, err := strconv.ParseInt(req.After, 10, 64)
		if err != nil || v < 0 {
			return model.BrowsePage{}, model.Errorf(model.ErrInvalidParameterValue, "The browse cursor %q is invalid.", req.After)
		}
		after = &v
	}
	limit := max(req.Limit, 1)
	cmp, order := ">", "ASC"
	if req.Newest {
		cmp, order = "<", "DESC"
	}
	sql := `SELECT state::text, visible_at, ` + nowSQL + `, ` + msgCols("m") + ` FROM messages m
		WHERE queue_id = $2 AND sent_at > ` + nowSQL + ` - $3 * interval '1 microsecond'
			AND NOT (coalesce(expires_at <= ` + nowSQL + `, false) AND NOT (state = 'i' AND visible_at > ` + nowSQL + `))
			AND ($4::bigint IS NULL OR id ` + cmp + ` $4)
		ORDER BY id ` + order + ` LIMIT $5`
	var page model.BrowsePage
	examined := 0
	for examined < model.BrowseScanLimit && len(page.Messages) < limit {
		n := min(browseChunk, model.BrowseScanLimit-examined)
		if req.Filter == (model.BrowseFilter{}) {
			n = limit - len(page.Messages) // every row is a match
		}
		rows, err := b.pool.Query(ctx, sql, b.tnow(), q.mid, micros(q.cfg.Retention), after, n)
		if err != nil {
			return model.BrowsePage{}, dbErr("browse", err)
		}
		got, cut := 0, false
		for rows.Next() {
			var state rowState
			var visibleAt, now time.Time
			id, _, d, err := b.scanDelivery(rows.Scan, []any{&state, &visibleAt, &now}, q)
			if err != nil {
				rows.Close()
				return model.BrowsePage{}, dbErr("browse", err)
			}
			got++
			if len(page.Messages) >= limit {
				cut = true // read past the page: not examined (the cursor stays before it)
				continue
			}
			examined++
			after = &id
			if !req.Filter.Match(&d.Message) {
				continue
			}
			bm := model.BrowsedMessage{Message: d.Message, State: model.StateVisible}
			if state != rowReady && visibleAt.After(now) {
				bm.State, bm.VisibleAt = model.StateDelayed, visibleAt
				if state == rowInFlight {
					bm.State = model.StateInFlight
				}
			}
			page.Messages = append(page.Messages, bm)
		}
		if err := rows.Err(); err != nil {
			return model.BrowsePage{}, dbErr("browse", err)
		}
		if got < n && !cut {
			return page, nil // the end of the queue: no next page
		}
	}
	if after != nil {
		page.Next = strconv.FormatInt(*after, 10)
	}
	return page, nil
}

// messageIDRe matches a message id (model.NewMessageID's form, a UUID as
// the messages table stores it); any other id names no message.
var messageIDRe = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// DeleteMessages implements storage.Backend: one DELETE by message id,
// whatever the messages' states, subtracting them from the counters and
// invalidating the FIFO receive attempts that returned them (a FIFO group
// an in-flight one held is free: the lock is derived from the rows). An id
// that is not a UUID names no message.
func (b *Backend) DeleteMessages(ctx context.Context, name model.QueueRef, ids []string) (_ []bool, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	q, err := b.getQueue(ctx, b.pool, name)
	if err != nil {
		return nil, err
	}
	found := make([]bool, len(ids))
	var uuids []string
	for _, id := range ids {
		if messageIDRe.MatchString(id) {
			uuids = append(uuids, strings.ToLower(id))
		}
	}
	if len(uuids) == 0 {
		return found, nil
	}
	var gone []string
	err = retry(func() error {
		rows, err := b.pool.Query(ctx, `WITH d AS (DELETE FROM messages WHERE queue_id = $1 AND message_id = ANY($2::uuid[])
				RETURNING message_id::text, state, attempt),
			inv AS (UPDATE attempts SET invalid = true
				WHERE queue_id = $1 AND attempt_id IN (SELECT attempt FROM d WHERE attempt IS NOT NULL)),
			cnt AS (`+countsFromStates("d", "$1", "$3")+`)
			SELECT message_id FROM d`, q.mid, uuids, shard())
		if err != nil {
			return err
		}
		gone, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, dbErr("delete messages", err)
	}
	deleted := make(map[string]bool, len(gone))
	for _, g := range gone {
		deleted[g] = true
	}
	for i, id := range ids {
		found[i] = deleted[strings.ToLower(id)]
	}
	if len(gone) > 0 {
		b.changed(q.id, time.Time{}, false) // a FIFO group may be free
	}
	return found, nil
}
