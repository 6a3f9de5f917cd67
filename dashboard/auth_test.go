package dashboard_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/internal/browsertest"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/server"
)

// keyedBroker starts a broker with the dashboard and one read-only key,
// viewer:viewer-secret, and a queue "guarded".
func keyedBroker(t *testing.T) *testbroker.Broker {
	t.Helper()
	// The key is of the broker's own account (the default --account-id):
	// the live statistics the dashboard reads are that account's only.
	keys, err := auth.NewKeys([]auth.Key{{AccessKeyID: "viewer", SecretAccessKey: "viewer-secret", Account: broker.DefaultAccountID, Allow: []string{"read-only"}}})
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
	return b
}

// TestDashboardAsksForAKey: on a broker with keys the dashboard asks for
// one, refuses a wrong one, and with the right one shows the queues (by
// polling: an EventSource cannot send the key).
func TestDashboardAsksForAKey(t *testing.T) {
	t.Parallel()
	b := keyedBroker(t)
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

// TestALate401KeepsTheGivenKey: a request sent before the user gave a key
// and answered 401 after (the page polls every 2 s while the key dialog is
// open) must not take the new key back. It did: the page then reloaded
// without a key and asked again, with no word of why (a CI failure of
// TestDashboardAsksForAKey under load). The race is played in the page, in
// that order: a request without a key, the key given, the 401. (The other
// guard, nothing asks while the page reloads with a given key, is not
// played here: the reload ends the page that would be observed.)
func TestALate401KeepsTheGivenKey(t *testing.T) {
	t.Parallel()
	b := keyedBroker(t)
	page := browsertest.Open(t, 5*time.Minute)
	page.Do(chromedp.Navigate(b.URL + "/ui/"))
	page.Eventually(wait, "the key dialog opens", `document.querySelector("#login").open`)
	got, err := chromedp.Run(page.Ctx, chromedp.Evaluate[string](`(async () => {
		page.close(); // the list page stops polling
		const dlg = document.querySelector("#login");
		dlg.close(); // its fields are empty: closing it gives no key
		await new Promise((r) => setTimeout(r, 0)); // its close event may run now or later: it gives no key either way
		const late = authFetch("/v1/queues", { headers: {} }); // sent without a key
		sessionStorage.setItem("sluice_key", "viewer:viewer-secret"); // what the dialog does
		const res = await late;
		return res.status + " " + sessionStorage.getItem("sluice_key");
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got != "401 viewer:viewer-secret" {
		t.Fatalf("after a late 401: status and stored key %q, want \"401 viewer:viewer-secret\"", got)
	}
	// The page works with the key kept.
	page.Do(chromedp.Reload())
	page.Eventually(wait, "the queue shows", `document.querySelector('#queue-rows tr[data-queue="guarded"]') !== null`)
	page.CleanExcept("401", "Unauthorized", "/v1/")
}
