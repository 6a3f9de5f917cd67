package brokertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// The tests of what metrics read: Broker.AllStats (every queue with its
// counts, as GetQueue reports them) and the Observer's counts.
var observeTests = []testCase{
	{"AllStatsMatchesGetQueue", testAllStats},
	{"ObserverCounts", testObserverCounts},
}

func testAllStats(t *testing.T, s suite) {
	e := s.setup(t)
	if all, err := e.b.AllStats(e.ctx); err != nil || len(all) != 0 {
		t.Fatalf("AllStats on no queue = %v, %v; want none", all, err)
	}
	e.createQueue("b", nil)
	e.createQueue("a", nil)
	e.createQueue("c", nil)
	t0 := e.clock.Now()
	e.send("a", model.SendEntry{Body: "1"}, model.SendEntry{Body: "2"}, model.SendEntry{Body: "3", Delay: dur(time.Minute)})
	e.advance(time.Second)
	e.send("b", model.SendEntry{Body: "4"})
	e.receiveN(model.ReceiveRequest{Queue: "a"}, 1)
	e.createQueue("gone", nil)
	if err := e.b.DeleteQueue(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	all, err := e.b.AllStats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range all {
		names = append(names, q.Name)
	}
	if fmt.Sprint(names) != "[a b c]" {
		t.Fatalf("AllStats names = %v, want [a b c] (in order, no deleted queue)", names)
	}
	for _, q := range all {
		one, err := e.be.GetQueue(e.ctx, model.QueueRef{Name: q.Name})
		if err != nil {
			t.Fatal(err)
		}
		if !q.Stats.OldestSentAt.Equal(one.Stats.OldestSentAt) || counts(q.Stats) != counts(one.Stats) || q.ID != one.ID {
			t.Errorf("AllStats %s = %+v (id %d), GetQueue = %+v (id %d)", q.Name, q.Stats, q.ID, one.Stats, one.ID)
		}
	}
	if got := counts(all[0].Stats); got != (model.QueueStats{Visible: 1, InFlight: 1, Delayed: 1}) {
		t.Errorf("AllStats a = %+v, want 1 visible, 1 in flight, 1 delayed", got)
	}
	if !all[0].Stats.OldestSentAt.Equal(t0) {
		t.Errorf("AllStats a oldest = %v, want %v", all[0].Stats.OldestSentAt, t0)
	}
}

// countObserver records an Observer's calls.
type countObserver struct {
	mu      sync.Mutex
	counts  map[string]int // "queue counter"
	refused map[string]int // "queue reason"
}

func (o *countObserver) Count(queue string, c model.Counter, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[queue+" "+c.String()] += n
}

func (o *countObserver) Refused(queue, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused[queue+" "+reason]++
}

func (o *countObserver) Synced(time.Duration, int) {}

func (o *countObserver) get(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[key]
}

func testObserverCounts(t *testing.T, s suite) {
	o := &countObserver{counts: map[string]int{}, refused: map[string]int{}}
	e := s.setup(t, func(opts *broker.Config) { opts.Observer = o })
	e.createQueue("dlq", nil)
	e.createQueue("src", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 2), model.AttrMaxDepth: "4"})
	e.send("src", model.SendEntry{ID: "1", Body: "a"}, model.SendEntry{ID: "2", Body: "b"}, model.SendEntry{ID: "3", Body: "c"})
	if _, err := e.b.Send(e.ctx, "src", []model.SendEntry{{ID: "1", Body: "d"}, {ID: "2", Body: "e"}}); err == nil {
		t.Fatal("a send past MaxDepth succeeded")
	}
	ds := e.receiveN(model.ReceiveRequest{Queue: "src", MaxMessages: 3}, 3)
	e.mustDelete("src", ds[0].Receipt)
	e.mustChangeVis("src", ds[1].Receipt, 0)                               // SQS's nack
	e.nack("src", ds[2].Receipt, "boom", nil)                              // the native nack
	ds = e.receiveN(model.ReceiveRequest{Queue: "src", MaxMessages: 2}, 2) // second attempts
	e.mustChangeVis("src", ds[0].Receipt, 0)                               // past the limit: dead-lettered
	e.mustChangeVis("src", ds[1].Receipt, time.Minute)                     // an extension is no nack
	want := map[string]int{
		"src sent": 3, "src received": 5, "src deleted": 1, "src nacked": 3, "src dead_lettered": 1,
	}
	for k, n := range want {
		if got := o.get(k); got != n {
			t.Errorf("Observer %s = %d, want %d", k, got, n)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.refused) != 1 {
		t.Errorf("Observer refusals = %v, want one (src, its reason)", o.refused)
	}
}
