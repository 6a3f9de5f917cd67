package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/browsertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	browsertest.Close()
	os.Exit(code)
}

// TestProblemsRecorded checks that what a page reports as wrong reaches
// Problems: a console.error, an uncaught exception and a failed load.
func TestProblemsRecorded(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>t</title><script>console.error("bad thing"); setTimeout(() => { null.boom }, 0); fetch("/missing")</script><p id=ok>ok</p>`))
	}))
	// After the tab closes (cleanups run last first). Chromium may keep a
	// connection it opened ahead of need, which Close would wait for.
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	p := browsertest.Open(t, time.Minute)
	p.Do(chromedp.Navigate(ts.URL))
	want := []string{"bad thing", "boom", "404"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := strings.Join(p.Problems(), "\n")
		missing := ""
		for _, w := range want {
			if !strings.Contains(all, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("problem %q not recorded; got %q", missing, p.Problems())
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	if got := browsertest.Eval[string](p, `document.querySelector("#ok").textContent`); got != "ok" {
		t.Errorf("Eval: %q", got)
	}
}
