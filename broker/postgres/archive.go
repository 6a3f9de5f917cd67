package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/model"
)

// The archive (package archive has the files and the exactly-once rule):
// each broker archives what its own sweeper removes, in its own files (its
// archive id, Config.Archive.ID, in their names) and with its own cursor,
// a row of archive_cursors (migration 17). The sweeper's archive step
// (sweepArchive) locks a batch of the expired rows of ArchiveExpired
// queues (FOR UPDATE SKIP LOCKED: two brokers' sweepers never take the same
// row, so each message is archived by exactly one), writes their lines and
// syncs the archive, then deletes the rows and sets its cursor row in the
// same transaction. A crash (or a lost connection) before the commit
// leaves the rows, unlocked, and the old cursor: this broker cuts its
// archive back to the cursor it reads from the database (at its next start,
// or before its next archive step), and whichever sweeper takes the rows
// then archives them, once. The retention sweep proper (sweepOnce) leaves
// the rows of ArchiveExpired queues to this step.
//
// While the archive cannot be written (a full disk: archive.Writer.Available
// is false for a minute after a failed write) or when the broker has no
// archive, the step deletes the rows all the same and counts them
// (model.CountArchiveFailed): the archive never holds a queue back.

// archiveBatchBytes bounds the bytes of messages (bodies and attributes,
// model.MessageSize, as the embedded store counts them) one archive step
// holds in memory (the lines until the archive's sync), as sweepBudget
// bounds its rows.
const archiveBatchBytes = 16 << 20

// openArchive opens the archive of cfg at the cursor the database holds for
// its id, and stores the cursor it starts at.
func openArchive(ctx context.Context, b *Backend, pool *pgxpool.Pool, cfg archive.Config) error {
	cfg = cfg.WithDefaults()
	cur, err := readArchiveCursor(ctx, pool, cfg.ID)
	if err != nil {
		return err
	}
	w, start, err := archive.Open(cfg, b.clock, b.log, cur)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if start != cur {
		if _, err := pool.Exec(ctx, upsertCursorSQL, cfg.ID, start.String()); err != nil {
			w.Close()
			return dbErr("store the archive cursor", err)
		}
	}
	b.archive, b.archiveID, b.archiveCur = w, cfg.ID, start
	return nil
}

const upsertCursorSQL = `INSERT INTO archive_cursors (archive_id, cursor) VALUES ($1, $2)
	ON CONFLICT (archive_id) DO UPDATE SET cursor = excluded.cursor`

// readArchiveCursor reads the cursor of archive id. FOR SHARE waits for a
// transaction that set it and has not ended: an archive step whose commit
// failed or timed out on the client may still be committing on the server
// (waiting for a synchronous standby, or its COMMIT on its way when the
// connection broke), and a plain read would see the old cursor, cut the
// batch, and then the commit delete its messages. (The step's transaction
// holds the row's lock from its upsert until it ends; statement_timeout
// bounds the wait, and the next step reads again.)
func readArchiveCursor(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id string) (archive.Cursor, error) {
	var s string
	err := q.QueryRow(ctx, `SELECT cursor FROM archive_cursors WHERE archive_id = $1 FOR SHARE`, id).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return archive.Cursor{}, nil
	}
	if err != nil {
		return archive.Cursor{}, dbErr("read the archive cursor", err)
	}
	return archive.ParseCursor(s)
}

// archiveQueueSQL selects the queues (alias q) whose retention archives.
const archiveQueueSQL = `coalesce(q.config->>'ArchiveExpired', '') = 'true'`

// sweepArchive is the sweeper's archive step: up to sweepBudget rows (and
// archiveBatchBytes of bodies) of ArchiveExpired queues past their
// retention, archived and deleted in one transaction. It reports whether
// more are due.
func (b *Backend) sweepArchive(ctx context.Context) (more bool, err error) {
	if b.archive != nil && b.archiveUnsure {
		// The last step's commit failed or is unknown: the database's
		// cursor says which it was.
		cur, err := readArchiveCursor(ctx, b.pool, b.archiveID)
		if err != nil {
			return false, err
		}
		if err := b.archive.Reconcile(cur); err != nil {
			return false, fmt.Errorf("postgres: %w", err)
		}
		b.archiveCur, b.archiveUnsure = cur, false
	}
	rows, err := b.pool.Query(ctx, `SELECT `+queueCols+` FROM queues q WHERE NOT q.deleted AND `+archiveQueueSQL+` ORDER BY q.id`)
	if err != nil {
		return false, dbErr("archive: queues", err)
	}
	var queues []queueRow
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			rows.Close()
			return false, dbErr("archive: queues", err)
		}
		queues = append(queues, q)
	}
	if err := rows.Err(); err != nil {
		return false, dbErr("archive: queues", err)
	}
	if len(queues) == 0 {
		return false, nil
	}
	now := b.clock.Now()
	on := b.archive != nil && b.archive.Available(now)
	var (
		lines  []model.ExportLine
		counts = map[int]*[2]int{} // queues index: archived, failed
		wake   []int64
		cur    archive.Cursor
	)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return false, dbErr("archive: begin", err)
	}
	foreign := false // the cursor row is not as this broker left it
	defer func() {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		switch {
		case cur.File != "" && foreign:
			// Certainly not committed: cut the batch back to this
			// broker's own cursor (the database's names another
			// broker's file).
			if rerr := b.archive.Reconcile(b.archiveCur); rerr != nil {
				b.log.Error("archive: cannot cut a batch that was not committed", "err", rerr)
			}
		case cur.File != "" && err != nil:
			// Appended, not known committed: the cursor in the database
			// says whether it was; until it is read, before the next
			// step.
			b.archiveUnsure = true
			if db, rerr := readArchiveCursor(context.WithoutCancel(ctx), b.pool, b.archiveID); rerr == nil && b.archive.Reconcile(db) == nil {
				b.archiveCur, b.archiveUnsure = db, false
			}
		}
	}()
	var ids []int64
	size := 0
	for i, q := range queues {
		if len(ids) >= sweepBudget || size >= archiveBatchBytes {
			more = true
			break
		}
		rows, err := tx.Query(ctx, `SELECT state::text, `+msgCols("m")+` FROM messages m
			WHERE queue_id = $2 AND sent_at <= `+nowSQL+` - $3 * interval '1 microsecond'
				AND NOT (coalesce(expires_at <= `+nowSQL+`, false) AND (state <> 'i' OR visible_at <= `+nowSQL+`))
			ORDER BY sent_at LIMIT $4 FOR UPDATE SKIP LOCKED`,
			b.tnow(), q.mid, micros(q.cfg.Retention), sweepBudget-len(ids))
		if err != nil {
			return false, dbErr("archive: read", err)
		}
		c := &[2]int{}
		counts[i] = c
		inflight := false
		for rows.Next() {
			var state rowState
			id, _, d, err := b.scanDelivery(rows.Scan, []any{&state}, q)
			if err != nil {
				rows.Close()
				return false, dbErr("archive: read", err)
			}
			ids = append(ids, id)
			inflight = inflight || state == rowInFlight
			if !on {
				c[1]++
				continue
			}
			lines = append(lines, model.ArchiveLine(&d.Message, model.QueueRef{Account: q.account, Name: q.name}.String(), now))
			size += model.MessageSize(d.Body, d.Message.Attributes)
			c[0]++
			if size >= archiveBatchBytes {
				more = true
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, dbErr("archive: read", err)
		}
		if len(ids) >= sweepBudget {
			more = true
		}
		if inflight && (q.cfg.Fifo || q.cfg.MaxInFlight > 0) {
			wake = append(wake, q.id)
		}
	}
	if len(ids) == 0 {
		return false, nil
	}
	if len(lines) > 0 {
		c, werr := b.archive.Append(lines)
		if werr != nil {
			// Removed without archive (the writer logged why).
			for _, n := range counts {
				n[0], n[1] = 0, n[0]+n[1]
			}
		} else {
			cur = c
			b.mu.Lock()
			fault := b.archiveFault
			b.mu.Unlock()
			if fault != nil {
				if err := fault(); err != nil {
					return false, err
				}
			}
		}
	}
	if _, err := tx.Exec(ctx, `
		WITH del AS (DELETE FROM messages WHERE id = ANY($1) RETURNING queue_id, state)
		INSERT INTO counts AS c (queue_id, shard, ready, inflight, delayed)
		SELECT queue_id, $2, -count(*) FILTER (WHERE state = 'r'),
			-count(*) FILTER (WHERE state = 'i'), -count(*) FILTER (WHERE state = 'd')
		FROM del GROUP BY queue_id ORDER BY queue_id
		ON CONFLICT (queue_id, shard) DO UPDATE SET ready = c.ready + excluded.ready,
			inflight = c.inflight + excluded.inflight, delayed = c.delayed + excluded.delayed`, ids, shard()); err != nil {
		return false, dbErr("archive: delete", err)
	}
	if cur.File != "" {
		// Only from the cursor this broker stored: another broker under
		// the same archive id (its own directory) moves it too, and a
		// read-back or a restart that reconciled this broker's files with
		// the other's cursor would cut or remove committed lines.
		tag, err := tx.Exec(ctx, `UPDATE archive_cursors SET cursor = $2 WHERE archive_id = $1 AND cursor = $3`,
			b.archiveID, cur.String(), b.archiveCur.String())
		if err != nil {
			return false, dbErr("archive: cursor", err)
		}
		if tag.RowsAffected() != 1 {
			// Not an error of the sweep: its other duties go on. The
			// step is rolled back (the deferred Rollback) and its batch
			// cut; the rows stay for another broker, or for this one
			// after a restart, which reads the cursor anew.
			foreign = true
			if now := b.clock.Now(); b.archiveForeignLogged.IsZero() || now.Sub(b.archiveForeignLogged) >= time.Minute {
				b.archiveForeignLogged = now
				b.log.Error("archive: this archive id's cursor in the database is not the one this broker stored: another broker archives under the same id (give each broker its own --archive-id), or the database lost this broker's last commits (a failover); this broker archives nothing, and leaves the expired messages of ArchiveExpired queues, until it is restarted",
					"archive_id", b.archiveID, "cursor", b.archiveCur.String())
			}
			return false, nil
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, dbErr("archive: commit", err)
	}
	if cur.File != "" {
		b.archive.Committed(cur)
		b.archiveCur = cur
		cur = archive.Cursor{} // known committed
	}
	for _, id := range wake {
		b.changed(id, time.Time{}, false)
	}
	if o := b.cfg.Observer; o != nil {
		for i, c := range counts {
			name := model.QueueRef{Account: queues[i].account, Name: queues[i].name}.String()
			if c[0] > 0 {
				o.Count(name, model.CountArchived, c[0])
			}
			if c[1] > 0 {
				o.Count(name, model.CountArchiveFailed, c[1])
			}
		}
	}
	return more, nil
}
