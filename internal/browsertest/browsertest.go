// Package browsertest drives a headless Chromium from Go tests (chromedp):
// it finds the browser, starts one per test binary, opens a tab per test and
// records what the page reports as wrong (console errors and warnings,
// uncaught exceptions, failed loads and Content-Security-Policy violations
// from the browser's log), so that a test can assert a page ran cleanly.
//
// Without Chromium a test skips with the reason, unless SLUICE_REQUIRE
// names "chromium" (then it fails). Debian's package is chromium
// (/usr/bin/chromium); SLUICE_CHROMIUM names another binary. As root,
// Chromium runs without its sandbox (chromedp.NoSandbox), which it refuses
// to start with otherwise.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicemq/sluice/internal/testutil"
)

// Find answers the Chromium binary: $SLUICE_CHROMIUM, else the first of
// chromium, chromium-browser, google-chrome on PATH or in /usr/bin. "" when
// there is none.
func Find() string {
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if _, err := os.Stat("/usr/bin/" + name); err == nil {
			return "/usr/bin/" + name
		}
	}
	return ""
}

// browser is the test binary's one Chromium, started by the first Open and
// ended by Close. Tabs share it; each tab is its own target, so parallel
// tests do not see each other's pages (they do share cookies and storage
// of the same origin; each test's broker has its own port, so its own origin).
var browser struct {
	mu     sync.Mutex
	ctx    context.Context // the browser's context: cancelling it ends Chromium
	cancel func()
	err    error
}

func start(path string) (context.Context, error) {
	browser.mu.Lock()
	defer browser.mu.Unlock()
	if browser.ctx != nil || browser.err != nil {
		return browser.ctx, browser.err
	}
	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	// The first Do starts the browser, which lives as long as the context
	// that Do was given: bctx, not one with a deadline.
	if err := chromedp.Do(bctx); err != nil {
		bcancel()
		acancel()
		browser.err = fmt.Errorf("starting %s: %w", path, err)
		return nil, browser.err
	}
	browser.ctx = bctx
	browser.cancel = func() { bcancel(); acancel() }
	return bctx, nil
}

// Close ends the shared browser, if one was started. Call it from TestMain
// after m.Run.
func Close() {
	browser.mu.Lock()
	defer browser.mu.Unlock()
	if browser.cancel != nil {
		browser.cancel()
		browser.cancel, browser.ctx = nil, nil
	}
}

// Page is one browser tab for one test.
type Page struct {
	// Ctx runs chromedp actions in this tab (chromedp.Run(p.Ctx, ...)).
	Ctx context.Context
	t   testing.TB

	mu       sync.Mutex
	problems []string
}

// Open opens a tab for t, closed when t ends. Every action run in it must
// end within timeout. It skips t (or fails it, see the package comment)
// when there is no Chromium.
func Open(t testing.TB, timeout time.Duration) *Page {
	t.Helper()
	path := Find()
	if path == "" {
		testutil.Missing(t, "chromium", "no Chromium found (chromium, chromium-browser, google-chrome, or $SLUICE_CHROMIUM): install Debian's chromium (apt-get install -y chromium) to run the dashboard's browser tests")
	}
	bctx, err := start(path)
	if err != nil {
		testutil.Missing(t, "chromium", "Chromium did not start: "+err.Error())
	}
	tctx, cancelTab := chromedp.NewContext(bctx)
	ctx, cancel := context.WithTimeout(tctx, timeout)
	p := &Page{Ctx: ctx, t: t}
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		cancel()
		cancelTab()
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	// Console subscribes when it returns: every message from here on is
	// read, until the tab's context ends.
	msgs := chromedp.Console(tctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				where := m.URL
				if where != "" {
					where = fmt.Sprintf(" (%s:%d)", m.URL, m.Line+1)
				}
				p.problem(fmt.Sprintf("%s%s: %s%s", m.Type, sourceOf(m.Source), m.Text, where))
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelTab()
		<-done
	})
	return p
}

func sourceOf(s string) string {
	if s == "" {
		return ""
	}
	return " [" + s + "]"
}

func (p *Page) problem(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, s)
}

// Problems answers what the page reported as wrong so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Clean fails the test for every problem the page reported.
func (p *Page) Clean() {
	p.t.Helper()
	for _, s := range p.Problems() {
		p.t.Errorf("browser: %s", s)
	}
}

// CleanExcept is Clean, but passes over the problems that contain one of
// allowed.
func (p *Page) CleanExcept(allowed ...string) {
	p.t.Helper()
next:
	for _, s := range p.Problems() {
		for _, a := range allowed {
			if strings.Contains(s, a) {
				p.t.Logf("browser (allowed): %s", s)
				continue next
			}
		}
		p.t.Errorf("browser: %s", s)
	}
}

// Do runs chromedp actions in the tab and fails the test on an error.
func (p *Page) Do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.Ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v (page problems: %q)", err, p.Problems())
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](p *Page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("browser: evaluating %s: %v (page problems: %q)", expr, err, p.Problems())
	}
	return v
}

// Eventually polls a JavaScript expression until it is true, up to
// timeout; it fails the test with what and the expression otherwise.
func (p *Page) Eventually(timeout time.Duration, what, expr string) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(p.Ctx, chromedp.Evaluate[bool]("Boolean("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("browser: %s: not true within %v: %s (last error %v; page problems %q)", what, timeout, expr, err, p.Problems())
		}
		time.Sleep(50 * time.Millisecond) // the polling interval, not a wait for the condition
	}
}
