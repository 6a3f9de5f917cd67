package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/server"
)

// withDashboard turns the dashboard on, with the live sampler it reads.
func withDashboard(t *testing.T) func(*server.Config) {
	return func(c *server.Config) {
		lv, err := live.New(live.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		c.Live, c.Dashboard = lv, true
	}
}

// noRedirect answers redirects instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func getPage(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

func TestDashboardServed(t *testing.T) {
	t.Parallel()
	e := setup(t, withDashboard(t))

	resp, body := getPage(t, e.URL+"/ui/", browserAccept)
	if resp.StatusCode != 200 || !strings.Contains(body, "<title>Sluice dashboard</title>") {
		t.Fatalf("GET /ui/: %d %q", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("GET /ui/: Content-Security-Policy %q, want script-src 'self'", csp)
	}
	for path, ctype := range map[string]string{"/ui/app.js": "javascript", "/ui/app.css": "text/css"} {
		resp, body := getPage(t, e.URL+path, "")
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), ctype) || len(body) < 100 {
			t.Errorf("GET %s: %d %s, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	if resp, _ := getPage(t, e.URL+"/ui/nope.js", ""); resp.StatusCode != 404 {
		t.Errorf("GET /ui/nope.js: %d, want 404", resp.StatusCode)
	}
	if resp, _ := getPage(t, e.URL+"/ui", browserAccept); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d Location %q, want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A browser opening the root is sent to the dashboard.
	if resp, _ := getPage(t, e.URL+"/", browserAccept); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("browser GET /: %d Location %q, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	// SQS requests to / still reach the SQS API: query protocol by GET
	// (even asking for HTML), and JSON protocol by POST.
	e.queue("dash-q")
	resp, body = getPage(t, e.URL+"/?Action=ListQueues", browserAccept)
	if resp.StatusCode != 200 || !strings.Contains(body, "dash-q") {
		t.Errorf("GET /?Action=ListQueues: %d %q", resp.StatusCode, body)
	}
	status, body, _ := e.call(nil, "ListQueues", `{}`)
	if status != 200 || !strings.Contains(body, "dash-q") {
		t.Errorf("JSON ListQueues: %d %q", status, body)
	}
	// Without Accept text/html, GET / is the SQS API's (an error in its shape).
	if resp, _ := getPage(t, e.URL+"/", ""); resp.StatusCode == http.StatusFound {
		t.Errorf("GET / without Accept text/html was redirected")
	}
}

func TestDashboardOff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if resp, _ := getPage(t, e.URL+"/", browserAccept); resp.StatusCode == http.StatusFound {
		t.Errorf("GET / redirected with Dashboard off")
	}
	if resp, body := getPage(t, e.URL+"/ui/", browserAccept); resp.StatusCode == 200 && strings.Contains(body, "Sluice dashboard") {
		t.Errorf("GET /ui/ served the dashboard with Dashboard off")
	}
}

func TestDashboardAccountUI(t *testing.T) {
	t.Parallel()
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	front, err := broker.New(backend, broker.Config{AccountID: "ui"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	withDashboard(t)(&cfg)
	if _, err := server.New(cfg, front); err == nil || !strings.Contains(err.Error(), "AccountID") {
		t.Errorf("AccountID ui with the dashboard on: %v, want an AccountID error", err)
	}
	cfg.Dashboard = false
	if _, err := server.New(cfg, front); err != nil {
		t.Errorf("AccountID ui with the dashboard off: %v", err)
	}
}
