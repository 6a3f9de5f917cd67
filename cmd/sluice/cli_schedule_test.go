package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sclient "github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
)

func TestCLISchedule(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "reports")
	r := e.ok("schedule", "create", "nightly-report", "reports", `{"report": "daily-sales"}`, "--cron", "0 2 * * *",
		"--tz", "Europe/Berlin", "--missed", "once", "--priority", "5", "--attr", "kind=report", "--correlation-id", "nightly")
	wantContains(t, "create", r.stdout, "created schedule nightly-report: 0 2 * * * (Europe/Berlin) to queue reports; next run ", "02:00:00 CE")
	// The same again answers it; other settings are a conflict, with what to do.
	e.ok("schedule", "create", "nightly-report", "reports", `{"report": "daily-sales"}`, "--cron", "0 2 * * *",
		"--tz", "Europe/Berlin", "--missed", "once", "--priority", "5", "--attr", "kind=report", "--correlation-id", "nightly")
	e.fails(1, []string{"schedule", "create", "nightly-report", "reports", "x", "--cron", "0 3 * * *"},
		"already exists with a different", "sluice schedule show NAME")

	e.ok("schedule", "create", "tick", "reports", "tick", "--every", "1s")
	var d sclient.Delivery
	testutil.Eventually(t, 20*time.Second, "the tick's message", func() bool {
		ds, err := e.c.Receive(context.Background(), "reports", sclient.WaitTime(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			d = ds[0]
		}
		return len(ds) > 0
	})
	if d.Body != "tick" {
		t.Fatalf("the tick's message: %+v", d)
	}

	r = e.ok("schedule", "list")
	wantContains(t, "list", squeeze(r.stdout), "NAME QUEUE SCHEDULE ZONE STATE NEXT RUN LAST RUN SENT",
		"nightly-report reports 0 2 * * * Europe/Berlin active", "tick reports @every 1s UTC active")
	r = e.ok("schedule", "list", "--prefix", "night", "--json")
	var list []scheduleJSON
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].Name != "nightly-report" ||
		list[0].Priority != 5 || list[0].Attributes["kind"] != "report" || list[0].CorrelationID != "nightly" || list[0].NextRun == nil {
		t.Fatalf("list --json: %v %+v", err, list)
	}
	r = e.ok("schedule", "show", "nightly-report")
	wantContains(t, "show", squeeze(r.stdout), "schedule 0 2 * * *", "time zone Europe/Berlin", "missed runs once",
		"state active", "priority 5", "correlation id nightly", "attribute kind report", `body "{\"report\": \"daily-sales\"}"`)

	r = e.ok("schedule", "pause", "tick")
	wantContains(t, "pause", r.stdout, "paused schedule tick")
	r = e.ok("schedule", "show", "tick", "--json")
	var one scheduleJSON
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil || !one.Paused || one.Sent < 1 || one.LastRun == nil {
		t.Fatalf("show --json of a paused schedule: %v %+v", err, one)
	}
	r = e.ok("schedule", "resume", "tick")
	wantContains(t, "resume", r.stdout, "resumed schedule tick; next run ")
	r = e.ok("schedule", "delete", "tick")
	wantContains(t, "delete", r.stdout, "deleted schedule tick")
	e.fails(1, []string{"schedule", "show", "tick"}, "does not exist", "sluice schedule list")

	// Bad input: what is wrong, and what to do.
	e.fails(1, []string{"schedule", "create", "bad", "reports", "x", "--cron", "61 * * * *"}, "Schedule is invalid", "above maximum", "--cron takes five fields")
	e.fails(1, []string{"schedule", "create", "bad", "reports", "x", "--cron", "@daily", "--tz", "Mars/Olympus"}, "unknown time zone", "IANA")
	e.fails(1, []string{"schedule", "create", "bad", "nope", "x", "--every", "1m"}, "does not exist", "sluice queue list")
	e.fails(2, []string{"schedule", "create", "bad", "reports", "x"}, "say when it runs")
	e.fails(2, []string{"schedule", "create", "bad", "reports", "x", "--cron", "@daily", "--every", "1m"}, "not both")
	e.fails(2, []string{"schedule", "create", "bad", "reports", "x", "--every", "1500ms"}, "whole seconds")
	e.fails(2, []string{"schedule", "create", "bad", "reports", "--every", "1m"}, "give the message")
	if r := e.run("schedule", "--help"); !strings.Contains(r.stdout+r.stderr, "create") {
		t.Fatalf("schedule --help: %+v", r)
	}
	r = e.run("schedule", "create", "--help")
	wantContains(t, "create --help", r.stdout+r.stderr, "--cron", "--every", "--tz", "--missed", "sluice schedule create nightly-report")
}
