package brokertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

var batchTests = []testCase{
	{"SendEntryRules", testBatchSendEntryRules},
	{"DeleteEntryRules", testBatchDeleteEntryRules},
	{"ChangeVisibilityEntryRules", testBatchChangeVisibilityEntryRules},
	{"SendTooLong", testBatchSendTooLong},
	{"SendPartialFailure", testBatchSendPartialFailure},
	{"DeletePartialFailure", testBatchDeletePartialFailure},
	{"ChangeVisibilityPartialFailure", testBatchChangeVisibilityPartialFailure},
}

// badBatches are id lists that fail a whole batch call, with their error.
func badBatches() []struct {
	what string
	ids  []string
	want error
} {
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprint("id", i)
	}
	return []struct {
		what string
		ids  []string
		want error
	}{
		{"no entries", nil, model.ErrEmptyBatch},
		{"11 entries", eleven, model.ErrTooManyEntries},
		{"duplicate ids", []string{"a", "b", "a"}, model.ErrBatchIDsNotDistinct},
		{"an id with a space", []string{"a", "b c"}, model.ErrInvalidBatchEntryID},
		{"an id with a dot", []string{"a", "b.c"}, model.ErrInvalidBatchEntryID},
		{"an 81-character id", []string{"a", strings.Repeat("x", 81)}, model.ErrInvalidBatchEntryID},
		{"an empty id in a batch", []string{"a", ""}, model.ErrInvalidBatchEntryID},
	}
}

// goodIDs are the longest and most varied ids that must be accepted.
var goodIDs = []string{strings.Repeat("x", 80), "A-z_09", "1"}

func testBatchSendEntryRules(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	for _, c := range badBatches() {
		entries := make([]model.SendEntry, len(c.ids))
		for i, id := range c.ids {
			entries[i] = model.SendEntry{ID: id, Body: "x"}
		}
		_, err := e.b.Send(e.ctx, "q", entries)
		wantErr(t, "Send with "+c.what, err, c.want)
	}
	e.wantStats("q", 0, 0, 0) // no entry of a refused batch was stored
	entries := make([]model.SendEntry, 0, 10)
	for i := 0; i < 10; i++ {
		id := fmt.Sprint("e", i)
		if i < len(goodIDs) {
			id = goodIDs[i]
		}
		entries = append(entries, model.SendEntry{ID: id, Body: "x"})
	}
	e.send("q", entries...)
	e.wantStats("q", 10, 0, 0)
}

// leaseN sends n messages to q and leases them all for the queue default.
func (e *env) leaseN(q string, n int) []model.Delivery {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.sendBody(q, fmt.Sprint("m", i))
	}
	return e.receiveN(model.ReceiveRequest{Queue: q}, n)
}

func testBatchDeleteEntryRules(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	ds := e.leaseN("q", 10)
	for _, c := range badBatches() {
		entries := make([]model.DeleteEntry, len(c.ids))
		for i, id := range c.ids {
			entries[i] = model.DeleteEntry{ID: id, Receipt: ds[i%len(ds)].Receipt}
		}
		_, err := e.b.Delete(e.ctx, "q", entries)
		wantErr(t, "Delete with "+c.what, err, c.want)
	}
	e.wantStats("q", 0, 10, 0) // nothing was deleted
	entries := make([]model.DeleteEntry, len(ds))
	for i, d := range ds {
		id := fmt.Sprint("e", i)
		if i < len(goodIDs) {
			id = goodIDs[i]
		}
		entries[i] = model.DeleteEntry{ID: id, Receipt: d.Receipt}
	}
	errs, err := e.b.Delete(e.ctx, "q", entries)
	if err != nil || len(errs) != 10 {
		t.Fatalf("Delete of 10: %d results, err %v", len(errs), err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Delete entry %d: %v", i, err)
		}
	}
	e.wantStats("q", 0, 0, 0)
}

func testBatchChangeVisibilityEntryRules(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	ds := e.leaseN("q", 10)
	for _, c := range badBatches() {
		entries := make([]model.VisibilityEntry, len(c.ids))
		for i, id := range c.ids {
			entries[i] = model.VisibilityEntry{ID: id, Receipt: ds[i%len(ds)].Receipt, Timeout: 0}
		}
		_, err := e.b.ChangeVisibility(e.ctx, "q", entries)
		wantErr(t, "ChangeVisibility with "+c.what, err, c.want)
	}
	e.wantStats("q", 0, 10, 0) // nothing was made visible
	entries := make([]model.VisibilityEntry, len(ds))
	for i, d := range ds {
		entries[i] = model.VisibilityEntry{ID: fmt.Sprint("e", i), Receipt: d.Receipt, Timeout: 0}
	}
	errs, err := e.b.ChangeVisibility(e.ctx, "q", entries)
	if err != nil || len(errs) != 10 {
		t.Fatalf("ChangeVisibility of 10: %d results, err %v", len(errs), err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ChangeVisibility entry %d: %v", i, err)
		}
	}
	e.wantStats("q", 10, 0, 0)
}

func testBatchSendTooLong(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	half := strings.Repeat("h", model.MaxBatchBytes/2)
	// Exactly 1 MiB in total is allowed.
	e.send("q", model.SendEntry{ID: "a", Body: half}, model.SendEntry{ID: "b", Body: half})
	e.wantStats("q", 2, 0, 0)
	// One byte more fails the whole call.
	_, err := e.b.Send(e.ctx, "q", []model.SendEntry{{ID: "a", Body: half}, {ID: "b", Body: half + "x"}})
	wantErr(t, "Send of 1 MiB + 1 byte in total", err, model.ErrBatchRequestTooLong)
	// Attributes count toward the total.
	_, err = e.b.Send(e.ctx, "q", []model.SendEntry{
		{ID: "a", Body: half},
		{ID: "b", Body: half[:len(half)-5], Attributes: map[string]model.MessageAttribute{"k": {DataType: "String", StringValue: "v"}}},
	})
	wantErr(t, "Send of 1 MiB of bodies plus attributes", err, model.ErrBatchRequestTooLong)
	var ten []model.SendEntry
	for i := 0; i < 10; i++ {
		ten = append(ten, model.SendEntry{ID: fmt.Sprint("e", i), Body: strings.Repeat("t", 110*1024)})
	}
	_, err = e.b.Send(e.ctx, "q", ten)
	wantErr(t, "Send of 10 × 110 KiB", err, model.ErrBatchRequestTooLong)
	// A batch of one entry is still a batch; a plain send (no id) of the same
	// body fails with its own size error.
	_, err = e.b.Send(e.ctx, "q", []model.SendEntry{{ID: "only", Body: half + half + "x"}})
	wantErr(t, "Send of one entry of 1 MiB + 1 byte", err, model.ErrBatchRequestTooLong)
	wantErr(t, "plain send of 1 MiB + 1 byte", e.plainSendErr("q", model.SendEntry{Body: half + half + "x"}), model.ErrInvalidParameterValue)
	e.wantStats("q", 2, 0, 0)
}

func testBatchSendPartialFailure(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaximumMessageSize: "1024"})
	entries := []model.SendEntry{
		{ID: "ok1", Body: "one"},
		{ID: "empty", Body: ""},
		{ID: "ok2", Body: "two", Delay: dur(0)},
		{ID: "badchars", Body: "a\x00b"},
		{ID: "oversize", Body: strings.Repeat("o", 1025)},
		{ID: "baddelay", Body: "d", Delay: dur(model.MaxDelay + time.Second)},
		{ID: "badattr", Body: "a", Attributes: map[string]model.MessageAttribute{"AWS.x": {DataType: "String", StringValue: "v"}}},
		{ID: "ok3", Body: "three", Attributes: sampleAttributes()},
	}
	want := []error{nil, model.ErrMissingParameter, nil, model.ErrInvalidMessageContents, model.ErrInvalidParameterValue,
		model.ErrInvalidParameterValue, model.ErrInvalidParameterValue, nil}
	res, err := e.trySend("q", entries...)
	if err != nil {
		t.Fatalf("Send with some bad entries failed as a whole: %v", err)
	}
	for i, r := range res {
		if r.ID != entries[i].ID {
			t.Fatalf("result %d has id %q, want %q (results are in entry order)", i, r.ID, entries[i].ID)
		}
		if want[i] == nil {
			if r.Err != nil || !messageIDRe.MatchString(r.MessageID) {
				t.Fatalf("entry %s: err %v, MessageID %q", r.ID, r.Err, r.MessageID)
			}
			continue
		}
		wantErr(t, "entry "+r.ID, r.Err, want[i])
	}
	e.wantStats("q", 3, 0, 0)
	ds := e.receiveN(model.ReceiveRequest{Queue: "q"}, 3)
	if got := strings.Join(bodies(ds), ","); got != "one,three,two" {
		t.Fatalf("stored bodies %s, want one,three,two", got)
	}
}

func testBatchDeletePartialFailure(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.createQueue("other", nil)
	ds := e.leaseN("q", 3)
	od := e.leaseN("other", 1)[0]
	errs, err := e.b.Delete(e.ctx, "q", []model.DeleteEntry{
		{ID: "a", Receipt: ds[0].Receipt},
		{ID: "garbage", Receipt: "garbage"},
		{ID: "b", Receipt: ds[1].Receipt},
		{ID: "foreign", Receipt: od.Receipt},
		{ID: "again", Receipt: ds[0].Receipt}, // the same message twice: already deleted, succeeds
	})
	if err != nil || len(errs) != 5 {
		t.Fatalf("Delete batch: %d results, err %v", len(errs), err)
	}
	if errs[0] != nil || errs[2] != nil || errs[4] != nil {
		t.Fatalf("good delete entries failed: %v", errs)
	}
	wantErr(t, "garbage entry", errs[1], model.ErrReceiptHandleInvalid)
	wantErr(t, "entry with a receipt of another queue", errs[3], model.ErrReceiptHandleInvalid)
	e.wantStats("q", 0, 1, 0)
	e.wantStats("other", 0, 1, 0)
}

func testBatchChangeVisibilityPartialFailure(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil) // 30 s leases
	ds := e.leaseN("q", 4)
	e.mustDelete("q", ds[3].Receipt)
	errs, err := e.b.ChangeVisibility(e.ctx, "q", []model.VisibilityEntry{
		{ID: "nack", Receipt: ds[0].Receipt, Timeout: 0},
		{ID: "garbage", Receipt: "garbage", Timeout: 0},
		{ID: "extend", Receipt: ds[1].Receipt, Timeout: time.Hour},
		{ID: "deleted", Receipt: ds[3].Receipt, Timeout: 0},
	})
	if err != nil || len(errs) != 4 {
		t.Fatalf("ChangeVisibility batch: %d results, err %v", len(errs), err)
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("good entries failed: %v", errs)
	}
	wantErr(t, "garbage entry", errs[1], model.ErrReceiptHandleInvalid)
	wantErr(t, "entry of a deleted message", errs[3], model.ErrInvalidParameterValue)
	e.wantStats("q", 1, 2, 0)
	if d := e.receiveOne("q"); d.ID != ds[0].ID {
		t.Fatalf("visible message is %s, want the nacked %s", d.ID, ds[0].ID)
	} else {
		e.mustDelete("q", d.Receipt)
	}
	// ds[2] keeps its 30 s lease; ds[1] was extended to an hour.
	e.advance(30 * time.Second)
	e.eventuallyStats("q", 1, 1, 0)
	if d := e.receiveOne("q"); d.ID != ds[2].ID {
		t.Fatalf("after 30 s got %s, want the unchanged lease %s", d.ID, ds[2].ID)
	} else {
		e.mustDelete("q", d.Receipt)
	}
	e.advance(time.Hour - 31*time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.ID != ds[1].ID {
		t.Fatalf("after an hour got %s, want the extended %s", d.ID, ds[1].ID)
	}
}
