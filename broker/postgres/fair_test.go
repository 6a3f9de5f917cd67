package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
)

// turns reads the fair-queue turn of every message of queue (by body) and
// the queue's cursor at level prio, straight from schema.
func turns(t *testing.T, url, schema, queue string, prio int) (map[string]uint64, uint64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tbl := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	rows, err := conn.Query(ctx, `SELECT m.body, m.turn FROM `+tbl("messages")+` m JOIN `+tbl("queues")+` q
		ON q.mid = m.queue_id WHERE q.name = $1 AND NOT q.deleted`, queue)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	var body string
	var turn int64
	if _, err := pgx.ForEachRow(rows, []any{&body, &turn}, func() error { out[body] = uint64(turn); return nil }); err != nil {
		t.Fatal(err)
	}
	var cursor int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(c.cursor), 0) FROM `+tbl("cursors")+` c JOIN `+tbl("queues")+` q
		ON q.mid = c.queue_id WHERE q.name = $1 AND NOT q.deleted AND c.priority = $2`, queue, prio).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	return out, uint64(cursor)
}

// prioEntry is a send entry of body as tenant at priority p.
func prioEntry(body, tenant string, p int) model.SendEntry {
	e := model.SendEntry{ID: body, Body: body, GroupID: tenant}
	if p != 0 {
		e.Attributes = map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: strconv.Itoa(p)}}
	}
	return e
}

// TestFairTurnsFollowTheRule: the turns the SQL computes (on send and
// claim) are plan.NextTurn's and the cursor plan.AdvanceCursor's, per
// tenant (no MessageGroupId: one tenant) and per priority level.
func TestFairTurnsFollowTheRule(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	schema := schemaFor(t)
	a, _, _ := openPair(t, schema, nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	send := func(es ...model.SendEntry) {
		t.Helper()
		res, err := a.Send(ctx, "q", es)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	// want replays the rule in Go: last[p][T] and cursor[p].
	type key struct {
		p      int
		tenant string
	}
	last, cursor, want := map[key]uint64{}, map[int]uint64{}, map[string]uint64{}
	sent := func(es ...model.SendEntry) {
		t.Helper()
		send(es...)
		for _, e := range es {
			p := 0
			if v, ok := e.Attributes[model.MsgAttrPriority]; ok {
				p, _ = strconv.Atoi(v.StringValue)
			}
			k := key{p, e.GroupID}
			last[k] = plan.NextTurn(last[k], cursor[p])
			want[e.Body] = last[k]
		}
	}
	check := func(when string) {
		t.Helper()
		got, cur := turns(t, url, schema, "q", 0)
		for body, w := range want {
			if g, ok := got[body]; ok && g != w {
				t.Errorf("%s: %s has turn %d, want %d (all: %v)", when, body, g, w, got)
			}
		}
		if cur != cursor[0] {
			t.Errorf("%s: cursor of level 0 is %d, want %d", when, cur, cursor[0])
		}
	}
	sent(prioEntry("a0", "a", 0), prioEntry("b0", "b", 0), prioEntry("a1", "a", 0), prioEntry("x0", "", 0))
	sent(prioEntry("a2", "a", 0), prioEntry("x1", "", 0))
	check("after the first sends")

	ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 3})
	if err != nil || len(ds) != 3 {
		t.Fatalf("receive: %d messages, %v", len(ds), err)
	}
	var bodies []string
	for _, d := range ds {
		bodies = append(bodies, d.Body)
		cursor[0] = plan.AdvanceCursor(cursor[0], want[d.Body])
	}
	if !slices.Equal(bodies, []string{"a0", "b0", "x0"}) { // turn 1 of each tenant, in send order
		t.Fatalf("received %v, want [a0 b0 x0]", bodies)
	}
	check("after a receive")

	// A new tenant starts at the cursor; a tenant with a backlog goes on
	// from its last turn; another level has its own turns and cursor.
	sent(prioEntry("c0", "c", 0), prioEntry("a3", "a", 0), prioEntry("h0", "a", 5), prioEntry("h1", "a", 5))
	check("after the later sends")
	if got, _ := turns(t, url, schema, "q", 5); got["h0"] != 1 || got["h1"] != 2 {
		t.Errorf("level 5 turns h0 %d h1 %d, want 1 and 2", got["h0"], got["h1"])
	}
	if ds, err = a.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1}); err != nil || len(ds) != 1 || ds[0].Body != "h0" {
		t.Fatalf("receive: %v, %v; want h0", ds, err)
	}
	if _, cur := turns(t, url, schema, "q", 5); cur != 1 {
		t.Errorf("cursor of level 5 after claiming h0: %d, want 1", cur)
	}
	check("after a claim at level 5") // level 0's cursor did not move
}

// TestFairClaimDeadLetterTakesATurn: a message that the claim itself moves
// to the dead-letter queue (its attempts were used before the queue got its
// RedrivePolicy) takes a turn there as a send does: it is not queued
// behind another tenant's backlog in the DLQ.
func TestFairClaimDeadLetterTakesATurn(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)
	schema := schemaFor(t)
	a, _, clock := openPair(t, schema, nil)
	ctx := context.Background()
	for _, q := range []string{"dlq", "src"} {
		if _, err := a.CreateQueue(ctx, q, map[string]string{model.AttrVisibilityTimeout: "1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var noisy []model.SendEntry
	for i := range 30 {
		noisy = append(noisy, prioEntry(fmt.Sprint("n", i), "noisy", 0))
	}
	for len(noisy) > 0 {
		if _, err := a.Send(ctx, "dlq", noisy[:10]); err != nil {
			t.Fatal(err)
		}
		noisy = noisy[10:]
	}
	if _, err := a.Send(ctx, "src", []model.SendEntry{prioEntry("quiet0", "quiet", 0)}); err != nil {
		t.Fatal(err)
	}
	if ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "src"}); err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	clock.Advance(time.Second) // the lease ends: ready again, with 1 attempt used
	rp, _ := json.Marshal(map[string]any{"deadLetterTargetArn": model.ARN("us-east-1", "000000000000", "dlq"), "maxReceiveCount": 1})
	if err := a.SetQueueAttributes(ctx, "src", map[string]string{model.AttrRedrivePolicy: string(rp)}); err != nil {
		t.Fatal(err)
	}
	if ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "src"}); err != nil || len(ds) != 0 {
		t.Fatalf("receive of src: %d messages, %v; want none (the claim moves it)", len(ds), err)
	}
	got, _ := turns(t, url, schema, "dlq", 0)
	if got["quiet0"] != plan.NextTurn(0, 0) {
		t.Fatalf("the dead letter's turn in dlq is %d, want %d (turns %v)", got["quiet0"], plan.NextTurn(0, 0), got)
	}
	var bodies []string
	for range 2 {
		ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "dlq"})
		if err != nil || len(ds) != 1 {
			t.Fatal(ds, err)
		}
		bodies = append(bodies, ds[0].Body)
	}
	if !slices.Contains(bodies, "quiet0") {
		t.Fatalf("the first 2 receives of dlq returned %v, want quiet0 among them", bodies)
	}
}

// TestFairConcurrentSendsKeepTenantOrder: sends of one tenant through two
// brokers at once may take the same turns (no lock per tenant), but each
// producer's messages stay in send order, and a quiet tenant is still
// served within a few receives.
func TestFairConcurrentSendsKeepTenantOrder(t *testing.T) {
	t.Parallel()
	a, b, _ := openPair(t, schemaFor(t), nil)
	ctx := context.Background()
	if _, err := a.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	const producers, batches = 4, 10
	var wg sync.WaitGroup
	errc := make(chan error, producers)
	for p := range producers {
		f := a
		if p%2 == 1 {
			f = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				es := make([]model.SendEntry, 10)
				for j := range es {
					es[j] = prioEntry(fmt.Sprintf("p%d-%03d", p, i*10+j), "noisy", 0)
				}
				if _, err := f.Send(ctx, "q", es); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, "q", []model.SendEntry{prioEntry("quiet0", "quiet", 0)}); err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	var first []string
	for n := 0; n < producers*batches*10+1; {
		ds, err := a.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10})
		if err != nil || len(ds) == 0 {
			t.Fatalf("receive after %d: %d messages, %v", n, len(ds), err)
		}
		var del []model.DeleteEntry
		for _, d := range ds {
			if len(first) < producers+1 {
				first = append(first, d.Body)
			}
			if d.Body != "quiet0" {
				p := d.Body[:2]
				if prev, ok := last[p]; ok && d.Body < prev {
					t.Fatalf("%s received after %s: a producer's send order broken", d.Body, prev)
				}
				last[p] = d.Body
			}
			del = append(del, model.DeleteEntry{ID: strconv.Itoa(len(del)), Receipt: d.Receipt})
		}
		if _, err := a.Delete(ctx, "q", del); err != nil {
			t.Fatal(err)
		}
		n += len(ds)
	}
	// The quiet message ties at most one message per concurrent send of
	// the noisy tenant (docs/postgres.md).
	if !slices.Contains(first, "quiet0") {
		t.Fatalf("the first %d messages were %v, want quiet0 among them", producers+1, first)
	}
}

// TestMigration7OldRows: messages stored before migration 7 read as turn 0
// (no row is rewritten) and are served first at their level, in their old
// order; the messages sent after the upgrade take turns from there.
func TestMigration7OldRows(t *testing.T) {
	t.Parallel()
	url, schema, conn := schemaAtVersion(t, 6)
	ctx := context.Background()
	tbl := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	cj, _ := json.Marshal(model.DefaultQueueConfig(false))
	var mid int64
	if err := conn.QueryRow(ctx, `INSERT INTO `+tbl("queues")+` (name, config, created_at, modified_at)
		VALUES ('q', $1, $2, $2) RETURNING mid`, cj, at).Scan(&mid); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := conn.Exec(ctx, `INSERT INTO `+tbl("messages")+` (queue_id, state, visible_at, sent_at, message_id, group_id, body)
			VALUES ($1, 'r', $2, $2, $3, 'noisy', $4)`, mid, at.Add(time.Duration(i)*time.Second),
			fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i), fmt.Sprint("old", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+tbl("counts")+` (queue_id, shard, ready) VALUES ($1, 0, 3)`, mid); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(url, schema)
	cfg.Clock = clocktest.NewFakeClock(at.Add(time.Minute))
	be, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Close() })
	f := front(t, be, cfg.Options)
	if _, err := f.Send(ctx, "q", []model.SendEntry{prioEntry("new0", "noisy", 0), prioEntry("quiet0", "quiet", 0)}); err != nil {
		t.Fatal(err)
	}
	got, _ := turns(t, url, schema, "q", 0)
	if got["old0"] != 0 || got["old2"] != 0 || got["new0"] != 1 || got["quiet0"] != 1 {
		t.Fatalf("turns after the upgrade: %v; want the old rows at 0, new0 and quiet0 at 1", got)
	}
	var bodies []string
	for range 5 {
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q"})
		if err != nil || len(ds) != 1 {
			t.Fatal(ds, err)
		}
		bodies = append(bodies, ds[0].Body)
	}
	if want := []string{"old0", "old1", "old2", "new0", "quiet0"}; !slices.Equal(bodies, want) {
		t.Fatalf("received %v, want %v", bodies, want)
	}
}
