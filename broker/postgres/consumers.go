package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// RecordConsumers implements storage.Backend: in one transaction, the
// expired rows of every broker and broker's own rows are deleted, and recs
// inserted.
func (b *Backend) RecordConsumers(ctx context.Context, broker string, recs []model.ConsumerRecord, ttl time.Duration) (err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.life.Done()
	ids := make([]string, len(recs))
	accounts := make([]string, len(recs))
	queues := make([]string, len(recs))
	infos := make([]string, len(recs))
	for i, r := range recs {
		j, err := json.Marshal(r.Info)
		if err != nil {
			return err
		}
		ids[i], accounts[i], queues[i], infos[i] = r.Info.ID, r.Ref.Account, r.Ref.Name, string(j)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return dbErr("record consumers", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(ctx, `DELETE FROM consumers WHERE broker = $2 OR expires_at < `+nowSQL, b.tnow(), broker); err != nil {
		return dbErr("record consumers", err)
	}
	if len(recs) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO consumers (broker, id, account, queue, info, expires_at)
			SELECT $2, u.id, u.account, u.queue, u.info::jsonb, `+nowSQL+` + $7 * interval '1 microsecond'
			FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS u(id, account, queue, info)`,
			b.tnow(), broker, ids, accounts, queues, infos, micros(ttl)); err != nil {
			return dbErr("record consumers", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return dbErr("record consumers", err)
	}
	return nil
}

// ListConsumers implements storage.Backend.
func (b *Backend) ListConsumers(ctx context.Context, q model.QueueRef) (_ []model.ConsumerInfo, err error) {
	defer unavailable(ctx, &err)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.life.Done()
	rows, err := b.pool.Query(ctx, `SELECT info FROM consumers
		WHERE account = $2 AND queue = $3 AND expires_at >= `+nowSQL, b.tnow(), q.Account, q.Name)
	if err != nil {
		return nil, dbErr("list consumers", err)
	}
	defer rows.Close()
	var out []model.ConsumerInfo
	for rows.Next() {
		var j []byte
		if err := rows.Scan(&j); err != nil {
			return nil, dbErr("list consumers", err)
		}
		var info model.ConsumerInfo
		if err := json.Unmarshal(j, &info); err != nil {
			return nil, dbErr("list consumers", err)
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("list consumers", err)
	}
	return out, nil
}
