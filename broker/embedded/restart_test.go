package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
)

func TestRestartKeepsMessagesLeasesDeletesCounters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", nil)
	delay := 10 * time.Second
	e.send("q", "a", "b", "c", "d")
	if _, err := e.b.Send(context.Background(), "q", []broker.SendEntry{{Body: "delayed", Delay: &delay}}); err != nil {
		t.Fatal(err)
	}
	ds := e.receive("q", 3, 30*time.Second) // a, b, c leased for 30 s
	if len(ds) != 3 {
		t.Fatalf("received %d, want 3", len(ds))
	}
	errs, err := e.b.Delete(context.Background(), "q", []broker.DeleteEntry{{ID: "x", Receipt: ds[0].Receipt}})
	if err != nil || errs[0] != nil {
		t.Fatalf("delete: %v %v", err, errs)
	}
	e.wantStats("q", broker.QueueStats{Visible: 1, InFlight: 2, Delayed: 1})

	e.restart()
	e.wantStats("q", broker.QueueStats{Visible: 1, InFlight: 2, Delayed: 1})
	// The surviving lease still fences: the old receipt changes visibility.
	if errs, err := e.b.ChangeVisibility(context.Background(), "q", []broker.VisibilityEntry{{ID: "v", Receipt: ds[1].Receipt, Timeout: 40 * time.Second}}); err != nil || errs[0] != nil {
		t.Fatalf("change visibility after restart: %v %v", err, errs)
	}
	// Only d is visible now; after 10 s the delayed message too.
	got := e.receive("q", 10, time.Minute)
	if len(got) != 1 || got[0].Body != "d" {
		t.Fatalf("after restart got %v, want [d]", bodies(got))
	}
	e.clock.Advance(10 * time.Second)
	e.wantStats("q", broker.QueueStats{Visible: 1, InFlight: 3})
	e.restart()
	// c's lease (30 s from t0) has expired at t0+30; b's was extended to t0+40.
	e.clock.Advance(20 * time.Second)
	e.wantStats("q", broker.QueueStats{Visible: 2, InFlight: 2})
	got = e.receive("q", 10, time.Minute)
	if want := []string{"c", "delayed"}; !sameSet(bodies(got), want) {
		t.Fatalf("got %v, want %v", bodies(got), want)
	}
	for _, d := range got {
		if d.Body == "c" && (d.ReceiveCount != 2 || !d.FirstReceiveAt.Equal(t0)) {
			t.Fatalf("c: receive count %d first receive %v", d.ReceiveCount, d.FirstReceiveAt)
		}
	}
	// The deleted message never came back; a never comes back after another restart either.
	e.restart()
	e.clock.Advance(2 * time.Minute)
	all := e.receive("q", 10, time.Minute)
	if want := []string{"b", "c", "d", "delayed"}; !sameSet(bodies(all), want) {
		t.Fatalf("got %v, want %v", bodies(all), want)
	}
}

func TestRecreatedQueueRejectsOldReceipts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	q1 := e.createQueue("q", nil)
	e.send("q", "a")
	ds := e.receive("q", 1, time.Minute)
	if err := e.b.DeleteQueue(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
	e.restart()
	q2 := e.createQueue("q", nil)
	if q2.ID == q1.ID {
		t.Fatalf("re-created queue reused id %d", q1.ID)
	}
	errs, err := e.b.Delete(context.Background(), "q", []broker.DeleteEntry{{Receipt: ds[0].Receipt}})
	if err != nil || !errors.Is(errs[0], broker.ErrReceiptHandleInvalid) {
		t.Fatalf("old receipt on new queue: %v %v", err, errs)
	}
	e.wantStats("q", broker.QueueStats{})
}

func bodies(ds []broker.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Body
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}
