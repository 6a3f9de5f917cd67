package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// encodeMetaV1 is the version-1 metadata record as the broker wrote it
// before issue 8 (codec.go's first thirteen fields).
func encodeMetaV1(m *msg) []byte {
	b := []byte{metaV1, byte(m.state)}
	b = binary.AppendVarint(b, m.visibleAt)
	b = binary.AppendUvarint(b, m.lease)
	b = binary.AppendUvarint(b, uint64(m.receiveCount))
	b = binary.AppendVarint(b, m.firstReceiveAt())
	b = binary.AppendVarint(b, m.sentAt)
	b = binary.AppendVarint(b, int64(m.priority))
	b = binary.AppendUvarint(b, m.seq())
	b = binary.AppendUvarint(b, uint64(m.size))
	b = appendStr(b, m.groupID())
	b = appendStr(b, m.dedupID())
	return appendStr(b, m.deadLetterSource())
}

// flatMsg is a msg with its extra fields and id inline, comparable with ==.
type flatMsg struct {
	msg
	extra msgExtra
	id    string
}

func flat(m *msg) flatMsg {
	f := flatMsg{msg: *m, extra: *m.extra(), id: m.id()}
	f.msg.x = nil
	f.extra.id = ""
	return f
}

func TestMetaRecordVersions(t *testing.T) {
	t.Parallel()
	m := &msg{
		state: stateInflight, visibleAt: 7e18, lease: 3, receiveCount: 3, sentAt: 5,
		priority: -7, size: 99,
	}
	m.setReceiveTimes(11, 0)
	m.setSeq(42)
	m.setGroupID("g")
	m.setDedupID("d")
	m.setDeadLetterSource("src")
	// Version 1: attempts are the receive count, the rest is zero.
	v1, err := decodeMeta(9, encodeMetaV1(m))
	if err != nil {
		t.Fatal(err)
	}
	want := flat(m)
	want.key, want.attempts, want.pos, want.agePos = 9, 3, -1, -1
	if flat(v1) != want {
		t.Fatalf("v1 decodes to %+v, want %+v", flat(v1), want)
	}
	// Version 3 keeps every field, with an id of any form, and the expiry.
	for _, id := range []string{"id-1", "5fea7756-0ea4-451a-a703-a558b933e274", "5FEA7756-0EA4-451A-A703-A558B933E274", "00000000-0000-0000-0000-000000000000"} {
		m.attempts, m.maxAttempts = 2, 5
		m.setReceiveTimes(11, 13)
		m.setFailureReason("boom ☃")
		m.setID(id)
		m.setExpiresAt(8e18)
		m.state = stateBackoff
		enc := encodeMeta(m)
		if enc[0] != metaV3 {
			t.Fatalf("encodeMeta writes version %d, want %d", enc[0], metaV3)
		}
		v3, err := decodeMeta(9, enc)
		if err != nil {
			t.Fatal(err)
		}
		want = flat(m)
		want.key, want.pos, want.agePos = 9, -1, -1
		if flat(v3) != want || v3.id() != id || v3.expiresAt() != 8e18 {
			t.Fatalf("v3 decodes to %+v, want %+v", flat(v3), want)
		}
		// Version 2, written before a time to live could be set: the same
		// without the expiry, which reads as none.
		v2rec := append([]byte{metaV2}, enc[1:len(enc)-binary.PutVarint(make([]byte, binary.MaxVarintLen64), 8e18)]...)
		v2, err := decodeMeta(9, v2rec)
		if err != nil {
			t.Fatal(err)
		}
		want.extra.expiresAt = 0
		if flat(v2) != want || v2.expiresAt() != 0 {
			t.Fatalf("v2 decodes to %+v, want %+v", flat(v2), want)
		}
		m.setExpiresAt(0)
	}
	// A plain queued message keeps no extra fields.
	plain := &msg{state: stateReady, sentAt: 5}
	plain.setID("5fea7756-0ea4-451a-a703-a558b933e274")
	if d, err := decodeMeta(1, encodeMeta(plain)); err != nil || d.x != nil || d.id() != plain.id() {
		t.Fatalf("plain message decodes to %+v (extra %v), %v", d, d.x, err)
	}
	// Truncated, unknown version, unknown state: corrupt.
	enc := encodeMeta(m)
	for _, bad := range [][]byte{enc[:len(enc)-1], append([]byte{4}, enc[1:]...), append([]byte{metaV3, 9}, enc[2:]...)} {
		if _, err := decodeMeta(9, bad); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeMeta(%x) = %v, want errCorrupt", bad, err)
		}
	}
}

// TestRecoverUpgradesV1Records: a store written before issue 8 (version-1
// metadata) opens with attempts = receive count, the message ids read from
// the bodies (DeleteMessages finds them), and its records rewritten as
// the current version.
func TestRecoverUpgradesV1Records(t *testing.T) {
	t.Parallel()
	e := setup(t)
	q := e.createQueue("q", nil)
	ids := []string{e.send("q", "a")[0].MessageID, e.send("q", "b")[0].MessageID}
	e.receive("q", 1, 0) // a: received once, visible again at once
	// Rewrite every metadata record as version 1.
	e.be.mu.Lock()
	batch := e.be.db.NewBatch()
	for _, m := range e.be.queues[model.QueueRef{Name: "q"}].msgs {
		_ = batch.Set(msgKey(q.ID, kindMeta, m.key), encodeMetaV1(m), nil)
	}
	e.be.mu.Unlock()
	if err := batch.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = batch.Close()
	e.restart()

	lo, hi := kindRange(q.ID, kindMeta)
	it, err := e.be.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
		if it.Value()[0] != metaV3 {
			t.Errorf("record %x is version %d after the restart, want %d", it.Key(), it.Value()[0], metaV3)
		}
	}
	_ = it.Close()
	if n != 2 {
		t.Fatalf("%d metadata records, want 2", n)
	}
	ds := e.receive("q", 10, time.Minute)
	if len(ds) != 2 {
		t.Fatalf("received %d, want 2", len(ds))
	}
	for _, d := range ds {
		if d.Attempts != d.ReceiveCount {
			t.Errorf("%s: Attempts %d, ReceiveCount %d: want equal", d.Body, d.Attempts, d.ReceiveCount)
		}
		if d.Body == "a" && d.ReceiveCount != 2 {
			t.Errorf("a: ReceiveCount %d, want 2", d.ReceiveCount)
		}
	}
	found, err := e.b.DeleteMessages(context.Background(), "q", append(ids, "nope"))
	if err != nil {
		t.Fatal(err)
	}
	if !found[0] || !found[1] || found[2] {
		t.Fatalf("DeleteMessages found %v, want [true true false]", found)
	}
	e.wantStats("q", model.QueueStats{})
}

// retryQueue creates a queue whose failures back off by policy.
func (e *env) retryQueue(name, policy string, vis int) {
	e.t.Helper()
	e.createQueue(name, map[string]string{model.AttrRetryPolicy: policy, model.AttrVisibilityTimeout: itoa(vis)})
}

// TestRestartRecomputesExpiryBackoff: a lease that ended into a backoff is
// not written; after a restart (taken during the backoff, or with the lease
// ending while the broker is down) the message is delayed until the same
// instant, with its reason.
func TestRestartRecomputesExpiryBackoff(t *testing.T) {
	t.Parallel()
	for _, endsWhileDown := range []bool{false, true} {
		e := setup(t)
		e.retryQueue("q", `{"baseSeconds":60,"maxSeconds":600,"jitter":"equal"}`, 10)
		id := e.send("q", "a")[0].MessageID
		ds := e.receive("q", 1, 10*time.Second)
		leaseEnd := e.clock.Now().Add(10 * time.Second)
		// An equal jitter: 30..60 s after the lease's end, drawn from the
		// message id (a restart must draw the same).
		at := plan.ExpiryVisibleAt(e.getConfig("q"), id, 1, leaseEnd)
		if d := at.Sub(leaseEnd); d < 30*time.Second || d > 60*time.Second {
			t.Fatalf("backoff %v, want 30..60 s", d)
		}
		if endsWhileDown {
			e.be.Close()
			e.clock.Advance(11 * time.Second)
			e.open()
		} else {
			e.clock.Advance(11 * time.Second)
			e.wantStats("q", model.QueueStats{Delayed: 1})
			e.restart()
		}
		e.wantStats("q", model.QueueStats{Delayed: 1})
		// Its receipt is stale while it backs off.
		errs, err := e.b.ChangeVisibility(context.Background(), "q", []model.VisibilityEntry{{Receipt: ds[0].Receipt, Timeout: time.Minute}})
		if err != nil || !errors.Is(errs[0], model.ErrInvalidParameterValue) {
			t.Fatalf("ChangeVisibility of a backing-off message: %v, %v; want a stale receipt", errs, err)
		}
		e.clock.Advance(at.Sub(e.clock.Now()) - time.Nanosecond)
		e.wantStats("q", model.QueueStats{Delayed: 1})
		if got := e.receive("q", 1, time.Minute); len(got) != 0 {
			t.Fatalf("received %q during the backoff", got[0].Body)
		}
		e.clock.Advance(time.Nanosecond)
		e.wantStats("q", model.QueueStats{Visible: 1})
		got := e.receive("q", 1, time.Minute)
		if len(got) != 1 || got[0].Attempts != 2 || got[0].FailureReason != model.ReasonLeaseExpired {
			t.Fatalf("after the backoff: %+v, want a with 2 attempts and reason %q", got, model.ReasonLeaseExpired)
		}
	}
}

// TestRestartKeepsNackBackoff: a nack's backoff is written (stateBackoff)
// and survives a restart with its instant.
func TestRestartKeepsNackBackoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.retryQueue("q", `{"baseSeconds":30,"maxSeconds":600,"jitter":"none"}`, 10)
	e.send("q", "a")
	ds := e.receive("q", 1, 10*time.Second)
	errs, err := e.b.ChangeVisibility(context.Background(), "q", []model.VisibilityEntry{{Receipt: ds[0].Receipt}})
	if err != nil || errs[0] != nil {
		t.Fatalf("nack: %v, %v", errs, err)
	}
	e.restart()
	e.wantStats("q", model.QueueStats{Delayed: 1})
	e.clock.Advance(30*time.Second - time.Nanosecond)
	e.wantStats("q", model.QueueStats{Delayed: 1})
	e.clock.Advance(time.Nanosecond)
	got := e.receive("q", 1, time.Minute)
	if len(got) != 1 || got[0].Attempts != 2 || got[0].FailureReason != model.ReasonNack {
		t.Fatalf("after the backoff: %+v", got)
	}
}

// TestLastAttemptExpiryMovesWithoutCaller: a lease that ends on the last
// attempt moves its message to the DLQ by the sweeper, with no call on the
// source queue (and after a restart, when it ended while the broker was
// down).
func TestLastAttemptExpiryMovesWithoutCaller(t *testing.T) {
	t.Parallel()
	for _, whileDown := range []bool{false, true} {
		e := setup(t)
		e.createQueue("dlq", nil)
		e.createQueue("src", map[string]string{model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":1}`})
		e.send("src", "a")
		e.receive("src", 1, 10*time.Second)
		if whileDown {
			e.be.Close()
			e.clock.Advance(10 * time.Second)
			e.open()
		} else {
			e.clock.Advance(10 * time.Second)
		}
		// Only the DLQ is looked at: reading src would kick the sweeper.
		testutil.Eventually(t, 5*time.Second, "the message moved to the DLQ", func() bool {
			return e.stats("dlq").Visible == 1
		})
		e.wantStats("src", model.QueueStats{})
		page, err := e.b.Browse(context.Background(), "dlq", model.BrowseRequest{})
		if err != nil || len(page.Messages) != 1 {
			t.Fatalf("Browse(dlq) = %+v, %v", page, err)
		}
		if m := page.Messages[0]; m.FailureReason != model.ReasonLeaseExpired || m.DeadLetterSource != "src" || m.Attempts != 1 {
			t.Fatalf("dead letter %+v", m)
		}
	}
}

// TestAtMostOnceSurvivesCrash: an at-most-once receive deletes the message
// durably before it answers: a crash right after the answer (whatever
// unsynced data it loses) never brings the message back.
func TestAtMostOnceSurvivesCrash(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	clock := clocktest.NewFakeClock(t0)
	opts := storage.Options{Clock: clock, Logger: testLogger(t)}
	b, err := Open(Config{Dir: "/data", FS: fs, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	f := front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	ctx := context.Background()
	if _, err := f.CreateQueue(ctx, "q", map[string]string{model.AttrDeliveryMode: model.DeliveryAtMostOnce}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.Send(ctx, "q", []model.SendEntry{{Body: "m" + itoa(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	zero := time.Duration(0)
	ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 2, WaitTime: &zero})
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive: %d messages, %v", len(ds), err)
	}
	if ds[0].Body != "m0" || ds[1].Body != "m1" || ds[0].ReceiveCount != 1 || ds[0].Attempts != 1 {
		t.Fatalf("received %+v", ds)
	}
	// The receipt deletes nothing (it succeeds) and changes no visibility.
	if errs, err := f.Delete(ctx, "q", []model.DeleteEntry{{Receipt: ds[0].Receipt}}); err != nil || errs[0] != nil {
		t.Fatalf("delete with an at-most-once receipt: %v, %v", errs, err)
	}
	if errs, err := f.ChangeVisibility(ctx, "q", []model.VisibilityEntry{{Receipt: ds[1].Receipt, Timeout: time.Minute}}); err != nil || !errors.Is(errs[0], model.ErrMessageNotInflight) {
		t.Fatalf("visibility change with an at-most-once receipt: %v, %v", errs, err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng})
	_ = b.Close()

	b2, err := Open(Config{Dir: "/data", FS: crashed, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	info, err := b2.GetQueue(ctx, model.QueueRef{Name: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Stats.Visible != 1 || info.Stats.InFlight != 0 {
		t.Fatalf("after the crash: %+v, want the one message not received", info.Stats)
	}
}

// TestExpiryBackoffHoldsFifoGroup: on a FIFO queue, a message whose lease
// ended into a backoff keeps its group: the next message of the group is not
// delivered before it, while other groups go on.
func TestExpiryBackoffHoldsFifoGroup(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q.fifo", map[string]string{
		model.AttrFifoQueue: "true", model.AttrContentBasedDeduplication: "true",
		model.AttrRetryPolicy: `{"baseSeconds":60,"maxSeconds":60,"jitter":"none"}`,
	})
	for _, s := range []struct{ g, body string }{{"g", "a1"}, {"g", "a2"}, {"h", "b1"}} {
		if _, err := e.b.Send(context.Background(), "q.fifo", []model.SendEntry{{Body: s.body, GroupID: s.g}}); err != nil {
			t.Fatal(err)
		}
	}
	if ds := e.receive("q.fifo", 1, 10*time.Second); len(ds) != 1 || ds[0].Body != "a1" {
		t.Fatalf("first receive %+v", ds)
	}
	e.clock.Advance(10 * time.Second) // a1's lease ends: 60 s of backoff
	e.wantStats("q.fifo", model.QueueStats{Visible: 2, Delayed: 1})
	ds := e.receive("q.fifo", 10, time.Minute)
	if len(ds) != 1 || ds[0].Body != "b1" {
		t.Fatalf("during a1's backoff got %v, want only b1", bodies(ds))
	}
	e.restart() // the hold survives a restart
	if ds := e.receive("q.fifo", 10, time.Minute); len(ds) != 0 {
		t.Fatalf("during a1's backoff after a restart got %v", bodies(ds))
	}
	e.clock.Advance(60 * time.Second)
	if ds := e.receive("q.fifo", 10, time.Minute); len(ds) != 2 || ds[0].Body != "a1" || ds[1].Body != "a2" {
		t.Fatalf("after the backoff got %v, want a1 a2", bodies(ds))
	}
}

func bodies(ds []model.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Body
	}
	return out
}

func (e *env) getConfig(queue string) model.QueueConfig {
	e.t.Helper()
	info, err := e.b.GetQueue(context.Background(), queue)
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Config
}

// TestLongDelaySurvivesRestart: a delay past 15 minutes (the native API's
// LongDelay) is kept across a restart, to the nanosecond.
func TestLongDelaySurvivesRestart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("q", map[string]string{model.AttrMessageRetentionPeriod: "86400"})
	delay := 6 * time.Hour
	res, err := e.b.Send(context.Background(), "q", []model.SendEntry{{Body: "later", Delay: &delay, LongDelay: true}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v, %+v", err, res)
	}
	e.restart()
	e.clock.Advance(delay - time.Nanosecond)
	e.wantStats("q", model.QueueStats{Delayed: 1})
	e.restart()
	e.clock.Advance(time.Nanosecond)
	if ds := e.receive("q", 1, time.Minute); len(ds) != 1 || ds[0].Body != "later" {
		t.Fatalf("after the delay got %v", bodies(ds))
	}
}

// TestMaxDepthExactUnderConcurrency: concurrent sends into a queue with
// MaxDepth never take it past the limit (the depth is checked again under
// the lock that inserts), and the refused ones are *DepthError.
func TestMaxDepthExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const limit, senders, perSender = 25, 8, 10
	e.createQueue("q", map[string]string{model.AttrMaxDepth: itoa(limit)})
	errs := make(chan error, senders*perSender)
	done := make(chan struct{})
	for range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			for range perSender {
				_, err := e.b.Send(context.Background(), "q", []model.SendEntry{{Body: "x"}})
				errs <- err
			}
		}()
	}
	for range senders {
		<-done
	}
	close(errs)
	ok := 0
	for err := range errs {
		var full *model.DepthError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &full) && errors.Is(err, model.ErrThrottled):
		default:
			t.Fatalf("send: %v", err)
		}
	}
	if ok != limit {
		t.Fatalf("%d sends accepted, want exactly %d", ok, limit)
	}
	e.wantStats("q", model.QueueStats{Visible: limit})
}
