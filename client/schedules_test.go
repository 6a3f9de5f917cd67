package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
)

func TestSchedules(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := context.Background()
	e.queue("reports", nil)

	spec := client.ScheduleSpec{Name: "tick", Queue: "reports", Spec: "@every 1s", Missed: "once",
		Message: client.Message{Body: "tick", Priority: 7, CorrelationID: "c-1",
			Attributes: map[string]client.Attribute{"kind": client.String("tick"), "raw": client.Binary([]byte{0, 1})}}}
	s, err := e.c.CreateSchedule(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "tick" || s.Queue != "reports" || s.Spec != "@every 1s" || s.TimeZone != "UTC" || s.Missed != "once" || s.Paused ||
		s.Message.Body != "tick" || s.Message.Priority != 7 || s.Message.CorrelationID != "c-1" ||
		s.Message.Attributes["kind"].Value != "tick" || string(s.Message.Attributes["raw"].Binary) != "\x00\x01" ||
		s.NextRun.IsZero() || s.CreatedAt.IsZero() {
		t.Fatalf("CreateSchedule answered %+v", s)
	}
	// The same create again answers it; another spec is ErrConflict.
	if again, err := e.c.CreateSchedule(ctx, spec); err != nil || again.CreatedAt != s.CreatedAt {
		t.Fatalf("create again: %+v, %v", again, err)
	}
	other := spec
	other.Spec = "@every 2s"
	_, err = e.c.CreateSchedule(ctx, other)
	wantIs(t, err, client.ErrConflict)

	// It runs, in real time, and its message is the schedule's.
	var d client.Delivery
	testutil.Eventually(t, 20*time.Second, "a run's message", func() bool {
		ds, err := e.c.Receive(ctx, "reports", client.WaitTime(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 {
			d = ds[0]
		}
		return len(ds) == 1
	})
	if d.Body != "tick" || d.Priority != 7 || d.CorrelationID != "c-1" || d.Attributes["kind"].Value != "tick" || d.DedupID == "" {
		t.Fatalf("a run's message: %+v", d)
	}
	got, err := e.c.GetSchedule(ctx, "tick")
	if err != nil || got.Sent < 1 || got.LastRun.IsZero() || got.LastMessageID == "" {
		t.Fatalf("GetSchedule after a run: %+v, %v", got, err)
	}

	p, err := e.c.PauseSchedule(ctx, "tick")
	if err != nil || !p.Paused {
		t.Fatalf("PauseSchedule: %+v, %v", p, err)
	}
	r, err := e.c.ResumeSchedule(ctx, "tick")
	if err != nil || r.Paused {
		t.Fatalf("ResumeSchedule: %+v, %v", r, err)
	}

	if _, err := e.c.CreateSchedule(ctx, client.ScheduleSpec{Name: "nightly", Queue: "reports", Spec: "0 2 * * *",
		TimeZone: "Europe/Berlin", Message: client.Message{Body: "report"}}); err != nil {
		t.Fatal(err)
	}
	page, err := e.c.ListSchedules(ctx, client.PageSize(1))
	if err != nil || len(page.Schedules) != 1 || page.Schedules[0].Name != "nightly" || page.Next != "nightly" {
		t.Fatalf("ListSchedules, first page: %+v, %v", page, err)
	}
	page, err = e.c.ListSchedules(ctx, client.After(page.Next))
	if err != nil || len(page.Schedules) != 1 || page.Schedules[0].Name != "tick" || page.Next != "" {
		t.Fatalf("ListSchedules, second page: %+v, %v", page, err)
	}

	_, err = e.c.CreateSchedule(ctx, client.ScheduleSpec{Name: "bad", Queue: "reports", Spec: "61 * * * *", Message: client.Message{Body: "x"}})
	wantIs(t, err, client.ErrInvalidParameter)
	_, err = e.c.CreateSchedule(ctx, client.ScheduleSpec{Name: "bad", Queue: "reports", Spec: "@daily", TimeZone: "Moon/Tranquility", Message: client.Message{Body: "x"}})
	wantIs(t, err, client.ErrInvalidParameter)
	_, err = e.c.CreateSchedule(ctx, client.ScheduleSpec{Name: "bad", Queue: "nope", Spec: "@daily", Message: client.Message{Body: "x"}})
	wantIs(t, err, client.ErrQueueNotFound)

	if err := e.c.DeleteSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetSchedule(ctx, "tick")
	wantIs(t, err, client.ErrNotFound)
}
