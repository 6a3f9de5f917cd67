package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/browsertest"
)

// consumerCell is the JavaScript text of a consumer row's cell on the queue
// page.
func consumerCell(id, col string) string {
	return fmt.Sprintf(`(document.querySelector('#consumer-rows tr[data-id=%q] td[data-col=%q]') || {}).textContent`, id, col)
}

// TestQueuePageListsConsumers: the queue page lists, live, a stream a real
// stream client (client/stream) opens on the broker, with its client name,
// address, credit, held and acked counts, and shows the empty state before
// it opens and after it closes, without a reload.
func TestQueuePageListsConsumers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	e.createQueue("orders", nil)
	e.send("orders", "one")
	e.send("orders", "two")
	e.open("#/queues/orders")
	e.page.Eventually(wait, "the empty state", `!document.querySelector("#consumers-empty").hidden && document.querySelector("#consumers").hidden`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#consumers-empty").textContent`); !contains(got, "No consumer is connected", "client/stream") {
		t.Errorf("empty state %q: want it to say no consumer is connected and how one connects", got)
	}
	e.page.Eventually(wait, "the consumer card shows 0", `document.querySelector("#stat-consumers").textContent === "0"`)

	sc, err := stream.Dial(e.url, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	con, err := sc.Consume(ctx, stream.ConsumeOptions{Queue: "orders", Credit: 3, ClientName: "dash-worker <b>"})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	// Both messages come; one acked, one held.
	m, err := con.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := con.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := con.Ack(ctx, m.GetReceipt()); err != nil {
		t.Fatal(err)
	}
	id := con.ID()
	e.page.Eventually(wait, "the stream listed with 1 held and 1 acked",
		consumerCell(id, "held")+` === "1" && `+consumerCell(id, "acked")+` === "1"`)
	var listed struct {
		Consumers []struct{ Broker string }
	}
	e.call("GET", "/v1/queues/orders/consumers", nil, &listed)
	if len(listed.Consumers) != 1 || listed.Consumers[0].Broker == "" {
		t.Fatalf("the API lists %+v, want the one stream with its broker", listed.Consumers)
	}
	for col, want := range map[string]string{"credit": "3", "client": "dash-worker <b>" + id + "on " + listed.Consumers[0].Broker} {
		if got := browsertest.Eval[string](e.page, consumerCell(id, col)); got != want {
			t.Errorf("consumer %s cell %q, want %q", col, got, want)
		}
	}
	if got := browsertest.Eval[string](e.page, consumerCell(id, "address")); !contains(got, "127.0.0.1:") {
		t.Errorf("consumer address %q, want 127.0.0.1:PORT", got)
	}
	if got := browsertest.Eval[string](e.page, consumerCell(id, "connectedAt")); !contains(got, time.Now().UTC().Format("2006-01-02")) || !contains(got, "Z") {
		t.Errorf("connected since %q, want today's UTC time", got)
	}
	if got := browsertest.Eval[string](e.page, consumerCell(id, "ackedPerSecond")); got == "0" || got == "" || got == "—" {
		t.Errorf("acks/s %q after an ack, want a rate above 0", got)
	}
	if n := browsertest.Eval[int](e.page, `document.querySelectorAll("#consumer-rows b").length`); n != 0 {
		t.Errorf("the client name became %d elements: it must be text", n)
	}
	e.page.Eventually(wait, "the consumer card shows 1", `document.querySelector("#stat-consumers").textContent === "1"`)
	if !browsertest.Eval[bool](e.page, `document.querySelector("#consumers-empty").hidden`) {
		t.Error("the empty state shows beside a listed stream")
	}

	// The stream ends: the page follows.
	if err := con.Close(); err != nil {
		t.Fatal(err)
	}
	e.page.Eventually(wait, "the closed stream gone, the empty state back",
		`document.querySelectorAll("#consumer-rows tr").length === 0 && !document.querySelector("#consumers-empty").hidden`)
	e.notReloaded()
	e.page.Clean()
}

// contains reports whether s holds every one of parts.
func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
