package brokertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Message move tasks (storage.Backend.StartMoveTask): moving dead letters back to their
// sources or to a destination, at a rate on the fake clock, with progress,
// cancel, failure and restart. A backend without the capability skips them.
var moveTaskTests = []testCase{
	{"StartErrors", testMoveStartErrors},
	{"BackToOwnSources", testMoveBackToSources},
	{"ToDestinationOldestFirstAtRate", testMoveToDestinationAtRate},
	{"Cancel", testMoveCancel},
	{"DestinationDeletedFails", testMoveDestinationDeleted},
	{"OnlyMessagesPresentAtStart", testMoveOnlyPresentAtStart},
	{"ResumesAfterRestart", testMoveRestart},
	{"MovesMessageWhoseLeaseEnded", testMoveLeaseEnded},
	{"FifoHeldMessageBlocksItsGroup", func(t *testing.T, s suite) { testMoveFifoHeldBlocksGroup(t, s, 0, false) }},
	{"FifoHeldMessageBlocksItsGroupAcrossSteps", func(t *testing.T, s suite) { testMoveFifoHeldBlocksGroup(t, s, 1, false) }},
	{"FifoHeldMessageBlocksItsGroupAfterRestart", func(t *testing.T, s suite) { testMoveFifoHeldBlocksGroup(t, s, 1, true) }},
}

// deadLetters creates dlq and src (maxReceiveCount 1, visibility 1 s) and
// dead-letters bodies from src, one clock second apart in SentAt order
// (deadLetterEntries).
func (e *env) deadLetters(src, dlq string, bodies ...string) {
	e.t.Helper()
	entries := make([]model.SendEntry, len(bodies))
	for i, b := range bodies {
		entries[i] = model.SendEntry{Body: b}
	}
	e.deadLetterEntries(src, dlq, entries...)
}

// task returns the latest task of source.
func (e *env) task(source string) model.MoveTask {
	e.t.Helper()
	ts, err := e.b.ListMoveTasks(e.ctx, source, 1)
	if err != nil || len(ts) != 1 {
		e.t.Fatalf("ListMoveTasks(%s, 1) = %v, %v; want one task", source, ts, err)
	}
	return ts[0]
}

// advanceUntilTask advances the clock a second at a time until the latest
// task of source has the status.
func (e *env) advanceUntilTask(source string, status model.MoveTaskStatus, limit time.Duration) model.MoveTask {
	e.t.Helper()
	var last model.MoveTask
	e.advanceUntil(time.Second, limit, fmt.Sprintf("task of %s %s", source, status), func() bool {
		last = e.task(source)
		return last.Status == status
	})
	return last
}

func testMoveStartErrors(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	_, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "nope"})
	wantErr(t, "StartMoveTask of a missing source", err, model.ErrResourceNotFound)
	e.createQueue("plain", nil)
	_, err = mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "plain"})
	wantErr(t, "StartMoveTask of a queue that is no DLQ", err, model.ErrInvalidParameterValue)
	if msg := model.ErrorMessage(err); msg != "Source queue must be configured as a Dead Letter Queue." {
		t.Errorf("message %q", msg)
	}
	e.deadLetters("src", "dlq", "a")
	_, err = mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "nope"})
	wantErr(t, "StartMoveTask to a missing destination", err, model.ErrResourceNotFound)
	for _, rate := range []int{-1, 501} {
		_, err = mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", MaxPerSecond: rate})
		wantErr(t, fmt.Sprintf("rate %d", rate), err, model.ErrInvalidParameterValue)
	}
	_, err = mt.ListMoveTasks(e.ctx, "nope", 1)
	wantErr(t, "ListMoveTasks of a missing source", err, model.ErrResourceNotFound)
	if ts, err := mt.ListMoveTasks(e.ctx, "dlq", 10); err != nil || len(ts) != 0 {
		t.Fatalf("ListMoveTasks before any task = %v, %v", ts, err)
	}
	_, err = mt.CancelMoveTask(e.ctx, "dlq", "no-such-task")
	wantErr(t, "CancelMoveTask of an unknown task", err, model.ErrResourceNotFound)
	_, err = mt.CancelMoveTask(e.ctx, "nope", "no-such-task")
	wantErr(t, "CancelMoveTask on a missing source", err, model.ErrResourceNotFound)

	// A second task while one runs is refused (a slow task: rate 1, two messages).
	e.deadLetters("src2", "dlq", "b")
	task, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", MaxPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != model.MoveTaskRunning || task.ToMove != 2 || task.MaxPerSecond != 1 || !messageIDRe.MatchString(task.ID) {
		t.Fatalf("started task = %+v", task)
	}
	wantTime(t, "StartedAt", task.StartedAt, e.clock.Now())
	_, err = mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq"})
	wantErr(t, "a second task on the same source", err, model.ErrInvalidParameterValue)
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 2 {
		t.Fatalf("completed task moved %d, want 2", done.Moved)
	}
	_, err = mt.CancelMoveTask(e.ctx, "dlq", task.ID)
	wantErr(t, "CancelMoveTask of a completed task", err, model.ErrInvalidParameterValue)
}

func testMoveBackToSources(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	e.deadLetters("src-a", "dlq", "a1", "a2")
	e.deadLetters("src-b", "dlq", "b1")
	old := e.receiveN(model.ReceiveRequest{Queue: "dlq", Visibility: dur(0)}, 3) // peek at the ids; visible again at once
	ids := map[string]bool{}
	for _, d := range old {
		ids[d.ID] = true
	}
	task, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	if task.Destination != "" || task.MaxPerSecond != 0 || task.ToMove != 3 {
		t.Fatalf("task = %+v", task)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 3 || done.ToMove != 3 || done.FailureReason != "" {
		t.Fatalf("completed task = %+v", done)
	}
	e.wantStats("dlq", 0, 0, 0)
	movedAt := e.clock.Now()
	for src, want := range map[string][]string{"src-a": {"a1", "a2"}, "src-b": {"b1"}} {
		ds := e.receiveN(model.ReceiveRequest{Queue: src}, len(want))
		if got := bodies(ds); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s got %v, want %v", src, got, want)
		}
		for _, d := range ds {
			if ids[d.ID] {
				t.Errorf("%s: moved message kept its id %s; a redriven message is a new message", src, d.ID)
			}
			if d.ReceiveCount != 1 || d.DeadLetterSource != "" {
				t.Errorf("%s: moved message ReceiveCount %d DeadLetterSource %q, want 1 and none", src, d.ReceiveCount, d.DeadLetterSource)
			}
			if d.SentAt.Before(movedAt.Add(-time.Minute)) || d.SentAt.After(movedAt) {
				t.Errorf("%s: moved message SentAt %v, want its move time (retention starts again)", src, d.SentAt)
			}
		}
	}
}

func testMoveToDestinationAtRate(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	e.createQueue("dest", nil)
	e.deadLetters("src", "dlq", "m1", "m2", "m3", "m4")
	if _, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest", MaxPerSecond: 1}); err != nil {
		t.Fatal(err)
	}
	// Rate 1: the first message moves at once, then one per clock second.
	eventually(t, "the first message moved", func() bool { return e.task("dlq").Moved == 1 })
	start := e.clock.Now()
	for want := int64(2); want <= 4; want++ {
		e.advanceUntil(100*time.Millisecond, 2*time.Second, fmt.Sprintf("%d moved", want), func() bool {
			return e.task("dlq").Moved == want
		})
		if e.task("dlq").Status != model.MoveTaskRunning && want < 4 {
			t.Fatalf("task ended early: %+v", e.task("dlq"))
		}
	}
	if took := e.clock.Now().Sub(start); took < 3*time.Second-time.Millisecond {
		t.Fatalf("3 messages moved in %v at rate 1", took)
	}
	e.advanceUntilTask("dlq", model.MoveTaskCompleted, 10*time.Second)
	e.wantStats("dlq", 0, 0, 0)
	e.wantStats("src", 0, 0, 0)
	// Oldest first: the destination holds them in their original send order.
	for _, want := range []string{"m1", "m2", "m3", "m4"} {
		d := e.receiveOne("dest")
		if d.Body != want {
			t.Fatalf("dest gave %q, want %q (oldest first)", d.Body, want)
		}
		e.mustDelete("dest", d.Receipt)
	}
}

func testMoveCancel(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	e.createQueue("dest", nil)
	e.deadLetters("src", "dlq", "m1", "m2", "m3", "m4")
	task, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest", MaxPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first message moved", func() bool { return e.task("dlq").Moved == 1 })
	c, err := mt.CancelMoveTask(e.ctx, "dlq", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Moved != 1 || (c.Status != model.MoveTaskCancelling && c.Status != model.MoveTaskCancelled) {
		t.Fatalf("CancelMoveTask = %+v", c)
	}
	eventually(t, "the task CANCELLED", func() bool { return e.task("dlq").Status == model.MoveTaskCancelled })
	e.advance(10 * time.Second)
	if got := e.task("dlq"); got.Moved != 1 || got.Status != model.MoveTaskCancelled {
		t.Fatalf("after cancel and 10 s: %+v", got)
	}
	e.eventuallyStats("dlq", 3, 0, 0)
	e.eventuallyStats("dest", 1, 0, 0)
	// A new task may start; the list shows both, newest first.
	second, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest"})
	if err != nil {
		t.Fatalf("a new task after a cancel: %v", err)
	}
	e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	ts, err := mt.ListMoveTasks(e.ctx, "dlq", 10)
	if err != nil || len(ts) != 2 || ts[0].ID != second.ID || ts[1].ID != task.ID {
		t.Fatalf("ListMoveTasks(10) = %+v, %v", ts, err)
	}
	if ts[0].Moved != 3 || ts[0].ToMove != 3 {
		t.Fatalf("second task = %+v", ts[0])
	}
	if ts, err := mt.ListMoveTasks(e.ctx, "dlq", 0); err != nil || len(ts) != 1 {
		t.Fatalf("ListMoveTasks default limit = %d tasks, %v; want 1", len(ts), err)
	}
	e.wantStats("dest", 4, 0, 0)
}

func testMoveDestinationDeleted(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	e.createQueue("dest", nil)
	e.deadLetters("src", "dlq", "m1", "m2", "m3")
	if _, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest", MaxPerSecond: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first message moved", func() bool { return e.task("dlq").Moved == 1 })
	if err := e.b.DeleteQueue(e.ctx, "dest"); err != nil {
		t.Fatal(err)
	}
	got := e.advanceUntilTask("dlq", model.MoveTaskFailed, time.Minute)
	if got.FailureReason != model.MoveTaskFailureNoQueue || got.Moved != 1 {
		t.Fatalf("failed task = %+v", got)
	}
	e.wantStats("dlq", 2, 0, 0) // nothing is lost
}

// testMoveOnlyPresentAtStart: messages dead-lettered after the start are not
// part of the task.
func testMoveOnlyPresentAtStart(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	e.createQueue("dest", nil)
	e.deadLetters("src", "dlq", "m1", "m2")
	if _, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest", MaxPerSecond: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first message moved", func() bool { return e.task("dlq").Moved == 1 })
	e.sendBody("src", "late")
	e.receiveOne("src")
	e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	e.eventuallyNotInFlight("src")
	e.moveToDLQ("src", "dlq", 1)
	if got := e.task("dlq"); got.Moved != 2 || got.ToMove != 2 {
		t.Fatalf("task = %+v", got)
	}
	if d := e.receiveOne("dlq"); d.Body != "late" {
		t.Fatalf("DLQ holds %q, want late", d.Body)
	}
	e.wantStats("dest", 2, 0, 0)
}

func testMoveRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	mt := e.b
	e.createQueue("dest", nil)
	e.deadLetters("src", "dlq", "m1", "m2", "m3", "m4")
	task, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest", MaxPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first message moved", func() bool { return e.task("dlq").Moved == 1 })
	e.reopen()
	got := e.task("dlq")
	if got.ID != task.ID || got.Status != model.MoveTaskRunning || got.Moved < 1 {
		t.Fatalf("task after restart = %+v", got)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 4 || done.ToMove != 4 {
		t.Fatalf("task = %+v", done)
	}
	e.wantStats("dlq", 0, 0, 0)
	e.wantStats("dest", 4, 0, 0) // each message exactly once
	ds := e.receiveN(model.ReceiveRequest{Queue: "dest"}, 4)
	if got := bodies(ds); fmt.Sprint(got) != "[m1 m2 m3 m4]" {
		t.Fatalf("dest holds %v", got)
	}
}

// A message whose lease ended (the deadline is now) is no longer held by a
// consumer: a task moves it.
func testMoveLeaseEnded(t *testing.T, s suite) {
	e := s.setup(t)
	mt := e.b
	e.createQueue("dest", nil)
	e.deadLetters("src", "dlq", "m1")
	lease := e.getQueue("dlq").Config.VisibilityTimeout
	e.receiveOne("dlq")
	e.advance(lease) // the lease ends exactly now; nothing has looked at the queue since
	if _, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq", Destination: "dest"}); err != nil {
		t.Fatal(err)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 1 {
		t.Fatalf("task = %+v, want the message whose lease ended moved", done)
	}
	e.wantStats("dlq", 0, 0, 0)
	e.wantStats("dest", 1, 0, 0)
}

// testMoveFifoHeldBlocksGroup: on a FIFO source, a message in flight when the
// task reaches it stays, and so does every later message of its group, so
// that the group's order holds in both queues; the other groups move whole.
// Rate 0 moves everything in one step; rate 1 takes one message per step, so
// the block must outlive the step that found the held message, the end of
// that message's lease, and (restart) a restart of the backend.
func testMoveFifoHeldBlocksGroup(t *testing.T, s suite, rate int, restart bool) {
	e := s.setup(t)
	if restart {
		e.requireReopen()
	}
	mt := e.b
	e.fifoQueue("dlq.fifo", nil)
	e.fifoQueue("dest.fifo", nil)
	e.fifoQueue("src.fifo", map[string]string{
		model.AttrVisibilityTimeout: "1",
		model.AttrRedrivePolicy:     redrivePolicy("dlq.fifo", 1),
	})
	// Dead-letter one message at a time, so that the DLQ holds them in this
	// order, the two groups interleaved: b1 r1 b2 r2 b3 r3.
	for i, body := range []string{"b1", "r1", "b2", "r2", "b3", "r3"} {
		e.fsend("src.fifo", body[:1], body, body)
		wantBodies(t, "receive from src.fifo", e.receiveMax("src.fifo", 1, 0), body)
		e.advance(time.Second)
		e.eventuallyNotInFlight("src.fifo")
		e.moveToDLQ("src.fifo", "dlq.fifo", int64(i+1))
		e.advance(time.Second)
	}
	// Lease b1, the head of group b, for an hour. A receive may serve group r
	// first: such a lease is given up at once, r stays wholly ready.
	var held model.Delivery
	var release []string
	for held.ID == "" {
		d := e.receiveOneFor("dlq.fifo", time.Hour)
		switch d.GroupID {
		case "b":
			if d.Body != "b1" {
				t.Fatalf("group b's first receive gave %q, want b1", d.Body)
			}
			held = d
		default:
			if len(release) > 0 {
				t.Fatalf("a second receive of group %q (%q) while it is locked", d.GroupID, d.Body)
			}
			release = append(release, d.Receipt)
		}
	}
	for _, r := range release {
		e.mustChangeVis("dlq.fifo", r, 0)
	}
	e.wantStats("dlq.fifo", 5, 1, 0)

	task, err := mt.StartMoveTask(e.ctx, model.MoveTaskRequest{Source: "dlq.fifo", Destination: "dest.fifo", MaxPerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	if task.ToMove != 6 {
		t.Fatalf("started task = %+v, want ToMove 6 (every message the source held, in flight or not)", task)
	}
	// The first step passes over b1 and moves r1 (at rate 0, everything).
	eventually(t, "the first message moved", func() bool { return e.task("dlq.fifo").Moved >= 1 })
	if restart {
		e.reopen()
	}
	// b1's lease ends while the task runs: group b stays blocked all the same.
	e.mustChangeVis("dlq.fifo", held.Receipt, 0)
	done := e.advanceUntilTask("dlq.fifo", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 3 || done.ToMove != 6 || done.FailureReason != "" {
		t.Fatalf("completed task = %+v, want Moved 3 (group r) of ToMove 6", done)
	}
	// Group r moved whole and in order; group b stayed whole, in its order.
	e.wantStats("dest.fifo", 3, 0, 0)
	e.wantStats("dlq.fifo", 3, 0, 0)
	wantBodies(t, "dest.fifo", e.receiveN(model.ReceiveRequest{Queue: "dest.fifo"}, 3), "r1", "r2", "r3")
	wantBodies(t, "dlq.fifo after the task", e.receiveN(model.ReceiveRequest{Queue: "dlq.fifo"}, 3), "b1", "b2", "b3")
}
