package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	sclient "github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestCLIQueueConsumers: sluice queue consumers lists, as a table and as
// JSON, a stream a real stream client opened on the broker; without one it
// says that none is connected and how consumers connect; an unknown queue
// says what to do next.
func TestCLIQueueConsumers(t *testing.T) {
	e := setupCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.ok("queue", "create", "orders", "VisibilityTimeout=20")

	r := e.ok("queue", "consumers", "orders")
	if r.stdout != "" {
		t.Errorf("no stream: stdout %q, want nothing", r.stdout)
	}
	wantContains(t, "no stream", r.stderr, "no consumer is connected to orders", "client/stream", "package worker")
	r = e.ok("queue", "consumers", "orders", "--json")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("no stream, --json: %q, want []", r.stdout)
	}

	sc, err := stream.Dial(e.url, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "orders", Credit: 7, ClientName: "billing worker"})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	for _, b := range []string{"a", "b"} {
		if _, err := e.c.Send(ctx, "orders", sclient.Message{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := con.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := con.Ack(ctx, m.GetReceipt()); err != nil {
		t.Fatal(err)
	}
	// One acked, the other held.
	var list []wire.Consumer
	testutil.Eventually(t, 10*time.Second, "the stream listed with 1 held, 1 acked", func() bool {
		r := e.ok("queue", "consumers", "orders", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 {
			t.Fatalf("queue consumers --json: %v %q", err, r.stdout)
		}
		return list[0].Held == 1 && list[0].Acked == 1
	})
	if c := list[0]; c.ID != con.ID() || c.Broker == "" || c.ClientName != "billing worker" || c.Credit != 7 || c.LeaseSeconds != 20 ||
		c.MaxHoldSeconds != 3600 || !strings.HasPrefix(c.RemoteAddress, "127.0.0.1:") || c.ConnectedAt.IsZero() {
		t.Errorf("queue consumers --json: %+v", c)
	}

	r = e.ok("queue", "consumers", "orders")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("queue consumers: %q", r.stdout)
	}
	wantContains(t, "queue consumers' header", squeeze(lines[0]), "ID CLIENT ADDRESS CREDIT HELD ACKS/S ACKED CONNECTED LAST-ACTIVE BROKER")
	// Aligned columns: HELD's column holds the count.
	if col := strings.Index(lines[0], "HELD"); len(lines[1]) <= col || lines[1][col] != '1' {
		t.Errorf("queue consumers: HELD column of %q (header %q)", lines[1], lines[0])
	}
	wantContains(t, "queue consumers' row", lines[1], con.ID(), "billing worker", list[0].RemoteAddress, list[0].ConnectedAt.UTC().Format(time.RFC3339), " ago", list[0].Broker)
	if f := strings.Fields(strings.Replace(lines[1], "billing worker", "billing-worker", 1)); len(f) != 11 || f[3] != "7" || f[4] != "1" || f[6] != "1" {
		t.Errorf("queue consumers' row %q: want credit 7, held 1, acked 1", lines[1])
	}

	e.fails(1, []string{"queue", "consumers", "missing"}, "queue_not_found", "sluice queue list")
	e.fails(2, []string{"queue", "consumers"}, "takes 1 argument", "sluice queue consumers --help")
}
