package embedded

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// keyReceiptKey holds the store's receipt key (model.ReceiptKeySize
// random bytes), written once when the store is first opened.
var keyReceiptKey = []byte{pfxCounter, 'r', 'k', 'e', 'y'}

// loadReceipts reads the store's receipt key, or makes and durably stores
// one when there is none (a new store, or one from before signed receipt
// handles), and returns its codec. It runs in Open before any other
// goroutine exists.
func (b *Backend) loadReceipts() (*model.ReceiptCodec, error) {
	v, c, err := b.db.Get(keyReceiptKey)
	switch {
	case err == nil:
		key := bytes.Clone(v)
		_ = c.Close()
		codec, err := model.NewReceiptCodec(key)
		if err != nil {
			return nil, fmt.Errorf("embedded: %w: %w", errCorrupt, err)
		}
		return codec, nil
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, err
	}
	key, err := model.NewReceiptKey()
	if err != nil {
		return nil, err
	}
	if err := b.db.Set(keyReceiptKey, key, pebble.Sync); err != nil {
		return nil, err
	}
	return model.NewReceiptCodec(key)
}

// Receipts returns the codec of the store's receipt key.
func (b *Backend) Receipts() *model.ReceiptCodec { return b.receipts }
