package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/browsertest"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestDeadLetterQueuePage: a dead-letter queue's page names its source
// queue with a link, is judged by its count (Warning with 3 letters, not by
// age), lists its letters with their source, groups them by failure reason,
// replays a reason's letters to their source and deletes the selection
// after asking.
func TestDeadLetterQueuePage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createWithDLQ("orders")
	e.deadLetter("orders", `{"order": 1}`, "card declined")
	e.deadLetter("orders", `{"order": 2}`, "card declined")
	e.deadLetter("orders", `{"order": 3}`, "no such customer")

	e.open("#/queues/orders-dlq")
	e.page.Eventually(wait, "the page names its source queue", `(document.querySelector("#dlq-of:not([hidden]) a.qname") || {}).textContent === "orders"`)
	if href := browsertest.Eval[string](e.page, `document.querySelector("#dlq-of a.qname").getAttribute("href")`); href != "#/queues/orders" {
		t.Errorf("source link %q, want #/queues/orders", href)
	}
	e.page.Eventually(wait, "health by count", `document.querySelector("#health").textContent === "Warning" && document.querySelector("#health-reasons").textContent.includes("3")`)

	e.page.Do(chromedp.Click(chromedp.CSS("#dlq-review")))
	e.page.Eventually(wait, "3 letters listed", `document.querySelectorAll("#dead-letter-rows tr").length === 3`)
	from := browsertest.Eval[[]string](e.page, `[...document.querySelectorAll("#dead-letter-rows td.from")].map(td => td.textContent)`)
	if strings.Join(from, ",") != "orders,orders,orders" {
		t.Errorf("sources %q, want orders for each", from)
	}
	groups := browsertest.Eval[[]string](e.page, `[...document.querySelectorAll("#dead-letter-groups .chip")].map(b => b.textContent)`)
	if strings.Join(groups, "|") != "All 3|card declined 2|no such customer 1" {
		t.Errorf("groups %q", groups)
	}

	// A reason's button shows and selects its letters only.
	e.page.Do(chromedp.Click(chromedp.CSS(`#dead-letter-groups .chip[data-reason="card declined"]`)))
	e.page.Eventually(wait, "2 selected", `document.querySelector("#selection-info").textContent === "2 selected" && document.querySelectorAll("#dead-letter-rows tr:not([hidden])").length === 2`)
	e.page.Do(chromedp.Click(chromedp.CSS("#replay-selected")))
	testutil.Eventually(t, wait, "the two letters are back in orders", func() bool {
		s := e.stats("orders")
		return s.Visible == 2 && s.DeadLetters != nil && *s.DeadLetters == 1
	})
	var got struct{ Messages []struct{ Body string } }
	e.call("GET", "/v1/queues/orders/messages", nil, &got)
	if len(got.Messages) != 2 || got.Messages[0].Body != `{"order": 1}` || got.Messages[1].Body != `{"order": 2}` {
		t.Errorf("orders holds %+v, want orders 1 and 2", got.Messages)
	}

	// The list follows live; select all and delete asks first.
	e.page.Eventually(wait, "one letter left", `document.querySelectorAll("#dead-letter-rows tr").length === 1`)
	e.page.Do(chromedp.Click(chromedp.CSS("#dead-letters-select-all")))
	e.page.Eventually(wait, "1 selected", `document.querySelector("#selection-info").textContent === "1 selected"`)
	e.page.Do(chromedp.Click(chromedp.CSS("#delete-selected")))
	e.page.Eventually(wait, "the dialog opens", `document.querySelector("#confirm").open`)
	e.confirm(t, "the dead-letter queue empty", func() bool { return e.stats("orders-dlq").Visible == 0 })
	e.notReloaded()
	e.page.Clean()
}

// TestSourceQueueDeadLettersBulk: on a source queue's Dead letters tab,
// select all and Replay selected moves every listed letter back; the
// replay shows in the replays table with its rate.
func TestSourceQueueDeadLettersBulk(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createWithDLQ("mail")
	e.deadLetter("mail", "a", "smtp 550")
	e.deadLetter("mail", "b", "smtp 550")
	e.open("#/queues/mail/dead-letters")
	e.page.Eventually(wait, "2 letters", `document.querySelectorAll("#dead-letter-rows tr").length === 2`)
	if n := browsertest.Eval[int](e.page, `document.querySelectorAll("#dead-letter-rows td.from").length`); n != 0 {
		t.Errorf("a source queue's tab shows a From column (%d cells)", n)
	}
	e.page.Do(chromedp.SetValue(chromedp.CSS("#replay-rate"), "7"))
	e.page.Do(chromedp.Click(chromedp.CSS("#dead-letters-select-all")))
	e.page.Do(chromedp.Click(chromedp.CSS("#replay-selected")))
	testutil.Eventually(t, wait, "both letters back in mail", func() bool {
		s := e.stats("mail")
		return s.Visible == 2 && s.DeadLetters != nil && *s.DeadLetters == 0
	})
	e.page.Eventually(wait, "the replay listed with its rate", `[...document.querySelectorAll("#replay-rows td")].some(td => td.textContent === "7/s")`)
	e.page.Clean()
}
