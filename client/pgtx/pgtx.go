// Package pgtx sends messages inside the application's own PostgreSQL
// transaction: the transactional enqueue of Sluice's PostgreSQL backend.
//
// When the application's data lives in the PostgreSQL that holds Sluice's
// queues (the brokers' schema, "sluice" by default), a message sent with
// Sender.Send in the application's pgx.Tx exists if and only if that
// transaction commits: no message about a change that rolled back, no
// change whose message was lost. The brokers' waiting receives are woken
// when it commits. There is no broker round trip and no outbox table to
// poll: Send writes the queue's rows itself, with the brokers' own rules
// and statements (postgres.SendTx).
//
// It needs the PostgreSQL backend: the embedded (Pebble) backend keeps its
// queues in the broker's process, where no application transaction can
// reach them.
//
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	_, _ = tx.Exec(ctx, `INSERT INTO orders ...`)
//	ids, err := sender.Send(ctx, tx, "emails", client.Message{Body: `{"order":42}`})
//	if err != nil { return err }
//	return tx.Commit(ctx) // the message exists from here on
//
// Send last, just before the commit: what it writes stays locked until the
// transaction ends (postgres.SendTx lists what).
//
// Package client does not import pgx or the broker; this subpackage does.
package pgtx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/client"
)

// Config names the Sluice a Sender writes to.
type Config struct {
	// Schema holds Sluice's tables: the brokers' postgres schema. Default
	// "sluice", which is what `sluice serve --store postgres://...` always
	// uses (the command has no flag to change it); a broker embedded as a
	// library may set another with postgres.Config.Schema, and then this
	// must name the same schema.
	Schema string
	// Account owns the queues: "" (the default) is the brokers' own
	// account, the one the SQS and native APIs create queues in.
	Account string
	// Clock turns a Message's DeliverAt into a delay. Default
	// model.RealClock.
	Clock model.Clock
}

// Validate checks c; zero fields take their defaults.
func (c Config) Validate() error {
	if err := (postgres.TxConfig{Schema: c.Schema}).Validate(); err != nil {
		return fmt.Errorf("pgtx: %w", err)
	}
	return nil
}

// Sender sends messages in callers' transactions. Safe for concurrent use
// (each call uses only its own transaction).
type Sender struct {
	cfg   postgres.TxConfig
	clock model.Clock
	err   error // cfg's validation error, answered by every Send
}

// New returns a Sender for cfg. An invalid cfg (Validate) makes every Send
// fail with its error.
func New(cfg Config) *Sender {
	s := &Sender{cfg: postgres.TxConfig{Schema: cfg.Schema, Account: cfg.Account, Clock: cfg.Clock}, clock: cfg.Clock, err: cfg.Validate()}
	if s.clock == nil {
		s.clock = model.RealClock{}
	}
	return s
}

// Send stores msgs (1 to 10, the batch limit; send more with more calls in
// the same transaction) into queue within tx and returns their message ids,
// in order. The messages become visible when tx commits; if tx rolls back
// they never existed.
//
// The messages are checked as the native API checks them (its envelope
// rule, model.EnvelopeEntry, then the queue's rules), with the same errors
// (errors.Is against the broker's sentinels: model.ErrQueueDoesNotExist,
// model.ErrThrottled for a full queue (*model.DepthError),
// model.ErrInvalidParameterValue ...). It is all or nothing: one invalid
// message fails the call (its error names it as messages[i] when there are
// several) and none is stored. A failed Send leaves tx usable, with nothing
// written.
//
// On a FIFO queue a message needs its GroupID, and a DedupID unless the
// queue has content-based deduplication; a duplicate within the
// deduplication window answers the original's id.
func (s *Sender) Send(ctx context.Context, tx pgx.Tx, queue string, msgs ...client.Message) ([]string, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(msgs) == 0 || len(msgs) > model.MaxBatchEntries {
		kind := model.ErrEmptyBatch
		if len(msgs) > 0 {
			kind = model.ErrTooManyEntries
		}
		return nil, model.Errorf(kind, "Send takes 1 to %d messages, not %d: send more with more calls in the same transaction.", model.MaxBatchEntries, len(msgs))
	}
	now := s.clock.Now()
	entries := make([]model.SendEntry, len(msgs))
	for i := range msgs {
		field := ""
		if len(msgs) > 1 {
			field = fmt.Sprintf("messages[%d]", i)
		}
		env := toEnvelope(&msgs[i])
		var err error
		if entries[i], err = model.EnvelopeEntry(field, &env, now); err != nil {
			return nil, err
		}
		if len(msgs) > 1 {
			entries[i].ID = strconv.Itoa(i) // a batch: every entry has an id
		}
	}
	rs, err := postgres.SendTx(ctx, tx, s.cfg, queue, entries)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		if r.Err != nil { // SendTx is all or nothing: not expected
			return nil, errors.Join(errors.New("pgtx: an entry failed in a send reported as done"), r.Err)
		}
		ids[i] = r.MessageID
	}
	return ids, nil
}

// toEnvelope is m as the native API's envelope: a zero field is a field not
// given, as the native client sends it.
func toEnvelope(m *client.Message) model.Envelope {
	body := m.Body
	e := model.Envelope{Body: &body, GroupID: m.GroupID, DedupID: m.DedupID}
	if len(m.Attributes) > 0 {
		e.Attributes = make(map[string]model.MessageAttribute, len(m.Attributes))
		for name, a := range m.Attributes {
			ma := model.MessageAttribute{DataType: a.Type}
			if base, _, _ := strings.Cut(a.Type, "."); base == "Binary" {
				ma.BinaryValue = a.Binary
			} else {
				ma.StringValue = a.Value
			}
			e.Attributes[name] = ma
		}
	}
	if m.Priority != 0 {
		p := m.Priority
		e.Priority = &p
	}
	if m.MaxAttempts != 0 {
		n := m.MaxAttempts
		e.MaxAttempts = &n
	}
	if m.TTL != 0 {
		// Whole seconds, rounded up, as the client sends it.
		secs := int(m.TTL / time.Second)
		if m.TTL%time.Second != 0 {
			secs++
		}
		e.TTLSeconds = &secs
	}
	if m.CorrelationID != "" {
		c := m.CorrelationID
		e.CorrelationID = &c
	}
	if m.TraceContext != "" {
		tc := m.TraceContext
		e.TraceContext = &tc
	}
	if m.Delay != 0 {
		// Whole seconds, rounded up (never early); a negative delay stays
		// negative, for the envelope rule to refuse.
		secs := int64(m.Delay / time.Second)
		if m.Delay%time.Second > 0 {
			secs++
		}
		if m.Delay < 0 && secs == 0 {
			secs = -1
		}
		e.DelaySeconds = &secs
	}
	if !m.DeliverAt.IsZero() {
		at := m.DeliverAt
		e.DeliverAt = &at
	}
	return e
}
