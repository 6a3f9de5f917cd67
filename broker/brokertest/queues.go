package brokertest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

var queueTests = []testCase{
	{"CreateQueueDefaults", testCreateQueueDefaults},
	{"CreateQueueIdempotent", testCreateQueueIdempotent},
	{"CreateQueueInvalidName", testCreateQueueInvalidName},
	{"CreateQueueAttributeRanges", testCreateQueueAttributeRanges},
	{"GetQueueMissing", testGetQueueMissing},
	{"ListQueues", testListQueues},
	{"ListQueuesStablePages", testListQueuesStablePages},
	{"SetQueueAttributes", testSetQueueAttributes},
	{"SetQueueAttributesTakeEffect", testSetQueueAttributesTakeEffect},
	{"DeleteQueue", testDeleteQueue},
	{"DeleteQueueEndsWaitingReceive", testDeleteQueueEndsWaitingReceive},
	{"PurgeQueue", testPurgeQueue},
	{"StrictPurge", testStrictPurge},
	{"AccountsKeepQueuesApart", testAccountsKeepQueuesApart},
}

// testAccountsKeepQueuesApart drives the seam directly: a backend keys every
// queue by (account, name), so two accounts may each have a queue "orders"
// with their own messages, listings, updates and deletes. (accounts.go
// reaches other accounts through the front.)
func testAccountsKeepQueuesApart(t *testing.T, s suite) {
	e := s.setup(t)
	own := model.QueueRef{Name: "orders"}
	other := model.QueueRef{Account: "111122223333", Name: "orders"}
	for _, r := range []model.QueueRef{own, other} {
		q, created, err := e.be.CreateQueue(e.ctx, storage.QueueSpec{QueueRef: r, Config: model.DefaultQueueConfig(false)})
		if err != nil || !created || q.Account != r.Account || q.Name != r.Name {
			t.Fatalf("CreateQueue(%v) = %+v, created %v, %v", r, q, created, err)
		}
	}
	if _, err := e.be.Send(e.ctx, other, []model.SendEntry{{Body: "for the other account"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.be.UpdateQueue(e.ctx, other, model.QueueChange{Attributes: map[string]string{model.AttrVisibilityTimeout: "99"}}); err != nil {
		t.Fatal(err)
	}
	e.reopen() // the account is part of the stored queue
	mine, err := e.be.GetQueue(e.ctx, own)
	if err != nil || mine.Stats.Visible != 0 || mine.Config.VisibilityTimeout != 30*time.Second {
		t.Fatalf("own queue = %+v, %v; want empty, default visibility", mine, err)
	}
	theirs, err := e.be.GetQueue(e.ctx, other)
	if err != nil || theirs.Stats.Visible != 1 || theirs.Config.VisibilityTimeout != 99*time.Second || theirs.ID == mine.ID {
		t.Fatalf("other account's queue = %+v, %v; want one message, visibility 99 s, its own id", theirs, err)
	}
	for account, want := range map[string]uint64{"": mine.ID, other.Account: theirs.ID} {
		qs, err := e.be.ListQueues(e.ctx, account, "", "", 0)
		if err != nil || len(qs) != 1 || qs[0].ID != want || qs[0].Account != account {
			t.Fatalf("ListQueues(%q) = %+v, %v; want only queue %d", account, qs, err, want)
		}
	}
	// An unauthenticated caller sees the broker's own account only.
	e.receiveNone("orders")
	if err := e.be.DeleteQueue(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := e.be.GetQueue(e.ctx, other); !errors.Is(err, model.ErrQueueDoesNotExist) {
		t.Fatalf("GetQueue of the deleted queue: %v", err)
	}
	if _, err := e.be.GetQueue(e.ctx, own); err != nil {
		t.Fatalf("deleting the other account's queue took the own one: %v", err)
	}
}

func testCreateQueueDefaults(t *testing.T, s suite) {
	e := s.setup(t)
	e.advance(7 * time.Second)
	now := e.clock.Now()
	q, err := e.b.CreateQueue(e.ctx, "orders", nil, map[string]string{"team": "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "orders" || q.ID == 0 {
		t.Fatalf("CreateQueue returned name %q id %d", q.Name, q.ID)
	}
	wantTime(t, "CreatedAt", q.CreatedAt, now)
	wantTime(t, "ModifiedAt", q.ModifiedAt, now)
	if got, want := q.Config.Attributes(), model.DefaultQueueConfig(false).Attributes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("new queue attributes = %v, want the defaults %v", got, want)
	}
	if q.Tags["team"] != "billing" {
		t.Fatalf("tags = %v, want team=billing", q.Tags)
	}
	info := e.getQueue("orders")
	if info.ID != q.ID || info.Name != "orders" || !reflect.DeepEqual(info.Config.Attributes(), q.Config.Attributes()) {
		t.Fatalf("GetQueue = %+v, want the created queue %+v", info.Queue, q)
	}
	wantTime(t, "GetQueue CreatedAt", info.CreatedAt, now)
	if info.Stats != (model.QueueStats{}) {
		t.Fatalf("new queue counts = %+v, want zero", info.Stats)
	}
	other := e.createQueue("payments", nil)
	if other.ID == q.ID {
		t.Fatalf("two queues share id %d", q.ID)
	}
}

func testCreateQueueIdempotent(t *testing.T, s suite) {
	e := s.setup(t)
	attrs := map[string]string{model.AttrVisibilityTimeout: "60", model.AttrDelaySeconds: "5"}
	q := e.createQueue("q", attrs)
	e.advance(time.Second)
	for _, again := range []map[string]string{
		attrs,
		{model.AttrVisibilityTimeout: "60"}, // a subset: every given attribute matches
		nil,
		{model.AttrMaximumMessageSize: "1048576"}, // equals the default
	} {
		got, err := e.b.CreateQueue(e.ctx, "q", again, nil)
		if err != nil {
			t.Fatalf("CreateQueue again with %v: %v", again, err)
		}
		if got.ID != q.ID {
			t.Fatalf("CreateQueue again with %v returned id %d, want the existing %d", again, got.ID, q.ID)
		}
		wantTime(t, "CreatedAt of the existing queue", got.CreatedAt, q.CreatedAt)
	}
	for _, differing := range []map[string]string{
		{model.AttrVisibilityTimeout: "61"},
		{model.AttrDelaySeconds: "0"},
		{model.AttrVisibilityTimeout: "60", model.AttrMessageRetentionPeriod: "60"},
	} {
		_, err := e.b.CreateQueue(e.ctx, "q", differing, nil)
		wantErr(t, "CreateQueue with differing attributes", err, model.ErrQueueExists)
	}
	if got := e.getQueue("q").Config; got.VisibilityTimeout != time.Minute || got.Delay != 5*time.Second {
		t.Fatalf("a refused CreateQueue changed the queue: %+v", got)
	}
	// Names are case-sensitive.
	if upper := e.createQueue("Q", nil); upper.ID == q.ID {
		t.Fatal("queue names are case-sensitive, but Q and q share an id")
	}
}

func testCreateQueueInvalidName(t *testing.T, s suite) {
	e := s.setup(t)
	for _, name := range []string{"", strings.Repeat("a", 81), "has space", "dot.name", "slash/name", "ümlaut", "tab\t"} {
		_, err := e.b.CreateQueue(e.ctx, name, nil, nil)
		wantErr(t, "CreateQueue("+name+")", err, model.ErrInvalidParameterValue)
	}
	if qs, err := e.b.ListQueues(e.ctx, "", "", 0); err != nil || len(qs) != 0 {
		t.Fatalf("after invalid names ListQueues = %v, %v; want none", qs, err)
	}
	for _, name := range []string{strings.Repeat("a", 80), "A-b_9", "x"} {
		e.createQueue(name, nil)
	}
}

func testCreateQueueAttributeRanges(t *testing.T, s suite) {
	e := s.setup(t)
	bad := []struct {
		name, value string
		want        error
	}{
		{model.AttrVisibilityTimeout, "-1", model.ErrInvalidAttributeValue},
		{model.AttrVisibilityTimeout, "43201", model.ErrInvalidAttributeValue},
		{model.AttrVisibilityTimeout, "abc", model.ErrInvalidAttributeValue},
		{model.AttrDelaySeconds, "901", model.ErrInvalidAttributeValue},
		{model.AttrDelaySeconds, "-1", model.ErrInvalidAttributeValue},
		{model.AttrMessageRetentionPeriod, "59", model.ErrInvalidAttributeValue},
		{model.AttrMessageRetentionPeriod, "1209601", model.ErrInvalidAttributeValue},
		{model.AttrMaximumMessageSize, "1023", model.ErrInvalidAttributeValue},
		{model.AttrMaximumMessageSize, "1048577", model.ErrInvalidAttributeValue},
		{model.AttrReceiveMessageWaitTimeSeconds, "21", model.ErrInvalidAttributeValue},
		{model.AttrReceiveMessageWaitTimeSeconds, "-1", model.ErrInvalidAttributeValue},
		{model.AttrRedrivePolicy, "{", model.ErrInvalidAttributeValue},
		{model.AttrRedrivePolicy, `{"maxReceiveCount":3}`, model.ErrInvalidAttributeValue},
		{model.AttrRedriveAllowPolicy, `{"redrivePermission":"sometimes"}`, model.ErrInvalidAttributeValue},
		{model.AttrPolicy, "not json", model.ErrInvalidAttributeValue},
		{"Foo", "1", model.ErrInvalidAttributeName},
		{model.AttrQueueArn, arn("q"), model.ErrInvalidAttributeName},
		{model.AttrContentBasedDeduplication, "true", model.ErrInvalidAttributeName}, // FIFO only
		{model.AttrDeduplicationScope, "queue", model.ErrInvalidAttributeName},       // FIFO only
	}
	for _, c := range bad {
		_, err := e.b.CreateQueue(e.ctx, "q", map[string]string{c.name: c.value}, nil)
		wantErr(t, "CreateQueue with "+c.name+"="+c.value, err, c.want)
		_, err = e.b.GetQueue(e.ctx, "q")
		wantErr(t, "GetQueue after a refused CreateQueue", err, model.ErrQueueDoesNotExist)
	}
	good := []struct{ name, value string }{
		{model.AttrVisibilityTimeout, "0"}, {model.AttrVisibilityTimeout, "43200"},
		{model.AttrDelaySeconds, "0"}, {model.AttrDelaySeconds, "900"},
		{model.AttrMessageRetentionPeriod, "60"}, {model.AttrMessageRetentionPeriod, "1209600"},
		{model.AttrMaximumMessageSize, "1024"}, {model.AttrMaximumMessageSize, "1048576"},
		{model.AttrReceiveMessageWaitTimeSeconds, "0"}, {model.AttrReceiveMessageWaitTimeSeconds, "20"},
	}
	for i, c := range good {
		name := "good-" + string(rune('a'+i))
		q := e.createQueue(name, map[string]string{c.name: c.value})
		if got := q.Config.Attributes()[c.name]; got != c.value {
			t.Fatalf("queue created with %s=%s reads %s", c.name, c.value, got)
		}
		if got := e.getQueue(name).Config.Attributes()[c.name]; got != c.value {
			t.Fatalf("GetQueue of a queue created with %s=%s reads %s", c.name, c.value, got)
		}
	}
}

func testGetQueueMissing(t *testing.T, s suite) {
	e := s.setup(t)
	_, err := e.b.GetQueue(e.ctx, "nope")
	wantErr(t, "GetQueue(nope)", err, model.ErrQueueDoesNotExist)
	e.createQueue("nope-not", nil)
	_, err = e.b.GetQueue(e.ctx, "nope")
	wantErr(t, "GetQueue(nope) beside nope-not", err, model.ErrQueueDoesNotExist)
	// A name no queue can have does not exist either, on every backend: the
	// front answers it without asking the store (PostgreSQL refuses a NUL
	// byte or invalid UTF-8 in a query: that was an internal error).
	for _, name := range []string{"bad\x00name", "bad\xffname", "", strings.Repeat("a", 81), "dot.name"} {
		_, err := e.b.GetQueue(e.ctx, name)
		wantErr(t, fmt.Sprintf("GetQueue(%q)", name), err, model.ErrQueueDoesNotExist)
		_, err = e.b.Send(e.ctx, name, []model.SendEntry{{Body: "x"}})
		wantErr(t, fmt.Sprintf("Send(%q)", name), err, model.ErrQueueDoesNotExist)
		_, err = e.b.Receive(e.ctx, model.ReceiveRequest{Queue: name})
		wantErr(t, fmt.Sprintf("Receive(%q)", name), err, model.ErrQueueDoesNotExist)
		err = e.b.DeleteQueue(e.ctx, name)
		wantErr(t, fmt.Sprintf("DeleteQueue(%q)", name), err, model.ErrQueueDoesNotExist)
	}
}

func queueNames(qs []model.Queue) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Name
	}
	return out
}

func (e *env) wantList(prefix, after string, limit int, want ...string) {
	e.t.Helper()
	qs, err := e.b.ListQueues(e.ctx, prefix, after, limit)
	if err != nil {
		e.t.Fatalf("ListQueues(%q, %q, %d): %v", prefix, after, limit, err)
	}
	if got := queueNames(qs); strings.Join(got, ",") != strings.Join(want, ",") {
		e.t.Fatalf("ListQueues(%q, %q, %d) = %v, want %v", prefix, after, limit, got, want)
	}
}

func testListQueues(t *testing.T, s suite) {
	e := s.setup(t)
	e.wantList("", "", 0)
	ids := map[string]uint64{}
	for _, n := range []string{"beta", "alpha-2", "Alpha", "alpha-10", "alpha-1", "alpha-3"} {
		ids[n] = e.createQueue(n, map[string]string{model.AttrDelaySeconds: "3"}).ID
	}
	e.wantList("", "", 0, "Alpha", "alpha-1", "alpha-10", "alpha-2", "alpha-3", "beta")
	e.wantList("", "", -1, "Alpha", "alpha-1", "alpha-10", "alpha-2", "alpha-3", "beta")
	e.wantList("alpha", "", 0, "alpha-1", "alpha-10", "alpha-2", "alpha-3")
	e.wantList("alpha", "", 2, "alpha-1", "alpha-10")
	e.wantList("alpha", "alpha-10", 2, "alpha-2", "alpha-3")
	e.wantList("alpha", "alpha-3", 2)
	e.wantList("alpha-1", "", 0, "alpha-1", "alpha-10")
	e.wantList("gamma", "", 0)
	e.wantList("", "alpha-2", 0, "alpha-3", "beta")
	e.wantList("", "", 1, "Alpha")
	qs, err := e.b.ListQueues(e.ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.ID != ids[q.Name] || q.Config.Delay != 3*time.Second {
			t.Fatalf("ListQueues entry %s: id %d config delay %v; want id %d delay 3s", q.Name, q.ID, q.Config.Delay, ids[q.Name])
		}
	}
}

func testListQueuesStablePages(t *testing.T, s suite) {
	e := s.setup(t)
	for _, n := range []string{"q1", "q2", "q3", "q4", "q5"} {
		e.createQueue(n, nil)
	}
	e.wantList("q", "", 2, "q1", "q2")
	// Queues come and go between pages: the next page still starts after q2.
	if err := e.b.DeleteQueue(e.ctx, "q2"); err != nil {
		t.Fatal(err)
	}
	e.createQueue("q0", nil)
	e.wantList("q", "q2", 2, "q3", "q4")
	e.wantList("q", "q4", 2, "q5")
	e.wantList("q", "", 0, "q0", "q1", "q3", "q4", "q5")
}

func testSetQueueAttributes(t *testing.T, s suite) {
	e := s.setup(t)
	q := e.createQueue("q", nil)
	e.advance(10 * time.Second)
	set := map[string]string{
		model.AttrVisibilityTimeout:             "45",
		model.AttrDelaySeconds:                  "3",
		model.AttrReceiveMessageWaitTimeSeconds: "2",
		model.AttrMessageRetentionPeriod:        "120",
		model.AttrMaximumMessageSize:            "2048",
	}
	if err := e.b.SetQueueAttributes(e.ctx, "q", set); err != nil {
		t.Fatal(err)
	}
	info := e.getQueue("q")
	for k, v := range set {
		if got := info.Config.Attributes()[k]; got != v {
			t.Fatalf("after SetQueueAttributes %s reads %s, want %s", k, got, v)
		}
	}
	if info.ID != q.ID {
		t.Fatalf("SetQueueAttributes changed the queue id")
	}
	wantTime(t, "CreatedAt after SetQueueAttributes", info.CreatedAt, q.CreatedAt)
	wantTime(t, "ModifiedAt after SetQueueAttributes", info.ModifiedAt, e.clock.Now())

	err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrVisibilityTimeout: "43201"})
	wantErr(t, "SetQueueAttributes VisibilityTimeout=43201", err, model.ErrInvalidAttributeValue)
	// All or nothing: a bad attribute beside a good one changes neither.
	err = e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDelaySeconds: "7", model.AttrVisibilityTimeout: "-5"})
	wantErr(t, "SetQueueAttributes with one bad value", err, model.ErrInvalidAttributeValue)
	err = e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDelaySeconds: "8", "Foo": "1"})
	wantErr(t, "SetQueueAttributes Foo", err, model.ErrInvalidAttributeName)
	for _, name := range []string{model.AttrFifoQueue, model.AttrQueueArn, model.AttrApproxMessages, model.AttrContentBasedDeduplication} {
		err = e.b.SetQueueAttributes(e.ctx, "q", map[string]string{name: "true"})
		wantErr(t, "SetQueueAttributes "+name+" on a standard queue", err, model.ErrInvalidAttributeName)
	}
	if got := e.getQueue("q").Config; got.Delay != 3*time.Second || got.VisibilityTimeout != 45*time.Second {
		t.Fatalf("refused SetQueueAttributes changed the config: delay %v visibility %v", got.Delay, got.VisibilityTimeout)
	}
	err = e.b.SetQueueAttributes(e.ctx, "missing", map[string]string{model.AttrDelaySeconds: "1"})
	wantErr(t, "SetQueueAttributes on a missing queue", err, model.ErrQueueDoesNotExist)
}

// testSetQueueAttributesTakeEffect: a changed default visibility and delay
// apply to the next receive and send.
func testSetQueueAttributesTakeEffect(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrVisibilityTimeout: "7"}); err != nil {
		t.Fatal(err)
	}
	e.sendBody("q", "a")
	e.receiveOne("q")
	e.advance(6 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.ReceiveCount != 2 {
		t.Fatalf("after the new 7 s visibility expired, ReceiveCount = %d, want 2", d.ReceiveCount)
	}
	if err := e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDelaySeconds: "5"}); err != nil {
		t.Fatal(err)
	}
	e.sendBody("q", "b")
	e.wantStats("q", 0, 1, 1)
	e.advance(5 * time.Second)
	e.eventuallyStats("q", 1, 1, 0)
}

func testDeleteQueue(t *testing.T, s suite) {
	e := s.setup(t)
	old := e.createQueue("q", nil)
	e.createQueue("other", nil)
	e.send("q", model.SendEntry{Body: "a"}, model.SendEntry{Body: "b"})
	d := e.receiveOne("q")
	if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	_, err := e.b.GetQueue(e.ctx, "q")
	wantErr(t, "GetQueue after DeleteQueue", err, model.ErrQueueDoesNotExist)
	_, err = e.b.Send(e.ctx, "q", []model.SendEntry{{ID: "x", Body: "x"}})
	wantErr(t, "Send after DeleteQueue", err, model.ErrQueueDoesNotExist)
	_, err = e.receive(model.ReceiveRequest{Queue: "q", WaitTime: dur(0)})
	wantErr(t, "Receive after DeleteQueue", err, model.ErrQueueDoesNotExist)
	wantErr(t, "Delete after DeleteQueue", e.deleteErr("q", d.Receipt), model.ErrQueueDoesNotExist)
	wantErr(t, "ChangeVisibility after DeleteQueue", e.changeVisErr("q", d.Receipt, 0), model.ErrQueueDoesNotExist)
	wantErr(t, "PurgeQueue after DeleteQueue", e.b.PurgeQueue(e.ctx, "q"), model.ErrQueueDoesNotExist)
	wantErr(t, "SetQueueAttributes after DeleteQueue", e.b.SetQueueAttributes(e.ctx, "q", map[string]string{model.AttrDelaySeconds: "1"}), model.ErrQueueDoesNotExist)
	wantErr(t, "DeleteQueue twice", e.b.DeleteQueue(e.ctx, "q"), model.ErrQueueDoesNotExist)
	e.wantList("", "", 0, "other")

	// A queue of the same name created afterwards is a new, empty queue.
	e.advance(time.Second)
	q, err := e.b.CreateQueue(e.ctx, "q", map[string]string{model.AttrVisibilityTimeout: "99"}, nil)
	if err != nil {
		t.Fatalf("re-creating a deleted queue with other attributes: %v", err)
	}
	if q.ID == old.ID {
		t.Fatalf("re-created queue has the old id %d", q.ID)
	}
	wantTime(t, "re-created queue CreatedAt", q.CreatedAt, e.clock.Now())
	if q.Config.VisibilityTimeout != 99*time.Second {
		t.Fatalf("re-created queue visibility = %v, want 99s", q.Config.VisibilityTimeout)
	}
	e.wantStats("q", 0, 0, 0)
	e.receiveNone("q")
	wantErr(t, "Delete with a receipt of the deleted queue", e.deleteErr("q", d.Receipt), model.ErrReceiptHandleInvalid)
	wantErr(t, "ChangeVisibility with a receipt of the deleted queue", e.changeVisErr("q", d.Receipt, 0), model.ErrReceiptHandleInvalid)
	// The old lease and the old ready message never surface in the new queue.
	e.advance(time.Minute)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 0)
}

func testDeleteQueueEndsWaitingReceive(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	ch := e.goWait(e.ctx, "q", 20*time.Second)
	e.notYet(ch, "long poll before DeleteQueue")
	if err := e.b.DeleteQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	r := e.await(ch, promptly, "long poll after DeleteQueue (clock not advanced)")
	if len(r.ds) != 0 {
		t.Fatalf("long poll on a deleted queue returned %d messages", len(r.ds))
	}
	wantErr(t, "long poll on a deleted queue", r.err, model.ErrQueueDoesNotExist)
}

func testPurgeQueue(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.createQueue("other", nil)
	e.sendBody("other", "kept")
	e.sendBody("q", "inflight")
	d := e.receiveOne("q")
	e.send("q", model.SendEntry{Body: "ready"}, model.SendEntry{Body: "delayed", Delay: dur(time.Minute)})
	e.wantStats("q", 1, 1, 1)
	if err := e.b.PurgeQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	e.eventuallyStats("q", 0, 0, 0)
	e.receiveNone("q")
	// A message sent after the purge returned is kept, even at the same instant.
	e.sendBody("q", "after")
	after := e.receiveOne("q")
	if after.Body != "after" {
		t.Fatalf("after purge received %q, want the message sent after it", after.Body)
	}
	e.mustDelete("q", after.Receipt)
	// The purged lease and the purged delayed message never come back.
	e.advance(2 * time.Minute)
	e.receiveNone("q")
	if err := e.deleteErr("q", d.Receipt); err != nil {
		t.Fatalf("Delete with a receipt of a purged message: %v, want success", err)
	}
	wantErr(t, "ChangeVisibility of a purged message", e.changeVisErr("q", d.Receipt, 0), model.ErrInvalidParameterValue)
	e.wantStats("other", 1, 0, 0)
	// Without StrictPurge, purges may follow each other at once.
	for i := 0; i < 3; i++ {
		if err := e.b.PurgeQueue(e.ctx, "q"); err != nil {
			t.Fatalf("purge %d without StrictPurge: %v", i, err)
		}
	}
	wantErr(t, "PurgeQueue on a missing queue", e.b.PurgeQueue(e.ctx, "missing"), model.ErrQueueDoesNotExist)
}

func testStrictPurge(t *testing.T, s suite) {
	e := s.setup(t, func(o *broker.Config) { o.StrictPurge = true })
	e.createQueue("q", nil)
	e.createQueue("other", nil)
	if err := e.b.PurgeQueue(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "second purge at once", e.b.PurgeQueue(e.ctx, "q"), model.ErrPurgeInProgress)
	e.advance(59 * time.Second)
	wantErr(t, "purge 59 s later", e.b.PurgeQueue(e.ctx, "q"), model.ErrPurgeInProgress)
	if err := e.b.PurgeQueue(e.ctx, "other"); err != nil {
		t.Fatalf("purging another queue: %v", err)
	}
	e.advance(time.Second)
	if err := e.b.PurgeQueue(e.ctx, "q"); err != nil {
		t.Fatalf("purge 60 s after the first: %v", err)
	}
	if err := e.b.PurgeQueue(e.ctx, "q"); !errors.Is(err, model.ErrPurgeInProgress) {
		t.Fatalf("purge right after the allowed one: %v, want ErrPurgeInProgress", err)
	}
}
