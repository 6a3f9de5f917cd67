package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/browsertest"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/server"
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

// wait is how long a page may take to show what a test waits for: the
// live stream ticks every 200 ms here, but the machine may be loaded (a
// CI run once took over 15 s to show a deleted queue gone while go test
// ./... built and ran the other packages).
const wait = 45 * time.Second

// env is one test's broker (with the live sampler and the dashboard) and
// browser tab.
type env struct {
	t    *testing.T
	url  string
	page *browsertest.Page
}

func setup(t *testing.T) *env {
	t.Helper()
	lcfg := live.DefaultConfig()
	lcfg.Interval = 200 * time.Millisecond
	lcfg.HistoryStep = time.Second
	lv, err := live.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	b := testbroker.Start(t, testbroker.Config{
		Observer: lv,
		Server:   func(c *server.Config) { c.Live, c.Dashboard = lv, true },
	})
	// Opened last, so closed first: the broker stops after the tab's event
	// stream has ended.
	page := browsertest.Open(t, 5*time.Minute) // skips without Chromium; a loaded machine is slow
	return &env{t: t, url: b.URL, page: page}
}

// call calls the native API and decodes its answer into out (when not nil).
func (e *env) call(method, path string, body, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func (e *env) createQueue(name string, attrs map[string]string) {
	e.t.Helper()
	e.call("POST", "/v1/queues", map[string]any{"name": name, "attributes": attrs}, nil)
}

// createWithDLQ creates name and name-dlq, name redriving into it after one receive.
func (e *env) createWithDLQ(name string) {
	e.t.Helper()
	e.createQueue(name+"-dlq", nil)
	e.createQueue(name, map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:` + name + `-dlq","maxReceiveCount":5}`})
}

func (e *env) send(queue, body string) string {
	e.t.Helper()
	var out struct{ ID string }
	e.call("POST", "/v1/queues/"+queue+"/messages", map[string]any{"body": body}, &out)
	return out.ID
}

// deadLetter sends a message to queue and moves it to its dead-letter
// queue with reason.
func (e *env) deadLetter(queue, body, reason string) {
	e.t.Helper()
	e.send(queue, body)
	var got struct {
		Messages []struct{ Receipt string }
	}
	e.call("POST", "/v1/queues/"+queue+"/receive", map[string]any{"max": 1, "waitSeconds": 5}, &got)
	if len(got.Messages) != 1 {
		e.t.Fatalf("receive from %s: %d messages", queue, len(got.Messages))
	}
	e.call("POST", "/v1/queues/"+queue+"/dead-letter", map[string]any{"receipt": got.Messages[0].Receipt, "reason": reason}, nil)
}

type stats struct {
	Visible, InFlight, Delayed int64
	DeadLetters                *int64
}

func (e *env) stats(queue string) stats {
	e.t.Helper()
	var s stats
	e.call("GET", "/v1/queues/"+queue+"/stats", nil, &s)
	return s
}

// confirm clicks the open dialog's OK button and waits until done; a
// timeout names what the page showed: whether the dialog is open, its toast
// (a refused action says why there) and its console problems. (CI twice
// timed out here: a Cancel followed at once by the same button lost the
// confirmation after it; TestConfirmIgnoresALateCloseEvent is that case.)
func (e *env) confirm(t *testing.T, what string, done func() bool) {
	t.Helper()
	e.page.Do(chromedp.Click(chromedp.CSS("#confirm-ok")))
	deadline := time.Now().Add(wait)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: dialog open %v, toast %q, page problems %q", wait, what,
				browsertest.Eval[bool](e.page, `document.querySelector("#confirm").open`),
				browsertest.Eval[string](e.page, `document.querySelector("#toast").textContent`), e.page.Problems())
		}
		time.Sleep(50 * time.Millisecond) // the polling interval, not a wait for the condition
	}
}

// open loads the dashboard at fragment (e.g. "#/queues/orders") and marks
// the document, so that a test can tell it was never reloaded.
func (e *env) open(fragment string) {
	e.t.Helper()
	e.page.Do(chromedp.Navigate(e.url + "/ui/" + fragment))
	e.page.Eventually(wait, "the dashboard script ran", `document.querySelector("main h1") !== null`)
	browsertest.Eval[chromedp.Void](e.page, `window.__sluiceTestMark = 1`)
}

func (e *env) notReloaded() {
	e.t.Helper()
	if !browsertest.Eval[bool](e.page, `window.__sluiceTestMark === 1`) {
		e.t.Fatal("the page was reloaded")
	}
}

// filter types into the list's filter box, replacing what it held.
func (e *env) filter(text string) {
	e.t.Helper()
	browsertest.Eval[chromedp.Void](e.page, `document.querySelector("#filter").value = ""`)
	e.page.Do(chromedp.SendKeys(chromedp.CSS("#filter"), text))
}

// cell is the JavaScript text of a queue row's cell in the list.
func cell(queue, col string) string {
	return fmt.Sprintf(`(document.querySelector('#queue-rows tr[data-queue=%q] td[data-col=%q]') || {}).textContent`, queue, col)
}

func TestListPageShowsTheAPIsNumbersLive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("alpha", nil)
	e.createWithDLQ("beta")
	for i := range 3 {
		e.send("alpha", "a"+strconv.Itoa(i))
	}
	e.deadLetter("beta", "poison", "bad currency")
	e.send("beta", "b")

	e.open("")
	e.page.Eventually(wait, "alpha shows 3 visible", cell("alpha", "visible")+` === "3"`)

	// Every number shown is the API's, for every queue.
	var doc struct {
		Queues []struct {
			Name                       string
			Visible, InFlight, Delayed int64
			DeadLetters                *int64 // null without a dead-letter queue
			Health                     string
		}
	}
	e.call("GET", "/v1/stats", nil, &doc)
	if len(doc.Queues) != 3 {
		t.Fatalf("/v1/stats: %d queues, want 3", len(doc.Queues))
	}
	for _, q := range doc.Queues {
		dead := "—"
		if q.DeadLetters != nil {
			dead = strconv.FormatInt(*q.DeadLetters, 10)
		}
		for col, want := range map[string]string{"visible": strconv.FormatInt(q.Visible, 10), "inFlight": strconv.FormatInt(q.InFlight, 10),
			"delayed": strconv.FormatInt(q.Delayed, 10), "deadLetters": dead} {
			e.page.Eventually(wait, q.Name+" "+col, cell(q.Name, col)+fmt.Sprintf(` === %q`, want))
		}
	}
	// beta has a dead letter: a warning, with the reason.
	e.page.Eventually(wait, "beta's health", cell("beta", "health")+`.startsWith("Warning")`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#summary").textContent`); !strings.HasPrefix(got, "3 queues") {
		t.Errorf("summary %q, want 3 queues", got)
	}

	// Live: new messages show without a reload.
	e.send("alpha", "a3")
	e.send("alpha", "a4")
	e.page.Eventually(wait, "alpha shows 5 visible", cell("alpha", "visible")+` === "5"`)
	e.notReloaded()

	// Filter and sort.
	e.page.Do(chromedp.SendKeys(chromedp.CSS("#filter"), "bet"))
	e.page.Eventually(wait, "the filter keeps beta and beta-dlq", `[...document.querySelectorAll("#queue-rows tr")].map(r => r.dataset.queue).join() === "beta,beta-dlq"`)
	e.page.Do(chromedp.Click(chromedp.CSS(`th[data-key="name"] button`)))
	e.page.Eventually(wait, "sorted by name, descending", `[...document.querySelectorAll("#queue-rows tr")].map(r => r.dataset.queue).join() === "beta-dlq,beta"`)
	if got := browsertest.Eval[string](e.page, `document.querySelector('th[data-key="name"]').getAttribute("aria-sort")`); got != "descending" {
		t.Errorf("aria-sort %q, want descending", got)
	}
	e.page.Clean()
}

func TestListPageThousandQueues(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const n = 1000
	for i := range n {
		e.createQueue(fmt.Sprintf("q-%04d", i), nil)
	}
	e.send("q-0999", "x")
	start := time.Now()
	e.open("")
	e.page.Eventually(wait, "the list shows 1,000 queues", `document.querySelector("#summary").textContent.startsWith("1,000 queues")`)
	t.Logf("1,000 queues listed %v after navigation", time.Since(start).Round(time.Millisecond))
	// Only a page of rows is in the document.
	if rows := browsertest.Eval[int](e.page, `document.querySelectorAll("#queue-rows tr").length`); rows != 50 {
		t.Errorf("%d rows in the document, want 50 (a page)", rows)
	}
	// Updates land in place: a row keeps its element across events.
	browsertest.Eval[chromedp.Void](e.page, `window.__row = document.querySelector('#queue-rows tr[data-queue="q-0000"]')`)
	e.filter("q-0999")
	e.page.Eventually(wait, "the filter finds q-0999 with its message", cell("q-0999", "visible")+` === "1"`)
	e.send("q-0999", "y")
	e.page.Eventually(wait, "q-0999 shows 2", cell("q-0999", "visible")+` === "2"`)
	e.filter("q-000")
	e.page.Eventually(wait, "q-0000 is back", `document.querySelector('#queue-rows tr[data-queue="q-0000"]') === window.__row`)
	// Paging.
	e.filter("q-")
	e.page.Eventually(wait, "page 1 of 20", `document.querySelector("#page-info").textContent.startsWith("Page 1 of 20")`)
	e.page.Do(chromedp.Click(chromedp.CSS("#next-page")))
	e.page.Eventually(wait, "page 2 starts at q-0050", `document.querySelector("#queue-rows tr").dataset.queue === "q-0050"`)
	e.page.Clean()
}

func TestQueuePage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("orders", map[string]string{"VisibilityTimeout": "45"})
	e.send("orders", `{"order": 1}`)
	e.send("orders", `{"order": 2}`)
	e.open("#/queues/orders")
	e.page.Eventually(wait, "visible count", `document.querySelector("#stat-visible").textContent === "2"`)
	e.page.Eventually(wait, "settings", `[...document.querySelectorAll("#settings dt")].some(dt => dt.textContent === "VisibilityTimeout" && dt.nextElementSibling.textContent === "45 s" && dt.nextElementSibling.title === "VisibilityTimeout 45")`)
	e.page.Eventually(wait, "the depth chart has its lines", `document.querySelectorAll("#chart-depth polyline").length === 4`)

	// Send a test message from the page: the count follows.
	e.page.Do(chromedp.Click(chromedp.CSS("#send")))
	e.page.Eventually(wait, "3 visible after the page's send", `document.querySelector("#stat-visible").textContent === "3"`)
	if s := e.stats("orders"); s.Visible != 3 {
		t.Errorf("API: %d visible after the page's send, want 3", s.Visible)
	}

	// Pause and resume.
	e.page.Do(chromedp.Click(chromedp.CSS("#pause")))
	e.page.Eventually(wait, "paused", `document.querySelector("#pause").textContent === "Resume"`)
	var q struct{ Attributes map[string]string }
	e.call("GET", "/v1/queues/orders", nil, &q)
	if q.Attributes["Paused"] != "true" {
		t.Errorf("API: Paused %q after the pause button, want true", q.Attributes["Paused"])
	}
	e.page.Do(chromedp.Click(chromedp.CSS("#pause")))
	e.page.Eventually(wait, "resumed", `document.querySelector("#pause").textContent === "Pause"`)

	// The messages, browsed: nothing is received.
	e.page.Do(chromedp.Click(chromedp.CSS("#tab-messages")))
	e.page.Eventually(wait, "3 messages listed", `document.querySelectorAll("#message-rows tr").length === 3`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#message-rows tr .body").textContent`); got != `{"order": 1}` {
		t.Errorf("first body %q", got)
	}
	if s := e.stats("orders"); s.Visible != 3 || s.InFlight != 0 {
		t.Errorf("API after browsing: %+v, want 3 visible, 0 in flight", s)
	}
	e.notReloaded()
	e.page.Clean()
}

// TestConfirmIgnoresALateCloseEvent asks twice in a row, the second time
// before the browser has delivered the first dialog's close event (it is
// queued as a task). The dialog must not take that late event for its
// second answer: when it did, a Cancel followed quickly by a second
// Delete or Purge lost the confirmation given after it (the OK closed the
// dialog and nothing happened), as CI saw under load.
func TestConfirmIgnoresALateCloseEvent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.open("#/")
	browsertest.Eval[bool](e.page, `(() => {
		window.__answers = [];
		const dlg = document.querySelector("#confirm");
		confirmAction("First?", "", "OK").then(v => window.__answers.push("first " + v));
		dlg.close("cancel");
		confirmAction("Second?", "", "OK").then(v => window.__answers.push("second " + v));
		return true;
	})()`)
	e.page.Eventually(wait, "the first answer", `window.__answers.length >= 1`)
	if !browsertest.Eval[bool](e.page, `document.querySelector("#confirm").open`) {
		t.Fatalf("the second question's dialog is not open; answers %q", browsertest.Eval[[]string](e.page, `window.__answers`))
	}
	e.page.Do(chromedp.Click(chromedp.CSS("#confirm-ok")))
	e.page.Eventually(wait, "the second answer", `window.__answers.length === 2`)
	if got := browsertest.Eval[[]string](e.page, `window.__answers`); got[0] != "first false" || got[1] != "second true" {
		t.Fatalf("answers %q, want [first false, second true]", got)
	}
	e.page.Clean()
}

func TestPurgeAsksFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("jobs", nil)
	for range 4 {
		e.send("jobs", "j")
	}
	e.open("#/queues/jobs")
	e.page.Eventually(wait, "4 visible", `document.querySelector("#stat-visible").textContent === "4"`)

	e.page.Do(chromedp.Click(chromedp.CSS("#purge")))
	e.page.Eventually(wait, "the dialog opens", `document.querySelector("#confirm").open`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#confirm-title").textContent`); got != "Purge jobs?" {
		t.Errorf("dialog title %q", got)
	}
	e.page.Do(chromedp.Click(chromedp.CSS("#confirm-cancel")))
	e.page.Eventually(wait, "the dialog closes", `!document.querySelector("#confirm").open`)
	if s := e.stats("jobs"); s.Visible != 4 {
		t.Fatalf("after Cancel: %d visible, want 4 (nothing purged)", s.Visible)
	}

	e.page.Do(chromedp.Click(chromedp.CSS("#purge")))
	e.page.Eventually(wait, "the dialog opens again", `document.querySelector("#confirm").open`)
	e.confirm(t, "the queue is purged", func() bool { return e.stats("jobs").Visible == 0 })
	e.page.Eventually(wait, "the page shows 0", `document.querySelector("#stat-visible").textContent === "0"`)
	e.page.Clean()
}

func TestReplayButtonMovesADeadLetterBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createWithDLQ("payments")
	e.deadLetter("payments", `{"amount": 5}`, "unknown currency XYZ")
	e.deadLetter("payments", `{"amount": 6}`, "card declined")
	if s := e.stats("payments"); s.DeadLetters == nil || *s.DeadLetters != 2 || s.Visible != 0 {
		t.Fatalf("before: %+v", s)
	}
	e.open("#/queues/payments/dead-letters")
	e.page.Eventually(wait, "2 dead letters listed", `document.querySelectorAll("#dead-letter-rows tr").length === 2`)
	reasons := browsertest.Eval[[]string](e.page, `[...document.querySelectorAll("#dead-letter-rows td.reason")].map(td => td.textContent)`)
	if strings.Join(reasons, "|") != "unknown currency XYZ|card declined" {
		t.Errorf("failure reasons %q", reasons)
	}
	if got := browsertest.Eval[string](e.page, `document.querySelector("#dead-letter-rows tr td.num").textContent`); got != "1" {
		t.Errorf("receive count %q, want 1", got)
	}

	e.page.Do(chromedp.Click(chromedp.CSS(`#dead-letter-rows tr:first-child button[data-action="replay"]`)))
	testutil.Eventually(t, wait, "the dead letter is back in payments", func() bool {
		s := e.stats("payments")
		return s.Visible == 1 && s.DeadLetters != nil && *s.DeadLetters == 1
	})
	var got struct{ Messages []struct{ Body string } }
	e.call("GET", "/v1/queues/payments/messages", nil, &got)
	if len(got.Messages) != 1 || got.Messages[0].Body != `{"amount": 5}` {
		t.Errorf("payments holds %+v, want the replayed {\"amount\": 5}", got.Messages)
	}
	e.page.Eventually(wait, "the page shows one dead letter", `document.querySelector("#stat-deadletters").textContent === "1"`)

	// Replay all asks first.
	e.page.Do(chromedp.Click(chromedp.CSS("#replay-all")))
	e.page.Eventually(wait, "the dialog opens", `document.querySelector("#confirm").open`)
	e.page.Do(chromedp.Click(chromedp.CSS("#confirm-cancel")))
	if s := e.stats("payments"); *s.DeadLetters != 1 {
		t.Errorf("after Cancel: %d dead letters, want 1", *s.DeadLetters)
	}
	e.page.Clean()
}

func TestMessageContentIsText(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createWithDLQ("inbox")
	const evil = `<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"><b>bold</b>`
	e.deadLetter("inbox", "x", `<img src=y onerror="window.__xss = 3">`)
	e.send("inbox", evil)
	e.open("#/queues/inbox/messages")
	e.page.Eventually(wait, "the message is listed", `document.querySelectorAll("#message-rows tr").length === 1`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#message-rows .body").textContent`); got != evil {
		t.Errorf("body shown as %q, want the text %q", got, evil)
	}
	e.page.Do(chromedp.Click(chromedp.CSS("#tab-dead-letters")))
	e.page.Eventually(wait, "the dead letter is listed", `document.querySelectorAll("#dead-letter-rows tr").length === 1`)
	if n := browsertest.Eval[int](e.page, `document.querySelectorAll("main script, main img, main b").length`); n != 0 {
		t.Errorf("%d elements made from message content", n)
	}
	if x := browsertest.Eval[*int](e.page, `window.__xss`); x != nil {
		t.Errorf("message content ran as script: window.__xss = %d", *x)
	}
	e.page.Clean()
}

var screenshots = flag.Bool("screenshots", false, "write the dashboard's screenshots into docs/img")

// TestScreenshots regenerates docs/img/dashboard-*.png (go test ./dashboard
// -run Screenshots -screenshots).
func TestScreenshots(t *testing.T) {
	if !*screenshots {
		t.Skip("screenshots are regenerated only with -screenshots")
	}
	e := setup(t)
	e.createWithDLQ("orders")
	e.createWithDLQ("payments")
	e.createQueue("emails", nil)
	e.createQueue("thumbnails", map[string]string{"DelaySeconds": "30"})
	e.createQueue("reports.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	for i := range 40 {
		e.send("orders", fmt.Sprintf(`{"order": %d, "customer": %d, "total": "%d.50 EUR"}`, 1000+i, 7+i%5, 10+i))
	}
	for i := range 12 {
		e.send("emails", fmt.Sprintf(`{"to": "user%d@example.com", "template": "welcome"}`, i))
		e.send("thumbnails", fmt.Sprintf(`{"image": "photos/%d.jpg"}`, i))
	}
	for i := range 3 {
		e.call("POST", "/v1/queues/reports.fifo/messages", map[string]any{"body": fmt.Sprintf(`{"report": %d}`, i), "groupId": "monthly"}, nil)
	}
	// A backlog past the warning depth (1,000 by default).
	e.createQueue("search-index", nil)
	for i := range 120 {
		var batch []map[string]any
		for j := range 10 {
			batch = append(batch, map[string]any{"id": strconv.Itoa(j), "body": fmt.Sprintf(`{"doc": %d}`, i*10+j)})
		}
		e.call("POST", "/v1/queues/search-index/messages/batch", map[string]any{"messages": batch}, nil)
	}
	e.createQueue("webhooks", nil)
	e.createQueue("invoices", nil)
	e.send("invoices", `{"invoice": "2026-0042"}`)
	e.deadLetter("payments", `{"payment": 77, "currency": "XYZ"}`, "unknown currency XYZ")
	e.deadLetter("payments", `{"payment": 78, "card": "4000...0002"}`, "card declined by the issuer")
	e.deadLetter("orders", `{"order": 44}`, "order 44 has no customer")
	var got struct {
		Messages []struct{ Receipt string }
	}
	e.call("POST", "/v1/queues/orders/receive", map[string]any{"max": 5, "visibilitySeconds": 600}, &got)
	for _, m := range got.Messages[:2] {
		e.call("POST", "/v1/queues/orders/ack", map[string]any{"receipt": m.Receipt}, nil)
	}

	write := func(name string, buf []byte) {
		if err := os.WriteFile("../docs/img/"+name, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/img/%s (%d bytes)", name, len(buf))
	}
	if err := os.MkdirAll("../docs/img", 0o755); err != nil {
		t.Fatal(err)
	}
	e.deadLetter("payments", `{"payment": 79, "card": "4000...0069"}`, "card declined by the issuer")
	shoot := func(name string, width int64) {
		t.Helper()
		e.page.Do(chromedp.EmulateViewport(width, 900))
		// The charts are drawn in their own pixels: redraw at this width.
		browsertest.Eval[chromedp.Void](e.page, `page && page.drawCharts && page.drawCharts()`)
		shot, err := chromedp.Run(e.page.Ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		write(name, shot)
	}
	for _, w := range []struct {
		suffix string
		width  int64
	}{{"", 1400}, {"-800", 800}} {
		e.page.Do(chromedp.EmulateViewport(w.width, 900))
		e.open("")
		e.page.Eventually(wait, "the list", `document.querySelectorAll("#queue-rows tr").length === 10`)
		e.page.Eventually(wait, "sparklines", `document.querySelector('#queue-rows tr[data-queue="orders"] polyline').getAttribute("points").split(" ").length > 5`)
		shoot("dashboard-list"+w.suffix+".png", w.width)

		e.open("#/queues/orders")
		e.page.Eventually(wait, "the queue page", `document.querySelector("#stat-visible").textContent !== "—" && document.querySelectorAll("#settings dt").length > 5 && document.querySelectorAll("#flow .dot").length > 10`)
		e.page.Eventually(wait, "chart points", `(document.querySelector("#chart-depth polyline").getAttribute("points") || "").split(" ").length > 5`)
		shoot("dashboard-queue"+w.suffix+".png", w.width)

		e.open("#/queues/payments-dlq/dead-letters")
		e.page.Eventually(wait, "the dead letters", `document.querySelectorAll("#dead-letter-rows tr").length === 3 && document.querySelector("#dlq-of a") !== null`)
		e.page.Do(chromedp.Click(chromedp.CSS(`#dead-letter-groups .chip[data-reason="card declined by the issuer"]`)))
		e.page.Eventually(wait, "a reason chosen", `document.querySelector("#selection-info").textContent === "2 selected"`)
		shoot("dashboard-dead-letters"+w.suffix+".png", w.width)

		e.open("#/overview")
		e.page.Eventually(wait, "the overview", `document.querySelector("#ov-queues").textContent === "10" && document.querySelectorAll("#overview-store dt").length >= 5`)
		shoot("dashboard-overview"+w.suffix+".png", w.width)
	}
	var ids struct{ Messages []struct{ ID string } }
	e.call("GET", "/v1/queues/invoices/messages", nil, &ids)
	e.open("#/queues/invoices/messages/" + ids.Messages[0].ID)
	e.page.Eventually(wait, "the message and its status", `document.querySelector("#message-body") !== null && document.querySelector("#status-fields") !== null`)
	shoot("dashboard-message.png", 1400)
	e.page.Clean()
}

func TestDeleteQueueAsksFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("old", nil)
	e.send("old", "m")
	e.open("#/queues/old")
	e.page.Eventually(wait, "1 visible", `document.querySelector("#stat-visible").textContent === "1"`)
	exists := func() bool {
		resp, err := http.Get(e.url + "/v1/queues/old")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}

	e.page.Do(chromedp.Click(chromedp.CSS("#delete-queue")))
	e.page.Eventually(wait, "the dialog opens", `document.querySelector("#confirm").open`)
	e.page.Do(chromedp.Click(chromedp.CSS("#confirm-cancel")))
	e.page.Eventually(wait, "the dialog closes", `!document.querySelector("#confirm").open`)
	if !exists() {
		t.Fatal("the queue was deleted although the dialog was cancelled")
	}

	e.page.Do(chromedp.Click(chromedp.CSS("#delete-queue")))
	e.page.Eventually(wait, "the dialog opens again", `document.querySelector("#confirm").open`)
	e.confirm(t, "the queue is deleted", func() bool { return !exists() })
	e.page.Eventually(wait, "back on the list, without the queue", `location.hash === "#/" && document.querySelector("#summary").textContent.startsWith("0 queues")`)
	e.notReloaded()
	// Under parallel load, Chromium has twice (out of about ten runs)
	// logged a 404 of /v1/queues/old after the deletion, although the page
	// sent one DELETE and no other request for the queue in the runs
	// traced: the deleted queue's own 404 is allowed, nothing else.
	e.page.CleanExcept("404 (Not Found) (" + e.url + "/v1/queues/old:")
}

// TestListWorksWithoutStorage: a browser that blocks sessionStorage (it
// throws on access) still gets the queue list, and its filter works; the
// list's view is then not kept. The list page read and wrote the storage
// unguarded, so it threw in its constructor and showed nothing.
func TestListWorksWithoutStorage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("kept", nil)
	e.createQueue("other", nil)
	block := chromedp.Action[chromedp.Void](func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdpage.AddScriptToEvaluateOnNewDocument, cdpage.AddScriptToEvaluateOnNewDocumentParams{
			Source: `Object.defineProperty(window, "sessionStorage", { configurable: true, get() { throw new DOMException("storage is blocked", "SecurityError"); } });`,
		})
		return chromedp.Void{}, err
	})
	e.page.Do(block)
	e.open("")
	if browsertest.Eval[bool](e.page, `(() => { try { sessionStorage.length; return true; } catch (err) { return false; } })()`) {
		t.Fatal("sessionStorage is not blocked: the test checks nothing")
	}
	e.page.Eventually(wait, "the list", `document.querySelectorAll("#queue-rows tr").length === 2`)
	e.filter("kep")
	e.page.Eventually(wait, "the filtered list", `document.querySelectorAll("#queue-rows tr").length === 1 && document.querySelector('#queue-rows tr[data-queue="kept"]') !== null`)
	e.page.Clean()
}
