package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/browsertest"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestOverviewPage: the overview shows the totals (as GET /v1/overview and
// /v1/stats count them), the version, the uptime and the embedded store's
// size and free disk, in human units with the bytes on hover.
func TestOverviewPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createWithDLQ("orders")
	e.send("orders", "a")
	e.send("orders", "b")
	e.deadLetter("orders", "c", "boom")
	e.open("#/overview")
	e.page.Eventually(wait, "the totals", `document.querySelector("#ov-queues").textContent === "2" && document.querySelector("#ov-visible").textContent === "2" && document.querySelector("#ov-deadletters").textContent === "1"`)
	e.page.Eventually(wait, "the store's figures", `document.querySelectorAll("#overview-store dt").length >= 5`)
	got := browsertest.Eval[map[string]string](e.page, `Object.fromEntries([...document.querySelectorAll("#overview-store dd")].map(dd => [dd.dataset.key, dd.textContent + "@" + dd.title]))`)
	var ov struct {
		Version string
		Store   struct{ SizeBytes, FreeBytes int64 }
	}
	e.call("GET", "/v1/overview", nil, &ov)
	if got["Version"] != ov.Version+"@" || !strings.Contains(got["Store"], "embedded") {
		t.Errorf("version and store %q, want %q, embedded", got, ov.Version)
	}
	if !strings.HasSuffix(got["Free disk"], " bytes") || !strings.Contains(got["Free disk"], "iB@") || !strings.Contains(got["Store size"], "@") {
		t.Errorf("store size and free disk %q: want human units with the bytes on hover", got)
	}
	if got["Uptime"] == "" || got["Uptime"] == "—@" {
		t.Errorf("uptime %q", got["Uptime"])
	}
	e.page.Eventually(wait, "the health summary names the warning queue", `document.querySelector("#overview-health").textContent.includes("orders (warning)")`)
	e.page.Clean()
}

// TestMessagePageAndFind: the id search opens a message's page, which shows
// its body as text, its attributes and fields; a dead letter's page shows
// its failure reason; an unknown id says so.
func TestMessagePageAndFind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createWithDLQ("orders")
	e.deadLetter("orders", "dead", "card declined")
	var sent struct{ ID string }
	e.call("POST", "/v1/queues/orders/messages", map[string]any{"body": `<b>{"order": 7}</b>`, "correlationId": "c-7",
		"attributes": map[string]any{"tenant": map[string]any{"type": "String", "value": "acme"}}}, &sent)
	e.open("#/queues/orders")
	e.page.Do(chromedp.SendKeys(chromedp.CSS("#find-id"), sent.ID))
	e.page.Do(chromedp.Click(chromedp.CSS("#find-go")))
	e.page.Eventually(wait, "the message's page", `document.querySelector("#message-body") !== null`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#message-body").textContent`); got != `<b>{"order": 7}</b>` {
		t.Errorf("body %q", got)
	}
	if n := browsertest.Eval[int](e.page, `document.querySelectorAll("main b").length`); n != 0 {
		t.Error("the body became markup")
	}
	fields := browsertest.Eval[string](e.page, `document.querySelector("#message-fields").textContent + "|" + document.querySelector("#message-attributes").textContent`)
	for _, want := range []string{"Correlation idc-7", "Stateready", "tenant", "acme"} {
		if !strings.Contains(fields, want) {
			t.Errorf("the page %q lacks %q", fields, want)
		}
	}
	// The Status section, from the job status route.
	e.page.Eventually(wait, "the status", `(document.querySelector("#status-fields") || {}).textContent?.includes("Statusready")`)
	e.notReloaded()

	// A dead letter, from the Dead letters tab's link.
	e.open("#/queues/orders/dead-letters")
	e.page.Eventually(wait, "the dead letter", `document.querySelector("#dead-letter-rows a.msg-link") !== null`)
	e.page.Do(chromedp.Click(chromedp.CSS("#dead-letter-rows a.msg-link")))
	e.page.Eventually(wait, "the dead letter's page", `(document.querySelector("#message-fields") || {}).textContent?.includes("Failure reasoncard declined")`)
	// Its status lists its failures, newest first, with when.
	e.page.Eventually(wait, "the dead letter's failure history", `(document.querySelector("#status-failures tbody tr") || {}).textContent?.includes("card declined")`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#status-failures tbody tr time").textContent`); !strings.Contains(got, "ago") && got != "now" {
		t.Errorf("the failure's time %q: want it relative to now", got)
	}

	// An id the queue never held: the page says so, and asks nothing the
	// broker answers with an error (a 404 or 409 is a console error): not
	// the status of an id browsing did not find in a queue that keeps no
	// records, nor the dead letters of a queue without a dead-letter queue.
	e.open("#/queues/orders/messages/no-such-id")
	e.page.Eventually(wait, "not found", `document.querySelector("#message-missing") !== null`)
	e.createQueue("plain", nil)
	e.open("#/queues/plain/messages/no-such-id")
	e.page.Eventually(wait, "not found in a queue without a dead-letter queue", `document.querySelector("#message-missing") !== null`)

	// A queue that keeps records: an acked message's page has its status,
	// completed with the ack's result.
	e.createQueue("jobs", map[string]string{"CompletedRetentionSeconds": "600"})
	id := e.send("jobs", "work")
	var got struct {
		Messages []struct{ Receipt string }
	}
	e.call("POST", "/v1/queues/jobs/receive", map[string]any{"max": 1, "waitSeconds": 5}, &got)
	if len(got.Messages) != 1 {
		t.Fatalf("receive from jobs: %d messages", len(got.Messages))
	}
	e.call("POST", "/v1/queues/jobs/ack", map[string]any{"receipt": got.Messages[0].Receipt, "result": "done 7"}, nil)
	e.open("#/queues/jobs/messages/" + id)
	e.page.Eventually(wait, "the completed status", `(document.querySelector("#status-fields") || {}).textContent?.includes("Statuscompleted")`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#status-fields").textContent`); !strings.Contains(got, "done 7") {
		t.Errorf("status %q: want the ack's result", got)
	}
	time.Sleep(500 * time.Millisecond) // any late answer is logged by now
	e.page.Clean()
}

// TestSchedulesPage: a schedule is listed with its queue and next run,
// and Pause pauses it (checked through the API).
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("reports", nil)
	e.call("POST", "/v1/schedules", map[string]any{"name": "nightly", "queue": "reports", "schedule": "0 2 * * *", "message": map[string]any{"body": "run"}}, nil)
	e.open("#/schedules")
	e.page.Eventually(wait, "the schedule", `document.querySelector('#schedule-rows tr[data-schedule="nightly"] td.next time') !== null`)
	if got := browsertest.Eval[string](e.page, `document.querySelector('#schedule-rows tr[data-schedule="nightly"] td.next').textContent`); !strings.HasPrefix(got, "in ") {
		t.Errorf("next run %q, want relative (in …)", got)
	}
	e.page.Do(chromedp.Click(chromedp.CSS(`#schedule-rows tr[data-schedule="nightly"] button[data-action="pause"]`)))
	testutil.Eventually(t, wait, "the schedule paused", func() bool {
		var s struct{ Paused bool }
		e.call("GET", "/v1/schedules/nightly", nil, &s)
		return s.Paused
	})
	e.page.Eventually(wait, "Resume shown", `document.querySelector('#schedule-rows tr[data-schedule="nightly"] button[data-action="resume"]') !== null`)
	e.page.Clean()
}

// TestRelativeTimesUseTheBrokersClock: with the browser's clock 10 minutes
// slow, a schedule's next run (within the minute) still reads "in … s",
// on the schedules page, which has no live statistics to learn the
// broker's clock from: only a queue's page set it, so the schedules page
// of a fresh tab said "in 10 min …".
func TestRelativeTimesUseTheBrokersClock(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("reports", nil)
	e.call("POST", "/v1/schedules", map[string]any{"name": "often", "queue": "reports", "schedule": "* * * * *", "message": map[string]any{"body": "run"}}, nil)
	slow := chromedp.Action[chromedp.Void](func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdpage.AddScriptToEvaluateOnNewDocument, cdpage.AddScriptToEvaluateOnNewDocumentParams{
			Source: `{ const now = Date.now.bind(Date); Date.now = () => now() - 600000; }`,
		})
		return chromedp.Void{}, err
	})
	e.page.Do(slow)
	e.open("#/schedules")
	e.page.Eventually(wait, "the schedule", `document.querySelector('#schedule-rows tr[data-schedule="often"] td.next time') !== null`)
	e.page.Eventually(wait, "the next run by the broker's clock", `/^(in \d+ s|now)$/.test(document.querySelector('#schedule-rows tr[data-schedule="often"] td.next').textContent)`)
	e.page.Clean()
}
