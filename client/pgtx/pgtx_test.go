package pgtx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/pgtx"
	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a broker on PostgreSQL (backend, front, native and SQS server) and
// an application's pool on the same database, with a table of its own.
type env struct {
	t      testing.TB
	ctx    context.Context
	clock  *clocktest.FakeClock
	front  *broker.Broker
	base   string // the server's URL
	app    *pgxpool.Pool
	sender *pgtx.Sender
}

// setup starts the broker on a fresh database. Its clock is a fake one: a
// waiting receive's timers (its wait, its poll) never fire on their own, so
// only a wake-up ends its wait early.
func setup(t testing.TB) *env {
	t.Helper()
	url := pgtest.Database(t)
	ctx := context.Background()
	clock := clocktest.NewFakeClock(time.Now())
	opts := storage.Options{Clock: clock, Logger: testutil.Logger(t)}
	cfg := postgres.DefaultConfig()
	cfg.URL, cfg.Options, cfg.MaxConns = url, opts, 4
	be, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	front, err := broker.New(be, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	if err != nil {
		be.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })
	scfg := server.DefaultConfig()
	scfg.Addr = "127.0.0.1:0"
	srv, err := server.New(scfg, front)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		_ = srv.Stop(context.Background())
	})
	app, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	// The application's own tables, in public; one is named like a Sluice
	// table, which must not capture Sluice's writes.
	if _, err := app.Exec(ctx, `CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL);
		CREATE TABLE messages (id serial PRIMARY KEY, body text)`); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, clock: clock, front: front, base: "http://" + srv.Addr().String(), app: app,
		sender: pgtx.New(pgtx.Config{Schema: "sluice", Clock: clock})}
}

func (e *env) createQueue(name string, attrs map[string]string) {
	e.t.Helper()
	if _, err := e.front.CreateQueue(e.ctx, name, attrs, nil); err != nil {
		e.t.Fatal(err)
	}
}

// inTx runs fn in an application transaction and commits it (or rolls back
// when commit is false).
func (e *env) inTx(commit bool, fn func(tx pgx.Tx)) {
	e.t.Helper()
	tx, err := e.app.Begin(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback(e.ctx) //nolint:errcheck
	fn(tx)
	if commit {
		if err := tx.Commit(e.ctx); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) receive(queue string, wait time.Duration) []model.Delivery {
	e.t.Helper()
	ds, err := e.front.Receive(e.ctx, model.ReceiveRequest{Queue: queue, MaxMessages: 10, WaitTime: &wait})
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

func (e *env) depth(queue string) int64 {
	e.t.Helper()
	q, err := e.front.GetQueue(e.ctx, queue)
	if err != nil {
		e.t.Fatal(err)
	}
	return q.Stats.Depth()
}

func TestRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("emails", nil)
	e.inTx(false, func(tx pgx.Tx) {
		if _, err := tx.Exec(e.ctx, `INSERT INTO orders (item) VALUES ('book')`); err != nil {
			t.Fatal(err)
		}
		ids, err := e.sender.Send(e.ctx, tx, "emails", client.Message{Body: "order 1"}, client.Message{Body: "order 2"})
		if err != nil || len(ids) != 2 {
			t.Fatalf("Send = %v, %v", ids, err)
		}
	})
	if ds := e.receive("emails", 0); len(ds) != 0 {
		t.Fatalf("received %d messages of a rolled-back transaction", len(ds))
	}
	if d := e.depth("emails"); d != 0 {
		t.Fatalf("depth %d after a rollback; want 0 (counters roll back too)", d)
	}
}

func TestCommitDelivers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("emails", nil)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var ids []string
	e.inTx(true, func(tx pgx.Tx) {
		if _, err := tx.Exec(e.ctx, `INSERT INTO orders (item) VALUES ('book')`); err != nil {
			t.Fatal(err)
		}
		var err error
		ids, err = e.sender.Send(e.ctx, tx, "emails", client.Message{
			Body: `{"order":1}`,
			Attributes: map[string]client.Attribute{
				"kind": client.String("receipt"), "total": client.Number("129.90"), "sig": client.Binary([]byte{0, 1, 2}),
			},
			Priority: 7, CorrelationID: "order-1", TraceContext: traceparent, GroupID: "tenant-a",
		})
		if err != nil {
			t.Fatal(err)
		}
		// Not visible to anyone before the commit.
		if ds := e.receive("emails", 0); len(ds) != 0 {
			t.Fatal("a message of an open transaction was received")
		}
	})
	ds := e.receive("emails", 0)
	if len(ds) != 1 {
		t.Fatalf("received %d messages after the commit; want 1", len(ds))
	}
	m := ds[0]
	a := m.Attributes
	switch {
	case m.ID != ids[0]:
		t.Errorf("id %s; Send answered %s", m.ID, ids[0])
	case m.Body != `{"order":1}`:
		t.Errorf("body %q", m.Body)
	case m.Priority != 7:
		t.Errorf("priority %d; want 7", m.Priority)
	case a[model.MsgAttrCorrelationID].StringValue != "order-1":
		t.Errorf("correlation id %+v", a[model.MsgAttrCorrelationID])
	case a[model.MsgAttrTraceParent].StringValue != traceparent:
		t.Errorf("trace context %+v", a[model.MsgAttrTraceParent])
	case a["kind"].DataType != "String" || a["kind"].StringValue != "receipt":
		t.Errorf("kind %+v", a["kind"])
	case a["total"].DataType != "Number" || a["total"].StringValue != "129.90":
		t.Errorf("total %+v", a["total"])
	case a["sig"].DataType != "Binary" || !bytes.Equal(a["sig"].BinaryValue, []byte{0, 1, 2}):
		t.Errorf("sig %+v", a["sig"])
	case m.GroupID != "tenant-a":
		t.Errorf("group %q", m.GroupID)
	}
	// The application's table named messages was not written.
	var n int
	if err := e.app.QueryRow(e.ctx, `SELECT count(*) FROM public.messages`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("public.messages holds %d rows (%v); want 0", n, err)
	}
}

// TestWakesWaitingReceive: a receive long-polling (10 s on the fake clock,
// which never moves here, so no timer of the broker fires) before the
// commit returns promptly after it: only the NOTIFY delivered at commit can
// wake it.
func TestWakesWaitingReceive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("emails", nil)
	// The broker's listener must be listening, or the wake-up is lost.
	testutil.Eventually(t, 10*time.Second, "the broker's listener LISTENs", func() bool {
		var n int
		_ = e.app.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n)
		return n > 0
	})
	type result struct {
		ds  []model.Delivery
		err error
	}
	base := e.clock.Timers()
	ch := make(chan result, 1)
	go func() {
		wait := 10 * time.Second
		ds, err := e.front.Receive(e.ctx, model.ReceiveRequest{Queue: "emails", WaitTime: &wait})
		ch <- result{ds, err}
	}()
	// The receive waits once it has armed its timer on the clock.
	testutil.Eventually(t, 10*time.Second, "the receive waits", func() bool { return e.clock.Timers() > base })
	select {
	case r := <-ch:
		t.Fatalf("the receive returned before the send: %d messages, %v", len(r.ds), r.err)
	default:
	}
	e.inTx(true, func(tx pgx.Tx) {
		if _, err := e.sender.Send(e.ctx, tx, "emails", client.Message{Body: "wake up"}); err != nil {
			t.Fatal(err)
		}
	})
	committed := time.Now()
	select {
	case r := <-ch:
		if r.err != nil || len(r.ds) != 1 || r.ds[0].Body != "wake up" {
			t.Fatalf("woken receive: %d messages, %v", len(r.ds), r.err)
		}
		t.Logf("woken %v after the commit", time.Since(committed))
	case <-time.After(3 * time.Second):
		t.Fatal("the waiting receive was not woken within 3 s of the commit")
	}
}

func TestMaxDepth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("small", map[string]string{model.AttrMaxDepth: "2"})
	e.inTx(true, func(tx pgx.Tx) {
		if _, err := e.sender.Send(e.ctx, tx, "small", client.Message{Body: "1"}, client.Message{Body: "2"}); err != nil {
			t.Fatal(err)
		}
	})
	e.inTx(true, func(tx pgx.Tx) {
		_, err := e.sender.Send(e.ctx, tx, "small", client.Message{Body: "3"})
		var full *model.DepthError
		if !errors.Is(err, model.ErrThrottled) || !errors.As(err, &full) || full.Limit != 2 {
			t.Fatalf("Send into a full queue = %v; want a DepthError", err)
		}
		// The transaction is still usable: the failure rolled back its
		// savepoint only.
		if _, err := tx.Exec(e.ctx, `INSERT INTO orders (item) VALUES ('after a refused send')`); err != nil {
			t.Fatalf("the transaction after a refused send: %v", err)
		}
	})
	if d := e.depth("small"); d != 2 {
		t.Fatalf("depth %d; want 2", d)
	}
	var n int
	if err := e.app.QueryRow(e.ctx, `SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("orders: %d (%v); want 1", n, err)
	}
}

func TestUnknownQueue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.sender.Send(e.ctx, tx, "nope", client.Message{Body: "x"})
		if !errors.Is(err, model.ErrQueueDoesNotExist) {
			t.Fatalf("Send to an unknown queue = %v; want ErrQueueDoesNotExist", err)
		}
		t.Logf("unknown queue: %v", err)
	})
	// The queue exists in the brokers' own account, not in another.
	e.createQueue("emails", nil)
	other := pgtx.New(pgtx.Config{Account: "123456789012"})
	e.inTx(false, func(tx pgx.Tx) {
		if _, err := other.Send(e.ctx, tx, "emails", client.Message{Body: "x"}); !errors.Is(err, model.ErrQueueDoesNotExist) {
			t.Fatalf("Send to another account's queue = %v; want ErrQueueDoesNotExist", err)
		}
	})
	// A schema without Sluice's tables says what to do.
	s := pgtx.New(pgtx.Config{Schema: "not_sluice"})
	e.inTx(false, func(tx pgx.Tx) {
		_, err := s.Send(e.ctx, tx, "emails", client.Message{Body: "x"})
		if err == nil || !strings.Contains(err.Error(), "TxConfig.Schema") {
			t.Fatalf("Send into a schema without Sluice = %v", err)
		}
	})
	if _, err := (pgtx.New(pgtx.Config{Schema: "bad-name"})).Send(e.ctx, nil, "q", client.Message{Body: "x"}); err == nil {
		t.Fatal("a Sender with an invalid schema sent")
	}
}

// TestInvalidMessageSameAsNative: the errors are the native API's, word for
// word: each message is sent to the native HTTP API too, and the texts
// compared.
func TestInvalidMessageSameAsNative(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("emails", nil)
	cases := []struct {
		name   string
		msg    client.Message
		native string // the same message as the native envelope
		kind   error
	}{
		{"PriorityRange", client.Message{Body: "x", Priority: 500}, `{"body":"x","priority":500}`, model.ErrInvalidParameterValue},
		{"FieldAndAttribute", client.Message{Body: "x", CorrelationID: "a", Attributes: map[string]client.Attribute{model.MsgAttrCorrelationID: client.String("b")}},
			`{"body":"x","correlationId":"a","attributes":{"Sluice.CorrelationId":{"type":"String","value":"b"}}}`, model.ErrInvalidRequest},
		{"EmptyBody", client.Message{Body: ""}, `{"body":""}`, nil},
		{"NegativeDelay", client.Message{Body: "x", Delay: -time.Second}, `{"body":"x","delaySeconds":-1}`, model.ErrInvalidParameterValue},
		{"MaxAttemptsWithoutRedrive", client.Message{Body: "x", MaxAttempts: 3}, `{"body":"x","maxAttempts":3}`, model.ErrInvalidParameterValue},
		{"ReservedAttribute", client.Message{Body: "x", Attributes: map[string]client.Attribute{"Sluice.Color": client.String("red")}},
			`{"body":"x","attributes":{"Sluice.Color":{"type":"String","value":"red"}}}`, model.ErrInvalidParameterValue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got error
			e.inTx(true, func(tx pgx.Tx) {
				_, got = e.sender.Send(e.ctx, tx, "emails", c.msg)
			})
			if got == nil {
				t.Fatal("Send succeeded")
			}
			if c.kind != nil && !errors.Is(got, c.kind) {
				t.Errorf("error %v; want kind %v", got, c.kind)
			}
			resp, err := http.Post(e.base+"/v1/queues/emails/messages", "application/json", strings.NewReader(c.native))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct{ Code, Message string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode < 400 || body.Message != got.Error() {
				t.Errorf("native API: %d %s %q; pgtx: %q", resp.StatusCode, body.Code, body.Message, got.Error())
			}
		})
	}
	if d := e.depth("emails"); d != 0 {
		t.Fatalf("depth %d after refused sends; want 0", d)
	}
}

// TestAllOrNothing: one invalid message of several fails the call, names
// the message, and stores none.
func TestAllOrNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("emails", nil)
	e.inTx(true, func(tx pgx.Tx) {
		_, err := e.sender.Send(e.ctx, tx, "emails", client.Message{Body: "ok"}, client.Message{Body: "x", Priority: 101})
		if !errors.Is(err, model.ErrInvalidParameterValue) || !strings.Contains(err.Error(), "messages[1]") {
			t.Fatalf("Send = %v; want messages[1]'s error", err)
		}
		msgs := make([]client.Message, 11)
		for i := range msgs {
			msgs[i].Body = "x"
		}
		if _, err := e.sender.Send(e.ctx, tx, "emails", msgs...); !errors.Is(err, model.ErrTooManyEntries) {
			t.Fatalf("Send of 11 = %v; want ErrTooManyEntries", err)
		}
		if _, err := e.sender.Send(e.ctx, tx, "emails"); !errors.Is(err, model.ErrEmptyBatch) {
			t.Fatalf("Send of none = %v; want ErrEmptyBatch", err)
		}
	})
	if d := e.depth("emails"); d != 0 {
		t.Fatalf("depth %d; want 0", d)
	}
}

// TestSearchPathUnchanged: the transaction's search_path is what it was,
// after a send and after a failed one.
func TestSearchPathUnchanged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("emails", nil)
	path := func(tx pgx.Tx) string {
		var p string
		if err := tx.QueryRow(e.ctx, `SHOW search_path`).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	e.inTx(true, func(tx pgx.Tx) {
		before := path(tx)
		if _, err := e.sender.Send(e.ctx, tx, "emails", client.Message{Body: "x"}); err != nil {
			t.Fatal(err)
		}
		if p := path(tx); p != before {
			t.Fatalf("search_path %q after Send; was %q", p, before)
		}
		if _, err := tx.Exec(e.ctx, `SET LOCAL search_path TO public, pg_catalog`); err != nil {
			t.Fatal(err)
		}
		before = path(tx)
		if _, err := e.sender.Send(e.ctx, tx, "nope", client.Message{Body: "x"}); err == nil {
			t.Fatal("Send to an unknown queue succeeded")
		}
		if p := path(tx); p != before {
			t.Fatalf("search_path %q after a failed Send; was %q", p, before)
		}
		if _, err := e.sender.Send(e.ctx, tx, "emails", client.Message{Body: "y"}); err != nil {
			t.Fatal(err)
		}
		if p := path(tx); p != before {
			t.Fatalf("search_path %q after Send; was %q (SET LOCAL)", p, before)
		}
	})
	if ds := e.receive("emails", 0); len(ds) != 2 {
		t.Fatalf("received %d; want 2", len(ds))
	}
}

// TestFifo: a FIFO send in a transaction keeps group order and
// deduplicates against a send of another transaction.
func TestFifo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("pay.fifo", map[string]string{model.AttrFifoQueue: "true"})
	var first []string
	e.inTx(true, func(tx pgx.Tx) {
		var err error
		first, err = e.sender.Send(e.ctx, tx, "pay.fifo",
			client.Message{Body: "a", GroupID: "g", DedupID: "1"}, client.Message{Body: "b", GroupID: "g", DedupID: "2"})
		if err != nil {
			t.Fatal(err)
		}
	})
	e.inTx(true, func(tx pgx.Tx) {
		ids, err := e.sender.Send(e.ctx, tx, "pay.fifo", client.Message{Body: "a again", GroupID: "g", DedupID: "1"})
		if err != nil || ids[0] != first[0] {
			t.Fatalf("duplicate = %v, %v; want the original's id %s", ids, err, first[0])
		}
	})
	e.inTx(true, func(tx pgx.Tx) {
		if _, err := e.sender.Send(e.ctx, tx, "pay.fifo", client.Message{Body: "no group"}); !errors.Is(err, model.ErrMissingParameter) {
			t.Fatalf("FIFO send without a group = %v", err)
		}
	})
	ds := e.receive("pay.fifo", 0)
	if len(ds) != 2 || ds[0].Body != "a" || ds[1].Body != "b" {
		t.Fatalf("received %d messages, want a then b", len(ds))
	}
}

// TestDeleteWaitsForTransaction: a queue deleted while an open transaction
// has sent to it is deleted when that transaction ends (its row is read FOR
// SHARE), so the transaction never leaves messages in a deleted queue
// unseen.
func TestDeleteWaitsForTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("emails", nil)
	deleted := make(chan error, 1)
	e.inTx(true, func(tx pgx.Tx) {
		if _, err := e.sender.Send(e.ctx, tx, "emails", client.Message{Body: "x"}); err != nil {
			t.Fatal(err)
		}
		go func() { deleted <- e.front.DeleteQueue(e.ctx, "emails") }()
		testutil.Eventually(t, 10*time.Second, "the delete waits for the transaction", func() bool {
			var n int
			_ = e.app.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
			return n > 0
		})
	})
	if err := <-deleted; err != nil {
		t.Fatalf("DeleteQueue after the commit: %v", err)
	}
	if _, err := e.front.GetQueue(e.ctx, "emails"); !errors.Is(err, model.ErrQueueDoesNotExist) {
		t.Fatalf("GetQueue after the delete = %v", err)
	}
}

// BenchmarkSend: one message per transaction (begin, Send, commit), beside
// the broker's own send of one message (front.Send, autocommit), on the
// same database.
func BenchmarkSend(b *testing.B) {
	e := setup(b)
	e.createQueue("bench", nil)
	b.Run("pgtx", func(b *testing.B) {
		for b.Loop() {
			tx, err := e.app.Begin(e.ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.sender.Send(e.ctx, tx, "bench", client.Message{Body: "x"}); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(e.ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("front", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.front.Send(e.ctx, "bench", []model.SendEntry{{Body: "x"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
