package dashboard_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/browsertest"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/server"
)

// TestBrowserCannotBeDrivenCrossSite opens, in a real Chromium, a page of
// another site (http://localhost:<port>, while the broker is
// http://127.0.0.1:<port>) that tries what any site could: an <img> whose
// URL is a query-protocol PurgeQueue, a form that posts a DeleteQueue and
// submits itself, and fetches of the native API's purge. The browser sends
// each request (the broker logs each refusal), and the queue keeps its
// message and exists.
func TestBrowserCannotBeDrivenCrossSite(t *testing.T) {
	var logs testutil.Buffer
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testutil.Writer(t, "")), &slog.HandlerOptions{Level: slog.LevelWarn}))
	lv, err := live.New(live.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b := testbroker.Start(t, testbroker.Config{
		Logger:   log,
		Observer: lv,
		Server:   func(c *server.Config) { c.Live, c.Dashboard = lv, true },
	})
	page := browsertest.Open(t, wait*4)
	e := &env{t: t, url: b.URL, page: page}
	e.createQueue("victim", nil)
	e.send("victim", "keep me")

	qurl := b.URL + "/000000000000/victim"
	attack := `<!doctype html><title>evil</title>
<img src="` + b.URL + `/?Action=PurgeQueue&amp;QueueUrl=` + url.QueryEscape(qurl) + `">
<iframe name="sink"></iframe>
<form id="f" method="POST" action="` + b.URL + `/" target="sink">
<input name="Action" value="DeleteQueue"><input name="QueueUrl" value="` + qurl + `">
</form>
<script>
document.getElementById("f").submit();
window.fetched = [];
for (const mode of ["no-cors", "cors"]) {
  fetch("` + b.URL + `/v1/queues/victim/purge", {method: "POST", mode: mode, credentials: "include"})
    .then(() => window.fetched.push(mode + " answered"), (e) => window.fetched.push(mode + " failed"));
}
</script>`
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, attack)
	})}
	go func() { _ = evil.Serve(ln) }()
	t.Cleanup(func() { _ = evil.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	page.Do(chromedp.Navigate(fmt.Sprintf("http://localhost:%s/", port)))
	page.Eventually(wait, "both fetches settled", `window.fetched && window.fetched.length === 2`)
	// The <img>'s GET, the form's POST and the two fetches' POSTs (a
	// cors-mode POST without custom headers needs no preflight).
	testutil.Eventually(t, wait, "the broker refused the four requests", func() bool {
		return strings.Count(logs.String(), "refused by the browser guard") >= 4
	})
	for _, reason := range []string{`reason="cross-site request"`} {
		if !strings.Contains(logs.String(), reason) {
			t.Errorf("no refusal with %s in the log:\n%s", reason, logs.String())
		}
	}
	if s := e.stats("victim"); s.Visible != 1 {
		t.Fatalf("after the attack: %d visible messages in victim, want 1", s.Visible)
	}
}
