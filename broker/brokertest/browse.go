package brokertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The browse tests: Browse pages through a queue without leasing anything,
// oldest or newest first, filtered by attribute or failure reason, showing
// each message's state and attempts; DeleteMessages deletes by id in any
// state.
var browseTests = []testCase{
	{"PagesOldestAndNewestFirst", testBrowsePages},
	{"StatesAndAttempts", testBrowseStates},
	{"DoesNotLease", testBrowseDoesNotLease},
	{"FilterByAttribute", testBrowseFilterAttribute},
	{"FilterByReason", testBrowseFilterReason},
	{"Refusals", testBrowseRefusals},
	{"DeleteMessagesAnyState", testDeleteMessages},
	{"DeleteMessagesFreesFifoGroup", testDeleteMessagesFifo},
	{"DeleteMessagesIDsAnyCaseAndRepeated", testDeleteMessagesIDForms},
}

// sendSpaced sends bodies one clock second apart, each with a "kind"
// attribute "even" or "odd" by its index, and returns their ids.
func (e *env) sendSpaced(queue string, bodies ...string) []string {
	e.t.Helper()
	var ids []string
	for i, b := range bodies {
		kind := "even"
		if i%2 == 1 {
			kind = "odd"
		}
		res := e.send(queue, model.SendEntry{Body: b, Attributes: map[string]model.MessageAttribute{"kind": {DataType: "String", StringValue: kind}}})
		ids = append(ids, res[0].MessageID)
		e.advance(time.Second)
	}
	return ids
}

func testBrowsePages(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	want := []string{"m0", "m1", "m2", "m3", "m4"}
	e.sendSpaced("q", want...)
	for _, limit := range []int{1, 2, 5, 100} {
		got := browsedBodies(e.browseAll("q", model.BrowseRequest{Limit: limit}))
		if !slices.Equal(got, want) {
			t.Fatalf("Browse oldest first, %d a page: %v, want %v", limit, got, want)
		}
		got = browsedBodies(e.browseAll("q", model.BrowseRequest{Limit: limit, Newest: true}))
		rev := slices.Clone(want)
		slices.Reverse(rev)
		if !slices.Equal(got, rev) {
			t.Fatalf("Browse newest first, %d a page: %v, want %v", limit, got, rev)
		}
	}
	// The first page of two, then the rest from its cursor.
	p, err := e.b.Browse(e.ctx, "q", model.BrowseRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := browsedBodies(p.Messages); !slices.Equal(got, want[:2]) || p.Next == "" {
		t.Fatalf("first page %v next %q, want %v and a cursor", got, p.Next, want[:2])
	}
	// A message sent after the first page shows on a later one.
	e.sendBody("q", "m5")
	rest := browsedBodies(e.browseAll("q", model.BrowseRequest{Limit: 2, After: p.Next}))
	if !slices.Equal(rest, []string{"m2", "m3", "m4", "m5"}) {
		t.Fatalf("the pages after the first: %v, want m2 m3 m4 m5", rest)
	}
	// An empty queue has one empty page.
	e.createQueue("empty", nil)
	if p, err := e.b.Browse(e.ctx, "empty", model.BrowseRequest{}); err != nil || len(p.Messages) != 0 || p.Next != "" {
		t.Fatalf("Browse of an empty queue = %d messages, next %q, err %v", len(p.Messages), p.Next, err)
	}
}

// testBrowseStates: each message's state, VisibleAt, attempts and receive
// count, content included.
func testBrowseStates(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{
		model.AttrVisibilityTimeout: "60",
		model.AttrRetryPolicy:       retryPolicy(30, 300, model.JitterNone),
	})
	t0 := e.clock.Now()
	entry := model.SendEntry{Body: "visible", Attributes: sampleAttributes(), SystemAttributes: sampleSystemAttributes(), SenderID: "AIDAEXAMPLE"}
	visible := e.send("q", entry)[0]
	inflight := e.sendBody("q", "inflight")
	nacked := e.sendBody("q", "nacked")
	ds := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 2}, 3) // leases all three
	for _, d := range ds {
		switch d.Body {
		case "visible":
			e.snooze("q", d.Receipt, 0)
		case "nacked":
			e.nack("q", d.Receipt, "boom", nil) // backs off 30 s
		}
	}
	delayed := e.send("q", model.SendEntry{Body: "delayed", Delay: dur(10 * time.Second)})[0]
	e.wantStats("q", 1, 1, 2)

	ms := e.browseAll("q", model.BrowseRequest{})
	if got := browsedBodies(ms); !slices.Equal(got, []string{"visible", "inflight", "nacked", "delayed"}) {
		t.Fatalf("Browse shows %v, want visible inflight nacked delayed (send order)", got)
	}
	want := map[string]struct {
		id                     string
		state                  model.MessageState
		visibleAt              time.Time
		attempts, receiveCount int
		reason                 string
	}{
		"visible":  {visible.MessageID, model.StateVisible, time.Time{}, 0, 1, ""},
		"inflight": {inflight.MessageID, model.StateInFlight, t0.Add(60 * time.Second), 1, 1, ""},
		"nacked":   {nacked.MessageID, model.StateDelayed, t0.Add(30 * time.Second), 1, 1, "boom"},
		"delayed":  {delayed.MessageID, model.StateDelayed, t0.Add(10 * time.Second), 0, 0, ""},
	}
	for _, m := range ms {
		w := want[m.Body]
		if m.ID != w.id || m.State != w.state || m.Attempts != w.attempts || m.ReceiveCount != w.receiveCount || m.FailureReason != w.reason {
			t.Fatalf("browsed %q: id %s state %q attempts %d receive count %d reason %q; want %s %q %d %d %q",
				m.Body, m.ID, m.State, m.Attempts, m.ReceiveCount, m.FailureReason, w.id, w.state, w.attempts, w.receiveCount, w.reason)
		}
		if w.visibleAt.IsZero() != m.VisibleAt.IsZero() || !w.visibleAt.IsZero() && !sameInstant(m.VisibleAt, w.visibleAt) {
			t.Fatalf("browsed %q: VisibleAt %v, want %v", m.Body, m.VisibleAt, w.visibleAt)
		}
		wantTime(t, "browsed SentAt of "+m.Body, m.SentAt, t0)
	}
	v := ms[0]
	if !sameAttrs(v.Attributes, entry.Attributes) || v.SenderID != entry.SenderID ||
		v.SystemAttributes["AWSTraceHeader"].StringValue != traceHeader {
		t.Fatalf("browsed content %+v, want what was sent", v.Message)
	}
}

// testBrowseDoesNotLease: browsing changes no count and leases nothing.
func testBrowseDoesNotLease(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendSpaced("q", "a", "b")
	held := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 1}, 1)[0]
	for i := 0; i < 3; i++ {
		e.browseAll("q", model.BrowseRequest{Limit: 1})
	}
	e.wantStats("q", 1, 1, 0)
	d := e.receiveOne("q")
	wantCounts(t, "the message browsed three times", d, 1, 1)
	e.mustDelete("q", held.Receipt) // the held lease is untouched
	e.mustDelete("q", d.Receipt)
	e.wantStats("q", 0, 0, 0)
}

func testBrowseFilterAttribute(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendSpaced("q", "m0", "m1", "m2", "m3", "m4")
	e.send("q", model.SendEntry{Body: "bin", Attributes: map[string]model.MessageAttribute{"kind": {DataType: "Binary", BinaryValue: []byte("even")}}})
	e.sendBody("q", "none")
	for _, c := range []struct {
		f    model.BrowseFilter
		want []string
	}{
		{model.BrowseFilter{Attribute: "kind"}, []string{"m0", "m1", "m2", "m3", "m4", "bin"}},
		{model.BrowseFilter{Attribute: "kind", Value: "even"}, []string{"m0", "m2", "m4"}},
		{model.BrowseFilter{Attribute: "kind", Value: "odd"}, []string{"m1", "m3"}},
		{model.BrowseFilter{Attribute: "kind", Value: "neither"}, nil},
		{model.BrowseFilter{Attribute: "other"}, nil},
	} {
		for _, limit := range []int{1, 100} {
			got := browsedBodies(e.browseAll("q", model.BrowseRequest{Limit: limit, Filter: c.f}))
			if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Fatalf("Browse with %+v, %d a page: %v, want %v", c.f, limit, got, c.want)
			}
		}
	}
}

// testBrowseFilterReason: the reason filter finds failed messages, in a
// DLQ as in their own queue.
func testBrowseFilterReason(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 1)})
	e.send("q", model.SendEntry{Body: "json"}, model.SendEntry{Body: "db"}, model.SendEntry{Body: "ok"})
	for _, d := range e.receiveN(model.ReceiveRequest{Queue: "q"}, 3) {
		switch d.Body {
		case "json":
			e.nack("q", d.Receipt, "bad json at byte 7", nil)
		case "db":
			e.mustChangeLease("q", model.LeaseEntry{Receipt: d.Receipt, Kind: model.DeadLetterNow, Reason: "timeout talking to the db"})
		}
	}
	for _, c := range []struct {
		reason string
		want   []string
	}{
		{"json", []string{"json"}},
		{"db", []string{"db"}},
		{"t", []string{"json", "db"}},
		{"nothing like it", nil},
	} {
		// json and db were sent together: their order in the DLQ is free.
		got := sortedCopy(browsedBodies(e.browseAll("dlq", model.BrowseRequest{Filter: model.BrowseFilter{Reason: c.reason}})))
		if strings.Join(got, ",") != strings.Join(sortedCopy(c.want), ",") {
			t.Fatalf("Browse dlq by reason %q: %v, want %v", c.reason, got, c.want)
		}
	}
	if got := browsedBodies(e.browseAll("q", model.BrowseRequest{Filter: model.BrowseFilter{Reason: "json"}})); len(got) != 0 {
		t.Fatalf("Browse q by reason: %v, want nothing (the failed messages moved)", got)
	}
}

func testBrowseRefusals(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for _, limit := range []int{-1, model.MaxBrowse + 1} {
		_, err := e.b.Browse(e.ctx, "q", model.BrowseRequest{Limit: limit})
		wantErr(t, fmt.Sprintf("Browse limit %d", limit), err, model.ErrInvalidParameterValue)
	}
	_, err := e.b.Browse(e.ctx, "nope", model.BrowseRequest{})
	wantErr(t, "Browse of a missing queue", err, model.ErrQueueDoesNotExist)
	_, err = e.b.DeleteMessages(e.ctx, "nope", []string{"x"})
	wantErr(t, "DeleteMessages of a missing queue", err, model.ErrQueueDoesNotExist)
	_, err = e.b.DeleteMessages(e.ctx, "q", nil)
	wantErr(t, "DeleteMessages of no ids", err, model.ErrInvalidParameterValue)
}

// testDeleteMessages: DeleteMessages deletes visible, in-flight, delayed
// and backing-off messages by id and says which were there; a deleted
// in-flight message's receipt is stale.
func testDeleteMessages(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrRetryPolicy: retryPolicy(60, 300, model.JitterNone)})
	ids := map[string]string{}
	for _, b := range []string{"inflight", "backoff"} {
		ids[b] = e.sendBody("q", b).MessageID
	}
	var inflight model.Delivery
	for _, d := range e.receiveN(model.ReceiveRequest{Queue: "q"}, 2) {
		if d.Body == "backoff" {
			e.mustChangeVis("q", d.Receipt, 0)
		} else {
			inflight = d
		}
	}
	ids["visible"] = e.sendBody("q", "visible").MessageID
	ids["delayed"] = e.send("q", model.SendEntry{Body: "delayed", Delay: dur(time.Minute)})[0].MessageID
	ids["kept"] = e.sendBody("q", "kept").MessageID
	e.wantStats("q", 2, 1, 2)
	ask := []string{ids["inflight"], ids["backoff"], "00000000-0000-4000-8000-000000000000", ids["visible"], ids["delayed"]}
	found, err := e.b.DeleteMessages(e.ctx, "q", ask)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []bool{true, true, false, true, true}) {
		t.Fatalf("DeleteMessages found %v, want [true true false true true]", found)
	}
	e.wantStats("q", 1, 0, 0)
	wantErr(t, "ChangeVisibility of a message deleted by id", e.changeVisErr("q", inflight.Receipt, time.Minute), model.ErrInvalidParameterValue)
	if err := e.deleteErr("q", inflight.Receipt); err != nil {
		t.Fatalf("Delete with the receipt of a message deleted by id: %v, want success without effect", err)
	}
	again, err := e.b.DeleteMessages(e.ctx, "q", []string{ids["visible"]})
	if err != nil || !slices.Equal(again, []bool{false}) {
		t.Fatalf("a second DeleteMessages = %v, %v; want [false]", again, err)
	}
	e.advance(2 * time.Minute)
	if d := e.receiveOne("q"); d.Body != "kept" {
		t.Fatalf("received %q, want kept", d.Body)
	}
	e.receiveNone("q")
}

// testDeleteMessagesFifo: deleting a leased FIFO message by id frees its
// group.
func testDeleteMessagesFifo(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	a := e.fsend("q.fifo", "g", "1", "a")
	e.fsend("q.fifo", "g", "2", "b")
	wantBodies(t, "first receive", e.receiveMax("q.fifo", 1, 0), "a")
	if ds := e.receiveMax("q.fifo", 10, 0); len(ds) != 0 {
		t.Fatalf("group g is leased, yet a receive gave %v", bodies(ds))
	}
	found, err := e.b.DeleteMessages(e.ctx, "q.fifo", []string{a.MessageID})
	if err != nil || !slices.Equal(found, []bool{true}) {
		t.Fatalf("DeleteMessages = %v, %v", found, err)
	}
	wantBodies(t, "the group after its head was deleted by id", e.receiveMax("q.fifo", 10, 0), "b")
}

// testDeleteMessagesIDForms: message ids are UUIDs and compare as such, in
// any case (as a replay of chosen ids compares them); an id asked for twice
// is answered true at both places when the message was there.
func testDeleteMessagesIDForms(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	a := e.sendBody("q", "a").MessageID
	b := e.sendBody("q", "b").MessageID
	e.sendBody("q", "kept")
	found, err := e.b.DeleteMessages(e.ctx, "q", []string{strings.ToUpper(a), b, b})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []bool{true, true, true}) {
		t.Fatalf("DeleteMessages([upper(a), b, b]) found %v, want [true true true]", found)
	}
	e.wantStats("q", 1, 0, 0)
	if d := e.receiveOne("q"); d.Body != "kept" {
		t.Fatalf("received %q, want kept", d.Body)
	}
}
