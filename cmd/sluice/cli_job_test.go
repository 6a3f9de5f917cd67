package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sclient "github.com/sluicemq/sluice/client"
)

func TestCLIJobShow(t *testing.T) {
	e := setupCLI(t)
	e.ok("queue", "create", "jobs", "--completed-retention", "1h")
	q, err := e.c.GetQueue(context.Background(), "jobs")
	if err != nil || q.Attributes["CompletedRetentionSeconds"] != "3600" {
		t.Fatalf("--completed-retention 1h: %v %v", err, q.Attributes)
	}
	res, err := e.c.Send(context.Background(), "jobs", sclient.Message{Body: "invoice 17"})
	if err != nil {
		t.Fatal(err)
	}
	r := e.ok("job", "show", "jobs", res.ID)
	wantContains(t, "show of a ready message", squeeze(r.stdout), "MESSAGE "+res.ID, "queue jobs", "state ready", "attempts 0")

	ds, err := e.c.Receive(context.Background(), "jobs", sclient.VisibilityTimeout(time.Minute))
	if err != nil || len(ds) != 1 {
		t.Fatal(err, ds)
	}
	r = e.ok("job", "show", "jobs", res.ID)
	wantContains(t, "show of a leased message", squeeze(r.stdout), "state inFlight", "attempts 1", "lease ends ")
	// A failure shows in the history, with its time.
	if err := e.c.Nack(context.Background(), "jobs", ds[0].Receipt, "db down", 0); err != nil {
		t.Fatal(err)
	}
	r = e.ok("job", "show", "jobs", res.ID)
	wantContains(t, "show of a nacked message", squeeze(r.stdout), "last failure db down", "failures 1", "Z db down")
	r = e.ok("job", "show", "jobs", res.ID, "--json")
	var failed jobJSON
	if err := json.Unmarshal([]byte(r.stdout), &failed); err != nil || failed.FailureCount != 1 || len(failed.Failures) != 1 ||
		failed.Failures[0].Reason != "db down" || failed.Failures[0].At.IsZero() {
		t.Fatalf("show --json of a nacked message: %v %+v", err, failed)
	}
	if ds, err = e.c.Receive(context.Background(), "jobs", sclient.VisibilityTimeout(time.Minute)); err != nil || len(ds) != 1 {
		t.Fatal(err, ds)
	}
	if err := e.c.AckWithResult(context.Background(), "jobs", ds[0].Receipt, `{"pdf":"s3://invoices/17.pdf"}`); err != nil {
		t.Fatal(err)
	}
	r = e.ok("job", "show", "jobs", res.ID, "--json")
	var st jobJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.State != "completed" || st.Result == nil ||
		*st.Result != `{"pdf":"s3://invoices/17.pdf"}` || st.CompletedAt == nil {
		t.Fatalf("show --json of a completed message: %v %+v", err, st)
	}
	r = e.ok("job", "show", "jobs", res.ID)
	wantContains(t, "show of a completed message", squeeze(r.stdout), "state completed", `result {"pdf":"s3://invoices/17.pdf"}`)

	e.fails(1, []string{"job", "show", "jobs", "00000000-0000-4000-8000-000000000000"}, "message_not_found", "--completed-retention")
	e.fails(1, []string{"job", "show", "nope", res.ID}, "queue_not_found", "sluice queue list")
	e.fails(2, []string{"job", "show", "jobs"}, "sluice job show --help")
	r = e.ok("job", "show", "--help")
	wantContains(t, "help", r.stdout, "sluice job show [flags] QUEUE ID", "-json")
	e.ok("queue", "set", "jobs", "--completed-retention", "0")
	if q, _ = e.c.GetQueue(context.Background(), "jobs"); q.Attributes["CompletedRetentionSeconds"] != "" && q.Attributes["CompletedRetentionSeconds"] != "0" {
		t.Fatalf("--completed-retention 0: %v", q.Attributes["CompletedRetentionSeconds"])
	}
}
