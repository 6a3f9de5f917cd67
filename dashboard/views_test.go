package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/browsertest"
)

// TestRateChartAndSettings: the rate chart draws five series (sent,
// received, deleted, nacked, dead-lettered) in five different colours and
// the page's sans-serif, with five value ticks and hover values; the
// settings show human units with the raw value on hover.
func TestRateChartAndSettings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("jobs", map[string]string{"MessageRetentionPeriod": "345600", "MaximumMessageSize": "262144"})
	e.send("jobs", "x")
	e.open("#/queues/jobs")
	e.page.Eventually(wait, "rate chart points", `document.querySelectorAll("#chart-rates polyline").length === 5 && (document.querySelector("#chart-rates polyline").getAttribute("points") || "").split(" ").length > 2`)
	colours := browsertest.Eval[[]string](e.page, `[...document.querySelectorAll("#chart-rates polyline")].map(p => getComputedStyle(p).stroke)`)
	seen := map[string]bool{}
	for _, c := range colours {
		seen[c] = true
	}
	if len(seen) != 5 {
		t.Errorf("rate series colours %q: want 5 different ones", colours)
	}
	font := browsertest.Eval[string](e.page, `getComputedStyle(document.querySelector("#chart-rates text")).fontFamily`)
	if !strings.Contains(font, "sans-serif") {
		t.Errorf("chart font %q, want the page's sans-serif", font)
	}
	if n := browsertest.Eval[int](e.page, `document.querySelectorAll("#chart-rates line.grid, #chart-rates line.axis").length`); n < 5 {
		t.Errorf("%d ticks on the rate chart, want at least 5", n)
	}
	tip := browsertest.Eval[string](e.page, `(document.querySelector("#chart-rates").showPoint(-1), document.querySelector("#chart-rates").dataset.tip)`)
	for _, want := range []string{"sent ", "received ", "deleted ", "nacked ", "dead-lettered "} {
		if !strings.Contains(tip, want) {
			t.Errorf("hover values %q lack %q", tip, want)
		}
	}
	e.page.Eventually(wait, "settings", `[...document.querySelectorAll("#settings dt")].some(dt => dt.textContent === "MessageRetentionPeriod")`)
	got := browsertest.Eval[[]string](e.page, `[...document.querySelectorAll("#settings dt")].filter(dt => dt.textContent === "MessageRetentionPeriod" || dt.textContent === "MaximumMessageSize").map(dt => dt.textContent + "=" + dt.nextElementSibling.textContent + "@" + dt.nextElementSibling.title)`)
	if strings.Join(got, ",") != "MaximumMessageSize=256 KiB@MaximumMessageSize 262144,MessageRetentionPeriod=4 d@MessageRetentionPeriod 345600" {
		t.Errorf("settings %q", got)
	}
	e.page.Clean()
}

// TestMessagesTabIsLive: a message sent and then leased while the Messages
// tab is open shows without a click, with its state and when its lease
// ends, relative to now.
func TestMessagesTabIsLive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("work", nil)
	e.open("#/queues/work/messages")
	e.page.Eventually(wait, "the messages tab", `document.querySelector("#message-rows") !== null`)
	id := e.send("work", "hello")
	e.page.Eventually(wait, "the message listed without a click", `document.querySelector('#message-rows tr[data-id="`+id+`"]') !== null`)
	e.call("POST", "/v1/queues/work/receive", map[string]any{"max": 1, "visibilitySeconds": 600}, nil)
	e.page.Eventually(wait, "in flight, its lease's end relative", `/^in flightlease ends in (9 min 5\d s|10 min)$/.test((document.querySelector('#message-rows tr[data-id="`+id+`"] td.state') || {}).textContent)`)
	e.notReloaded()
	e.page.Clean()
}

// TestNarrowWindow: at 800 pixels the list and a queue's page fit the
// window (tables scroll in their own box), a queue name does not break
// mid-word and a card's value keeps one line.
func TestNarrowWindow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.page.Do(chromedp.EmulateViewport(800, 900))
	e.createWithDLQ("customer-notifications")
	e.send("customer-notifications", strings.Repeat("a-long-body ", 40))
	e.open("")
	e.page.Eventually(wait, "the list", `document.querySelectorAll("#queue-rows tr").length === 2`)
	if w := browsertest.Eval[int](e.page, `document.documentElement.scrollWidth`); w > 800 {
		t.Errorf("the list is %d px wide in an 800 px window", w)
	}
	// Each line of a name's link ends at a separator or at its end: a
	// range over one character per line shows where it wrapped.
	broken := browsertest.Eval[bool](e.page, `(() => {
		const a = document.querySelector('#queue-rows tr[data-queue="customer-notifications"] a.qname');
		const text = a.firstChild, r = document.createRange();
		let top = null;
		for (let i = 0; i < text.length; i++) {
			r.setStart(text, i); r.setEnd(text, i + 1);
			const y = r.getBoundingClientRect().top;
			if (top !== null && y > top + 2 && text.data[i - 1] !== "-") return true;
			top = y;
		}
		return false;
	})()`)
	if broken {
		t.Error("a queue name broke mid-word")
	}
	e.open("#/queues/customer-notifications/messages")
	e.page.Eventually(wait, "the message", `document.querySelectorAll("#message-rows tr").length === 1 && document.querySelector("#stat-visible").textContent === "1"`)
	if w := browsertest.Eval[int](e.page, `document.documentElement.scrollWidth`); w > 800 {
		t.Errorf("the queue page is %d px wide in an 800 px window", w)
	}
	if n := browsertest.Eval[int](e.page, `[...document.querySelectorAll(".card .value")].filter(v => v.getClientRects().length > 1 || v.offsetHeight > 40).length`); n != 0 {
		t.Errorf("%d card values wrap", n)
	}
	e.page.Clean()
}

// TestFlowShowsLeaseExpiryAndRedelivery: on a queue's page the flow puts a
// leased message in the In flight lane; when its 4 s lease ends (the flow reads every 2 s) without a
// delete it is back in Ready with the expiry listed, and a second receive
// marks it redelivered.
func TestFlowShowsLeaseExpiryAndRedelivery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("reports", nil)
	id := e.send("reports", "slow report")
	e.open("#/queues/reports")
	e.page.Eventually(wait, "ready", `document.querySelectorAll("#flow-visible .dot").length === 1`)
	e.call("POST", "/v1/queues/reports/receive", map[string]any{"max": 1, "visibilitySeconds": 4}, nil)
	e.page.Eventually(wait, "in flight", `document.querySelectorAll("#flow-inflight .dot").length === 1`)
	e.page.Eventually(wait, "the lease's end listed", `document.querySelectorAll("#flow-visible .dot").length === 1 && [...document.querySelectorAll("#flow-events li.expired")].some(li => li.textContent.includes("`+id+`"))`)
	e.call("POST", "/v1/queues/reports/receive", map[string]any{"max": 1, "visibilitySeconds": 60}, nil)
	e.page.Eventually(wait, "redelivered", `document.querySelector("#flow-inflight .dot.redelivered") !== null && [...document.querySelectorAll("#flow-events li.redelivered")].some(li => li.textContent.includes("receive 2"))`)
	e.page.Clean()
}

// TestWorkersListsReceivers: a worker that receives over HTTP is listed
// among the queue's recent receivers with its address, User-Agent and the
// messages it got.
func TestWorkersListsReceivers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("jobs", nil)
	e.send("jobs", "a")
	e.send("jobs", "b")
	e.open("#/queues/jobs")
	e.page.Eventually(wait, "no receiver yet", `!document.querySelector("#receivers-empty").hidden`)
	e.call("POST", "/v1/queues/jobs/receive", map[string]any{"max": 2, "visibilitySeconds": 60}, nil)
	e.page.Eventually(wait, "the receiver listed", `document.querySelectorAll("#receiver-rows tr").length === 1`)
	row := browsertest.Eval[[]string](e.page, `[...document.querySelectorAll("#receiver-rows tr td")].map(td => td.textContent)`)
	if len(row) != 7 || row[0] != "(unsigned)" || !strings.HasPrefix(row[1], "127.0.0.1:") || !strings.HasPrefix(row[2], "Go-http-client") || row[3] != "1" || row[4] != "2" {
		t.Errorf("receiver row %q", row)
	}
	e.page.Clean()
}
