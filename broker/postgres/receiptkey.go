package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicemq/sluice/broker/model"
)

// loadReceipts returns the codec of the schema's receipt key: the one row of
// receipt_keys (migration 9). The first broker to open the schema inserts a
// new random key; every later one (ON CONFLICT DO NOTHING) reads the same
// row, so all brokers on the schema sign and verify receipt handles alike.
func loadReceipts(ctx context.Context, pool *pgxpool.Pool) (*model.ReceiptCodec, error) {
	fresh, err := model.NewReceiptKey()
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `INSERT INTO receipt_keys (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, fresh); err != nil {
		return nil, fmt.Errorf("postgres: store the receipt key: %w", err)
	}
	var key []byte
	if err := pool.QueryRow(ctx, `SELECT key FROM receipt_keys WHERE id = 1`).Scan(&key); err != nil {
		return nil, fmt.Errorf("postgres: read the receipt key: %w", err)
	}
	codec, err := model.NewReceiptCodec(key)
	if err != nil {
		return nil, fmt.Errorf("postgres: the stored receipt key: %w", err)
	}
	return codec, nil
}

// Receipts returns the codec of the schema's receipt key.
func (b *Backend) Receipts() *model.ReceiptCodec { return b.receipts }
