package brokertest

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// The message option tests: Sluice.Priority's order, and the Sluice.*
// attributes as ordinary attributes (stored byte for byte, counted in the
// 10) with their per-entry refusals.
var priorityTests = []testCase{
	{"StrictOrder", testPriorityOrder},
	{"BatchTakesHighestFirst", testPriorityBatch},
	{"FifoRefusesPriority", testPriorityFifoRefused},
	{"SluiceAttributesByteForByte", testSluiceAttrsByteForByte},
	{"SluiceAttributesCountInTheTen", testSluiceAttrsCount},
	{"SluiceOptionRefusals", testSluiceOptionRefusals},
}

// testPriorityOrder: higher priority is served first, send order within a
// level; the delivery carries its priority.
func testPriorityOrder(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for _, m := range []struct {
		body string
		p    int
	}{{"0a", 0}, {"-5a", -5}, {"10a", 10}, {"0b", 0}, {"10b", 10}, {"-5b", -5}, {"100", 100}, {"-100", -100}} {
		e.send("q", withPriority(m.body, m.p))
	}
	e.sendBody("q", "0c") // no Sluice.Priority: 0
	var got []string
	for i := 0; i < 9; i++ {
		d := e.receiveN(model.ReceiveRequest{Queue: "q", MaxMessages: 1}, 1)[0]
		if want := strings.TrimRight(d.Body, "abc"); fmt.Sprint(d.Priority) != want {
			t.Fatalf("%q delivered with Priority %d, want %s", d.Body, d.Priority, want)
		}
		got = append(got, d.Body)
	}
	if want := "100 10a 10b 0a 0b 0c -5a -5b -100"; strings.Join(got, " ") != want {
		t.Fatalf("received %v, want %s", got, want)
	}
}

// testPriorityBatch: a receive of 10 from 12 messages takes the 6 of
// priority 1 and the 4 oldest of priority -1.
func testPriorityBatch(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	var low, high []model.SendEntry
	for i := 0; i < 6; i++ {
		low = append(low, withPriority(fmt.Sprintf("low%d", i), -1))
		high = append(high, withPriority(fmt.Sprintf("high%d", i), 1))
	}
	e.send("q", low...)
	e.send("q", high...)
	ds := e.receiveMax("q", 10, 0)
	want := []string{"high0", "high1", "high2", "high3", "high4", "high5", "low0", "low1", "low2", "low3"}
	if got := bodies(ds); strings.Join(got, ",") != strings.Join(sortedCopy(want), ",") {
		t.Fatalf("a receive of 10 got %v, want %v", got, want)
	}
	wantBodies(t, "the rest", e.receiveMax("q", 10, 0), "low4", "low5")
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// testPriorityFifoRefused: a FIFO queue refuses Sluice.Priority per entry.
func testPriorityFifoRefused(t *testing.T, s suite) {
	e := s.setup(t)
	e.fifoQueue("q.fifo", nil)
	p := fmsg("g", "1", "prio")
	p.ID = "p"
	p.Attributes = map[string]model.MessageAttribute{model.MsgAttrPriority: numAttr(5)}
	ok := fmsg("g", "2", "plain")
	ok.ID = "ok"
	res, err := e.trySend("q.fifo", p, ok)
	if err != nil {
		t.Fatalf("a FIFO batch with one Sluice.Priority entry: %v, want per-entry results", err)
	}
	wantErr(t, "Sluice.Priority on a FIFO queue", res[0].Err, model.ErrInvalidParameterValue)
	if res[1].Err != nil {
		t.Fatalf("the plain entry: %v", res[1].Err)
	}
	wantBodies(t, "the FIFO queue", e.receiveMax("q.fifo", 10, 0), "plain")
}

// testSluiceAttrsByteForByte: Sluice.* attributes are returned as sent,
// data type label and value spelling included, and read as options.
func testSluiceAttrsByteForByte(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil)
	e.createQueue("q", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 5)})
	attrs := map[string]model.MessageAttribute{
		model.MsgAttrPriority:      {DataType: "Number.level", StringValue: "07"},
		model.MsgAttrMaxAttempts:   {DataType: "Number", StringValue: "+3"},
		model.MsgAttrCorrelationID: {DataType: "String.id", StringValue: "corr-ünï 1"},
		"traceparent":              {DataType: "String", StringValue: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"plain":                    {DataType: "String", StringValue: "x"},
	}
	res := e.send("q", model.SendEntry{Body: "a", Attributes: attrs})[0]
	d := e.receiveOne("q")
	if d.ID != res.MessageID || !sameAttrs(d.Attributes, attrs) {
		t.Fatalf("delivered attributes %v, want %v byte for byte", d.Attributes, attrs)
	}
	if d.Priority != 7 || d.MaxAttempts != 3 {
		t.Fatalf("delivered Priority %d MaxAttempts %d, want 7 and 3", d.Priority, d.MaxAttempts)
	}
	if m := e.browsed("q", res.MessageID); !sameAttrs(m.Attributes, attrs) {
		t.Fatalf("browsed attributes %v, want %v", m.Attributes, attrs)
	}
}

// testSluiceAttrsCount: the Sluice.* attributes count in the 10.
func testSluiceAttrsCount(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	attrs := map[string]model.MessageAttribute{model.MsgAttrPriority: numAttr(1)}
	for i := 0; i < 9; i++ {
		attrs[fmt.Sprintf("a%d", i)] = model.MessageAttribute{DataType: "String", StringValue: "v"}
	}
	e.send("q", model.SendEntry{Body: "ten", Attributes: attrs})
	attrs[model.MsgAttrCorrelationID] = model.MessageAttribute{DataType: "String", StringValue: "c"}
	wantErr(t, "11 attributes, 2 of them Sluice.*", e.sendErr("q", model.SendEntry{Body: "eleven", Attributes: attrs}), model.ErrInvalidParameterValue)
	e.wantStats("q", 1, 0, 0)
}

// testSluiceOptionRefusals: an unknown Sluice.* name, a wrong type, an
// out-of-range value, Sluice.MaxAttempts without a RedrivePolicy: each
// fails its own entry with InvalidParameterValue, the others are stored.
func testSluiceOptionRefusals(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	str := func(v string) model.MessageAttribute {
		return model.MessageAttribute{DataType: "String", StringValue: v}
	}
	num := func(v string) model.MessageAttribute {
		return model.MessageAttribute{DataType: "Number", StringValue: v}
	}
	bad := []map[string]model.MessageAttribute{
		{"Sluice.Unknown": str("x")},
		{"sluice.priority": num("1")},
		{model.MsgAttrPriority: str("1")},
		{model.MsgAttrPriority: num("101")},
		{model.MsgAttrPriority: num("-101")},
		{model.MsgAttrPriority: num("1.5")},
		{model.MsgAttrMaxAttempts: num("3")}, // the queue has no RedrivePolicy
		{model.MsgAttrCorrelationID: num("1")},
		{model.MsgAttrCorrelationID: str(strings.Repeat("c", model.MaxCorrelationIDBytes+1))},
	}
	entries := []model.SendEntry{{ID: "good", Body: "good", Attributes: map[string]model.MessageAttribute{model.MsgAttrPriority: num("-100")}}}
	for i, a := range bad {
		entries = append(entries, model.SendEntry{ID: fmt.Sprintf("bad%d", i), Body: "bad", Attributes: a})
	}
	res, err := e.trySend("q", entries...)
	if err != nil {
		t.Fatalf("a batch of refused Sluice options: %v, want per-entry results", err)
	}
	if res[0].Err != nil {
		t.Fatalf("the good entry: %v", res[0].Err)
	}
	for i, r := range res[1:] {
		wantErr(t, fmt.Sprintf("entry with %v", bad[i]), r.Err, model.ErrInvalidParameterValue)
	}
	e.wantStats("q", 1, 0, 0)
	// With a RedrivePolicy, Sluice.MaxAttempts is taken, from 1 to 1000.
	e.createQueue("dlq", nil)
	e.createQueue("r", map[string]string{model.AttrRedrivePolicy: redrivePolicy("dlq", 3)})
	for v, ok := range map[string]bool{"1": true, "1000": true, "0": false, "1001": false} {
		err := e.sendErr("r", model.SendEntry{Body: v, Attributes: map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: num(v)}})
		if ok && err != nil {
			t.Fatalf("Sluice.MaxAttempts %s: %v", v, err)
		}
		if !ok {
			wantErr(t, "Sluice.MaxAttempts "+v, err, model.ErrInvalidParameterValue)
		}
	}
}
