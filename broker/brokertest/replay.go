package brokertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Replay (Broker.Replay): a move task that replays dead letters, all of a
// DLQ or chosen ids, optionally edited; a replayed message is new (a new id,
// its counts at 0) and keeps its attributes (its correlation id) unless they
// are edited; a replay into a full queue waits for room.
var replayTests = []testCase{
	{"All", testReplayAll},
	{"ChosenIDs", testReplayChosen},
	{"EditAndReplay", testReplayEdit},
	{"EditTooLargeIsSkipped", testReplayEditTooLarge},
	{"EditRefusesTimeToLive", testReplayEditTTL},
	{"ListedWithProgress", testReplayListed},
	{"WaitsForRoomInFullQueue", testReplayWaitsForRoom},
	{"SelectionSurvivesRestart", testReplayRestart},
}

// deadLetterEntries creates dlq (if needed) and src (maxReceiveCount 1),
// dead-letters entries from src one clock second apart in SentAt order, and
// returns the dead letters of src, oldest first, as Browse shows them.
func (e *env) deadLetterEntries(src, dlq string, entries ...model.SendEntry) []model.BrowsedMessage {
	e.t.Helper()
	if _, err := e.b.GetQueue(e.ctx, dlq); err != nil {
		e.createQueue(dlq, nil)
	}
	e.createQueue(src, map[string]string{
		model.AttrVisibilityTimeout: "1",
		model.AttrRedrivePolicy:     redrivePolicy(dlq, 1),
	})
	for _, en := range entries {
		e.send(src, en)
		e.advance(time.Second)
	}
	before := e.stats(dlq).Visible
	e.receiveN(model.ReceiveRequest{Queue: src}, len(entries))
	e.advance(time.Second)
	e.eventuallyNotInFlight(src)
	e.moveToDLQ(src, dlq, before+int64(len(entries)))
	var out []model.BrowsedMessage
	for _, m := range e.browseAll(dlq, model.BrowseRequest{}) {
		if m.DeadLetterSource == src {
			out = append(out, m)
		}
	}
	if len(out) != len(entries) {
		e.t.Fatalf("%s holds %d dead letters of %s, want %d", dlq, len(out), src, len(entries))
	}
	return out
}

// replay starts a replay of dlq and fails the test on an error.
func (e *env) replay(dlq string, req broker.ReplayRequest) model.MoveTask {
	e.t.Helper()
	t, err := e.b.Replay(e.ctx, dlq, req)
	if err != nil {
		e.t.Fatalf("Replay(%s, %+v): %v", dlq, req, err)
	}
	if t.Status != model.MoveTaskRunning {
		e.t.Fatalf("Replay(%s) started %+v, want RUNNING", dlq, t)
	}
	return t
}

// taskStays checks, for a short real time (quiet), that the latest task of
// source stays RUNNING with moved messages moved.
func (e *env) taskStays(source string, moved int64) {
	e.t.Helper()
	for end := time.Now().Add(quiet); ; {
		if got := e.task(source); got.Moved != moved || got.Status != model.MoveTaskRunning {
			e.t.Fatalf("task of %s = %+v, want RUNNING with %d moved", source, got, moved)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(pollInterval)
	}
}

// correlated is a message with a correlation id and another attribute.
func correlated(body, cid string) model.SendEntry {
	return model.SendEntry{Body: body, Attributes: map[string]model.MessageAttribute{
		model.MsgAttrCorrelationID: {DataType: "String", StringValue: cid},
		"kind":                     {DataType: "String", StringValue: "order"},
	}}
}

// wantReplayed checks that m (browsed on its new queue) is a new message: an
// id none of old has, counts at 0, no dead-letter source or failure.
func wantReplayed(t testing.TB, m model.BrowsedMessage, old ...model.BrowsedMessage) {
	t.Helper()
	for _, o := range old {
		if m.ID == o.ID {
			t.Errorf("replayed %q kept its id %s; a replayed message is new", m.Body, m.ID)
		}
	}
	if m.ReceiveCount != 0 || m.Attempts != 0 || !m.FirstReceiveAt.IsZero() || !m.LastReceiveAt.IsZero() ||
		m.FailureReason != "" || m.DeadLetterSource != "" {
		t.Errorf("replayed %q: ReceiveCount %d Attempts %d FirstReceiveAt %v LastReceiveAt %v FailureReason %q DeadLetterSource %q; want a fresh message",
			m.Body, m.ReceiveCount, m.Attempts, m.FirstReceiveAt, m.LastReceiveAt, m.FailureReason, m.DeadLetterSource)
	}
}

// attr returns m's string attribute name ("" if absent).
func attr(m model.Message, name string) string { return m.Attributes[name].StringValue }

// testReplayAll: a replay of every dead letter is the move task back to
// their sources, with the attributes travelling.
func testReplayAll(t *testing.T, s suite) {
	e := s.setup(t)
	capped := correlated("a2", "c-a2") // with its own Sluice.MaxAttempts, which travels too
	capped.Attributes[model.MsgAttrMaxAttempts] = model.MessageAttribute{DataType: "Number", StringValue: "1"}
	old := e.deadLetterEntries("src-a", "dlq", correlated("a1", "c-a1"), capped)
	old = append(old, e.deadLetterEntries("src-b", "dlq", correlated("b1", "c-b1"))...)
	if old[0].Attempts != 1 || old[0].ReceiveCount != 1 {
		t.Fatalf("a dead letter has Attempts %d ReceiveCount %d, want 1 and 1", old[0].Attempts, old[0].ReceiveCount)
	}
	task := e.replay("dlq", broker.ReplayRequest{})
	if task.ToMove != 3 || task.Destination != "" {
		t.Fatalf("replay task = %+v", task)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.ID != task.ID || done.Moved != 3 || done.Skipped != 0 {
		t.Fatalf("completed replay = %+v", done)
	}
	e.wantStats("dlq", 0, 0, 0)
	for src, want := range map[string][]string{"src-a": {"a1", "a2"}, "src-b": {"b1"}} {
		got := e.browseAll(src, model.BrowseRequest{})
		if b := browsedBodies(got); !slices.Equal(b, want) {
			t.Fatalf("%s holds %v, want %v", src, b, want)
		}
		for _, m := range got {
			wantReplayed(t, m, old...)
			if attr(m.Message, model.MsgAttrCorrelationID) != "c-"+m.Body || attr(m.Message, "kind") != "order" {
				t.Errorf("replayed %q has attributes %v; they travel with it", m.Body, m.Attributes)
			}
			if want := map[bool]int{true: 1}[m.Body == "a2"]; m.MaxAttempts != want {
				t.Errorf("replayed %q has MaxAttempts %d, want %d (its Sluice.MaxAttempts)", m.Body, m.MaxAttempts, want)
			}
		}
	}
}

// testReplayChosen: only the chosen dead letters move, in move order; the
// others stay; an id not in the DLQ is passed over.
func testReplayChosen(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dest", nil)
	old := e.deadLetterEntries("src", "dlq", correlated("m0", "c0"), correlated("m1", "c1"), correlated("m2", "c2"), correlated("m3", "c3"))
	task := e.replay("dlq", broker.ReplayRequest{Destination: "dest",
		IDs: []string{old[3].ID, model.NewMessageID(), old[1].ID}})
	if task.ToMove != 2 {
		t.Fatalf("replay of 2 dead letters and an unknown id: ToMove %d, want 2", task.ToMove)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 2 || done.ToMove != 2 {
		t.Fatalf("completed replay = %+v", done)
	}
	got := e.browseAll("dest", model.BrowseRequest{})
	if b := browsedBodies(got); !slices.Equal(b, []string{"m1", "m3"}) {
		t.Fatalf("dest holds %v, want [m1 m3] (the chosen ones, oldest first)", b)
	}
	for _, m := range got {
		wantReplayed(t, m, old...)
	}
	left := e.browseAll("dlq", model.BrowseRequest{})
	if b := browsedBodies(left); !slices.Equal(b, []string{"m0", "m2"}) {
		t.Fatalf("dlq holds %v, want [m0 m2]", b)
	}
	if left[0].ID != old[0].ID || left[1].ID != old[2].ID {
		t.Fatalf("the dead letters left behind changed: %+v", left)
	}
}

// testReplayEdit: an edited body replaces the body and keeps the
// attributes (the correlation id travels); edited attributes replace the
// attributes (and with them the Sluice options) and keep the body.
func testReplayEdit(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dest", nil)
	old := e.deadLetterEntries("src", "dlq", correlated("bad json", "c0"), correlated("keep me", "c1"))

	fixed := `{"fixed":true}`
	e.replay("dlq", broker.ReplayRequest{Destination: "dest", IDs: []string{old[0].ID}, Edit: &model.MessageEdit{Body: &fixed}})
	if done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute); done.Moved != 1 {
		t.Fatalf("edit-and-replay of the body = %+v", done)
	}
	got := e.browseAll("dest", model.BrowseRequest{})
	if len(got) != 1 || got[0].Body != fixed {
		t.Fatalf("dest holds %v, want the edited body", browsedBodies(got))
	}
	wantReplayed(t, got[0], old...)
	if attr(got[0].Message, model.MsgAttrCorrelationID) != "c0" || attr(got[0].Message, "kind") != "order" || len(got[0].Attributes) != 2 {
		t.Fatalf("body-edited message has attributes %v, want its own (correlation id c0)", got[0].Attributes)
	}

	// Back to its source (which has a RedrivePolicy, so Sluice.MaxAttempts
	// is valid there), with new attributes; a plain message waits there.
	e.sendBody("src", "plain")
	e.advance(time.Second)
	attrs := map[string]model.MessageAttribute{
		model.MsgAttrCorrelationID: {DataType: "String", StringValue: "c1-retry"},
		model.MsgAttrPriority:      {DataType: "Number", StringValue: "7"},
		model.MsgAttrMaxAttempts:   {DataType: "Number", StringValue: "4"},
	}
	e.replay("dlq", broker.ReplayRequest{IDs: []string{old[1].ID}, Edit: &model.MessageEdit{Attributes: attrs}})
	if done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute); done.Moved != 1 {
		t.Fatalf("edit-and-replay of the attributes = %+v", done)
	}
	e.wantStats("dlq", 0, 0, 0)
	var edited model.BrowsedMessage
	for _, m := range e.browseAll("src", model.BrowseRequest{}) {
		if m.Body == "keep me" {
			edited = m
		}
	}
	if edited.ID == "" {
		t.Fatal("the attribute-edited message is not back in src")
	}
	wantReplayed(t, edited, old...)
	if len(edited.Attributes) != 3 || attr(edited.Message, model.MsgAttrCorrelationID) != "c1-retry" || edited.Priority != 7 || edited.MaxAttempts != 4 {
		t.Fatalf("attribute-edited message: attributes %v priority %d max attempts %d, want the edited ones (7, 4)",
			edited.Attributes, edited.Priority, edited.MaxAttempts)
	}
	// The edited priority is its priority: it is served before the older one.
	if d := e.receiveOne("src"); d.Body != "keep me" {
		t.Fatalf("src served %q first, want the priority-7 message", d.Body)
	}
}

// testReplayEditTTL: an edit-and-replay whose attributes give a
// Sluice.TimeToLive is refused with InvalidParameterValue before any task
// starts (a replayed message has no time to live: the attribute would never
// be applied); the dead letter stays.
func testReplayEditTTL(t *testing.T, s suite) {
	e := s.setup(t)
	old := e.deadLetterEntries("src", "dlq", correlated("a", "c0"))
	attrs := map[string]model.MessageAttribute{model.MsgAttrTimeToLive: numAttr(60)}
	_, err := e.b.Replay(e.ctx, "dlq", broker.ReplayRequest{IDs: []string{old[0].ID}, Edit: &model.MessageEdit{Attributes: attrs}})
	wantErr(t, "an edit-and-replay with a Sluice.TimeToLive", err, model.ErrInvalidParameterValue)
	if err == nil || !strings.Contains(err.Error(), model.MsgAttrTimeToLive) {
		t.Fatalf("the refusal %v does not name %s", err, model.MsgAttrTimeToLive)
	}
	tasks, err := e.b.ListMoveTasks(e.ctx, "dlq", 10)
	if err != nil || len(tasks) != 0 {
		t.Fatalf("ListMoveTasks = %v, %v; want no task", tasks, err)
	}
	e.wantStats("dlq", 1, 0, 0)
}

// testReplayEditTooLarge: an edited message larger than its destination's
// MaximumMessageSize stays in the DLQ and is counted as skipped; the task
// goes on and completes.
func testReplayEditTooLarge(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dest", map[string]string{model.AttrMaximumMessageSize: "1024"})
	old := e.deadLetterEntries("src", "dlq", correlated("m0", "c0"), correlated("m1", "c1"))
	big := strings.Repeat("x", 1024)
	e.replay("dlq", broker.ReplayRequest{Destination: "dest", IDs: []string{old[0].ID, old[1].ID}, Edit: &model.MessageEdit{Body: &big}})
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 0 || done.Skipped != 2 || done.ToMove != 2 || done.FailureReason != "" {
		t.Fatalf("replay of messages too large for dest = %+v, want Moved 0 Skipped 2", done)
	}
	e.wantStats("dest", 0, 0, 0)
	if got := e.browseAll("dlq", model.BrowseRequest{}); len(got) != 2 || got[0].ID != old[0].ID || got[0].Body != "m0" {
		t.Fatalf("dlq after the skipped replay: %v", browsedBodies(got))
	}
	// Within the limit (the body and the two attributes), it moves.
	fits := strings.Repeat("y", 1024-len(model.MsgAttrCorrelationID+"String"+"c0"+"kind"+"String"+"order"))
	e.replay("dlq", broker.ReplayRequest{Destination: "dest", IDs: []string{old[0].ID}, Edit: &model.MessageEdit{Body: &fits}})
	if done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute); done.Moved != 1 || done.Skipped != 0 {
		t.Fatalf("replay of a message that just fits = %+v", done)
	}
}

// testReplayListed: a replay is a move task: ListMoveTasks shows it,
// RUNNING at its rate with its progress, then COMPLETED.
func testReplayListed(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dest", nil)
	old := e.deadLetterEntries("src", "dlq", correlated("m0", "c0"), correlated("m1", "c1"), correlated("m2", "c2"), correlated("m3", "c3"))
	task := e.replay("dlq", broker.ReplayRequest{Destination: "dest", MaxPerSecond: 1, IDs: []string{old[0].ID, old[2].ID, old[3].ID}})
	eventually(t, "the first message replayed", func() bool { return e.task("dlq").Moved == 1 })
	got := e.task("dlq")
	if got.ID != task.ID || got.Status != model.MoveTaskRunning || got.ToMove != 3 || got.MaxPerSecond != 1 || got.Destination != "dest" {
		t.Fatalf("listed replay = %+v", got)
	}
	e.advanceUntil(100*time.Millisecond, 2*time.Second, "2 replayed", func() bool { return e.task("dlq").Moved == 2 })
	if got := e.task("dlq"); got.Status != model.MoveTaskRunning {
		t.Fatalf("replay ended early: %+v", got)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, 10*time.Second)
	if done.Moved != 3 {
		t.Fatalf("completed replay = %+v", done)
	}
	if ts, err := e.b.ListMoveTasks(e.ctx, "dlq", 10); err != nil || len(ts) != 1 || ts[0].ID != task.ID {
		t.Fatalf("ListMoveTasks = %+v, %v", ts, err)
	}
	e.wantStats("dlq", 1, 0, 0)
}

// testReplayWaitsForRoom: a replay into a queue at its MaxDepth moves
// nothing and stays RUNNING; as room is made, it moves what fits, and
// completes. (Dead-lettering into a full queue is never refused.)
func testReplayWaitsForRoom(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dest", map[string]string{model.AttrMaxDepth: "2"})
	e.sendBody("dest", "x1")
	e.sendBody("dest", "x2")
	// The DLQ itself is full too: dead-lettering into it is not refused.
	e.createQueue("dlq", map[string]string{model.AttrMaxDepth: "1"})
	e.deadLetterEntries("src", "dlq", correlated("m0", "c0"), correlated("m1", "c1"), correlated("m2", "c2"))
	e.replay("dlq", broker.ReplayRequest{Destination: "dest"})
	for range 3 {
		e.advance(time.Second)
		e.taskStays("dlq", 0)
	}
	e.wantStats("dest", 2, 0, 0)
	e.mustDelete("dest", e.receiveOne("dest").Receipt)
	e.advanceUntil(100*time.Millisecond, 5*time.Second, "one replayed into the room made", func() bool { return e.task("dlq").Moved == 1 })
	for range 3 {
		e.advance(time.Second)
		e.taskStays("dlq", 1)
	}
	e.wantStats("dest", 2, 0, 0)
	for _, d := range e.receiveN(model.ReceiveRequest{Queue: "dest", MaxMessages: 2}, 2) {
		e.mustDelete("dest", d.Receipt)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 3 {
		t.Fatalf("completed replay = %+v", done)
	}
	e.wantStats("dlq", 0, 0, 0)
	got := e.browseAll("dest", model.BrowseRequest{})
	if b := browsedBodies(got); !slices.Equal(b, []string{"m1", "m2"}) {
		t.Fatalf("dest holds %v, want [m1 m2] (m0 was received with x2)", b)
	}
}

// testReplayRestart: a selective edit-and-replay resumes after a restart with
// the same selection and the same edit.
func testReplayRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("dest", nil)
	var entries []model.SendEntry
	for i := range 6 {
		entries = append(entries, correlated(fmt.Sprintf("m%d", i), fmt.Sprintf("c%d", i)))
	}
	old := e.deadLetterEntries("src", "dlq", entries...)
	edited := "edited"
	ids := []string{old[0].ID, old[2].ID, old[3].ID, old[5].ID}
	task := e.replay("dlq", broker.ReplayRequest{Destination: "dest", MaxPerSecond: 1, IDs: ids, Edit: &model.MessageEdit{Body: &edited}})
	eventually(t, "the first message replayed", func() bool { return e.task("dlq").Moved == 1 })
	e.reopen()
	if got := e.task("dlq"); got.ID != task.ID || got.Status != model.MoveTaskRunning || got.ToMove != 4 {
		t.Fatalf("replay after restart = %+v", got)
	}
	done := e.advanceUntilTask("dlq", model.MoveTaskCompleted, time.Minute)
	if done.Moved != 4 || done.ToMove != 4 {
		t.Fatalf("completed replay = %+v", done)
	}
	got := e.browseAll("dest", model.BrowseRequest{})
	var cids []string
	for _, m := range got {
		if m.Body != edited {
			t.Errorf("dest holds %q, want every replayed message edited", m.Body)
		}
		cids = append(cids, attr(m.Message, model.MsgAttrCorrelationID))
	}
	if !slices.Equal(cids, []string{"c0", "c2", "c3", "c5"}) {
		t.Fatalf("dest holds the messages of correlation ids %v, want [c0 c2 c3 c5] in order", cids)
	}
	if b := browsedBodies(e.browseAll("dlq", model.BrowseRequest{})); !slices.Equal(b, []string{"m1", "m4"}) {
		t.Fatalf("dlq holds %v, want [m1 m4]", b)
	}
}
