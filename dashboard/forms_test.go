package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/browsertest"
)

// TestCreateAndEditQueue: the New queue form shows the API's own error for
// a wrong value, creates the queue once it is right and opens its page;
// Edit settings changes a setting and gives the queue a dead-letter queue
// (checked through the API).
func TestCreateAndEditQueue(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.createQueue("invoices-dlq", nil)
	// The API's answer to the same wrong value.
	body, _ := json.Marshal(map[string]any{"name": "invoices", "attributes": map[string]string{"VisibilityTimeout": "99999"}})
	resp, err := http.Post(e.url+"/v1/queues", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr struct{ Message string }
	_ = json.NewDecoder(resp.Body).Decode(&apiErr)
	resp.Body.Close()
	if resp.StatusCode != 400 || apiErr.Message == "" {
		t.Fatalf("the API took VisibilityTimeout 99999: %d", resp.StatusCode)
	}

	e.open("")
	e.page.Do(chromedp.Click(chromedp.CSS("#new-queue")))
	e.page.Eventually(wait, "the form", `document.querySelector("#qf-name") !== null`)
	e.page.Do(chromedp.SendKeys(chromedp.CSS("#qf-name"), "invoices"), chromedp.SendKeys(chromedp.CSS("#qf-VisibilityTimeout"), "99999"))
	e.page.Do(chromedp.Click(chromedp.CSS("#create-ok")))
	e.page.Eventually(wait, "the API's error", `document.querySelector("#create-error").textContent !== ""`)
	if got := browsertest.Eval[string](e.page, `document.querySelector("#create-error").textContent`); got != apiErr.Message {
		t.Errorf("form error %q, want the API's %q", got, apiErr.Message)
	}
	browsertest.Eval[chromedp.Void](e.page, `document.querySelector("#qf-VisibilityTimeout").value = ""`)
	e.page.Do(chromedp.SendKeys(chromedp.CSS("#qf-VisibilityTimeout"), "90"))
	e.page.Do(chromedp.Click(chromedp.CSS("#create-ok")))
	e.page.Eventually(wait, "the new queue's page", `location.hash === "#/queues/invoices" && document.querySelectorAll("#settings dt").length > 5`)
	var q struct{ Attributes map[string]string }
	e.call("GET", "/v1/queues/invoices", nil, &q)
	if q.Attributes["VisibilityTimeout"] != "90" {
		t.Errorf("VisibilityTimeout %q, want 90", q.Attributes["VisibilityTimeout"])
	}

	e.page.Do(chromedp.Click(chromedp.CSS("#edit-settings")))
	e.page.Eventually(wait, "the edit form", `document.querySelector("#edit-queue:not([hidden]) #qf-MessageRetentionPeriod") !== null`)
	browsertest.Eval[chromedp.Void](e.page, `document.querySelector("#qf-MessageRetentionPeriod").value = ""`)
	e.page.Do(chromedp.SendKeys(chromedp.CSS("#qf-MessageRetentionPeriod"), "86400"),
		chromedp.SendKeys(chromedp.CSS("#qf-dlq"), "invoices-dlq"), chromedp.SendKeys(chromedp.CSS("#qf-max-receives"), "3"))
	e.page.Do(chromedp.Click(chromedp.CSS("#edit-save")))
	e.page.Eventually(wait, "the settings saved", `document.querySelector("#edit-queue").hidden && [...document.querySelectorAll("#settings dt")].some(dt => dt.textContent === "MessageRetentionPeriod" && dt.nextElementSibling.textContent === "1 d")`)
	e.call("GET", "/v1/queues/invoices", nil, &q)
	if q.Attributes["MessageRetentionPeriod"] != "86400" || q.Attributes["VisibilityTimeout"] != "90" {
		t.Errorf("attributes %v after the edit", q.Attributes)
	}
	var rp struct{ MaxReceiveCount int }
	if err := json.Unmarshal([]byte(q.Attributes["RedrivePolicy"]), &rp); err != nil || rp.MaxReceiveCount != 3 {
		t.Errorf("RedrivePolicy %q, want maxReceiveCount 3", q.Attributes["RedrivePolicy"])
	}
	e.notReloaded()
	// The refused create is the one failed load: the browser logs it.
	e.page.CleanExcept("status of 400 (Bad Request) (" + e.url + "/v1/queues:")
}
