package brokertest

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/internal/archive"
	"github.com/sluicemq/sluice/broker/model"
)

// The archive: a queue with ArchiveExpired has the messages its retention
// ends written to the broker's archive before they are removed, once each,
// across a restart; a queue without it has none written.
var archiveTests = []testCase{
	{"ArchivesExpired", testArchivesExpired},
	{"OnceAcrossRestart", testArchiveOnceAcrossRestart},
}

// archiveDir is the backend's archive directory, or skips the test.
func (e *env) archiveDir() string {
	e.t.Helper()
	if e.s.h.ArchiveDir == nil {
		e.t.Skip("Harness.ArchiveDir is nil: this backend's archive is untested")
	}
	return e.s.h.ArchiveDir(e.be)
}

// archived reads the archive's lines (every file, open or closed).
func (e *env) archived() []model.ExportLine {
	e.t.Helper()
	ls, err := archive.ReadDir(e.archiveDir())
	if err != nil {
		e.t.Fatalf("reading the archive: %v", err)
	}
	return ls
}

// archivedBodies are the archive's bodies, sorted.
func (e *env) archivedBodies() []string {
	var out []string
	for _, l := range e.archived() {
		out = append(out, l.Body)
	}
	slices.Sort(out)
	return out
}

func testArchivesExpired(t *testing.T, s suite) {
	o := &countObserver{counts: map[string]int{}, refused: map[string]int{}}
	e := s.setup(t, func(c *broker.Config) { c.Observer = o })
	e.archiveDir()
	e.createQueue("kept", map[string]string{model.AttrMessageRetentionPeriod: "60", model.AttrArchiveExpired: "true"})
	e.createQueue("plain", map[string]string{model.AttrMessageRetentionPeriod: "60"})
	if got := e.getQueue("kept").Config.Attributes()[model.AttrArchiveExpired]; got != "true" {
		t.Fatalf("ArchiveExpired reads %q, want true", got)
	}
	if got := e.getQueue("plain").Config.Attributes()[model.AttrArchiveExpired]; got != "" {
		t.Fatalf("a plain queue lists ArchiveExpired %q", got)
	}
	t0 := e.clock.Now()
	e.send("kept",
		model.SendEntry{Body: "a", Attributes: map[string]model.MessageAttribute{
			"color": {DataType: "String", StringValue: "red"},
			"blob":  {DataType: "Binary", BinaryValue: []byte{0, 1, 2}},
		}},
		model.SendEntry{Body: "b"},
		model.SendEntry{Body: "c", Delay: dur(model.MaxDelay)})
	e.sendBody("plain", "p")
	// a is received once and its lease lapses: its history is archived.
	got := e.receiveOneFor("kept", 5*time.Second)
	e.advance(5 * time.Second)
	e.eventuallyStats("kept", 2, 0, 1)
	if e.archived() != nil {
		t.Fatal("the archive holds lines before any retention ended")
	}
	zero := model.QueueStats{}
	e.advanceUntil(5*time.Second, retentionLimit, "the retention of both queues ends", func() bool {
		return e.stats("kept") == zero && e.stats("plain") == zero
	})
	if b := e.archivedBodies(); !slices.Equal(b, []string{"a", "b", "c"}) {
		t.Fatalf("archived bodies %v, want a b c (once each; none of the plain queue)", b)
	}
	for _, l := range e.archived() {
		if l.Queue != "kept" || l.ArchivedAt == nil || l.ArchivedAt.Before(t0.Add(time.Minute)) || !l.CreatedAt.Equal(t0.UTC()) || l.ID == "" {
			t.Errorf("line %+v: want queue kept, created at %v, archived after its retention", l, t0)
		}
		if l.Body != "a" {
			continue
		}
		if l.ID != got.ID || l.ReceiveCount != 1 || l.FirstReceivedAt == nil {
			t.Errorf("a's line %+v: want id %s, received once", l, got.ID)
		}
		if l.Attributes["color"] != (model.ExportAttribute{Type: "String", Value: "red"}) || l.Attributes["blob"] != (model.ExportAttribute{Type: "Binary", Value: "AAEC"}) {
			t.Errorf("a's attributes %+v", l.Attributes)
		}
	}
	eventually(t, "the archive's counts", func() bool { return o.get("kept archived") == 3 })
	if n := o.get("kept archive_failed") + o.get("plain archived") + o.get("plain archive_failed"); n != 0 {
		t.Fatalf("counts: %v", o.counts)
	}
	// Switched off, the next expired message is not archived.
	if err := e.b.SetQueueAttributes(e.ctx, "kept", map[string]string{model.AttrArchiveExpired: "false"}); err != nil {
		t.Fatal(err)
	}
	e.sendBody("kept", "d")
	e.advanceUntil(5*time.Second, retentionLimit, "d's retention ends", func() bool { return e.stats("kept") == zero })
	if b := e.archivedBodies(); !slices.Equal(b, []string{"a", "b", "c"}) {
		t.Fatalf("archived bodies %v after ArchiveExpired=false, want a b c", b)
	}
}

// The archive is written once per expired message across restarts: before
// the retention ends, and after it.
func testArchiveOnceAcrossRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.archiveDir()
	e.createQueue("q", map[string]string{model.AttrMessageRetentionPeriod: "60", model.AttrArchiveExpired: "true"})
	e.sendBody("q", "a")
	e.reopen()
	e.advance(30 * time.Second)
	e.sendBody("q", "b")
	zero := model.QueueStats{}
	e.advanceUntil(5*time.Second, retentionLimit, "a's retention ends", func() bool { return e.stats("q").Visible == 1 })
	e.reopen()
	e.advanceUntil(5*time.Second, retentionLimit, "b's retention ends", func() bool { return e.stats("q") == zero })
	e.reopen()
	e.advance(time.Hour)
	e.clock.Settle(realTimeout)
	if b := e.archivedBodies(); !slices.Equal(b, []string{"a", "b"}) {
		t.Fatalf("archived bodies %v, want a b once each", b)
	}
}
