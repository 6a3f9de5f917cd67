package dashboard_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/internal/browsertest"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/server"
)

// TestDashboardAsksForAKey: on a broker with keys the dashboard asks for
// one, refuses a wrong one, and with the right one shows the queues (by
// polling: an EventSource cannot send the key).
func TestDashboardAsksForAKey(t *testing.T) {
	t.Parallel()
	// The key is of the broker's own account (the default --account-id):
	// the live statistics the dashboard reads are that account's only.
	keys, err := auth.NewKeys([]auth.Key{{AccessKeyID: "viewer", SecretAccessKey: "viewer-secret", Account: apicommon.DefaultAccountID, Allow: []string{"read-only"}}})
	if err != nil {
		t.Fatal(err)
	}
	lcfg := live.DefaultConfig()
	lcfg.Interval = 200 * time.Millisecond
	lv, err := live.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	b := testbroker.Start(t, testbroker.Config{
		Observer: lv,
		Server:   func(c *server.Config) { c.Live, c.Dashboard, c.Keys = lv, true, keys },
	})
	if _, err := b.Front.CreateQueue(t.Context(), "guarded", nil, nil); err != nil {
		t.Fatal(err)
	}
	page := browsertest.Open(t, 5*time.Minute)

	// The static files are open; the data is not.
	resp, err := http.Get(b.URL + "/v1/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/queues without a key: %d", resp.StatusCode)
	}

	signIn := func(id, secret string) {
		page.Eventually(wait, "the key dialog opens", `document.querySelector("#login").open`)
		browsertest.Eval[chromedp.Void](page, `document.querySelector("#login-id").value = ""; document.querySelector("#login-secret").value = ""`)
		page.Do(chromedp.SendKeys(chromedp.CSS("#login-id"), id), chromedp.SendKeys(chromedp.CSS("#login-secret"), secret), chromedp.Click(chromedp.CSS("#login-ok")))
	}
	page.Do(chromedp.Navigate(b.URL + "/ui/"))
	signIn("viewer", "wrong-secret")
	page.Eventually(wait, "a wrong key is refused", `document.querySelector("#login").open && document.querySelector("#login-error").textContent.includes("refused")`)
	signIn("viewer", "viewer-secret")
	page.Eventually(wait, "the queue shows", `document.querySelector('#queue-rows tr[data-queue="guarded"]') !== null`)
	if browsertest.Eval[bool](page, `document.querySelector("#login").open`) {
		t.Fatal("the key dialog is still open")
	}
	if got := browsertest.Eval[string](page, `sessionStorage.getItem("sluice_key")`); got != "viewer:viewer-secret" {
		t.Fatalf("stored key %q", got)
	}
	// The 401s before the key are the page's expected failed loads.
	page.CleanExcept("401", "Unauthorized", "/v1/")
}
