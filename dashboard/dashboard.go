// Package dashboard serves Sluice's live dashboard: static HTML, CSS and
// JavaScript embedded in the binary (no build step, nothing fetched from
// outside it), mounted by package server at /ui/ when server.Config.Dashboard
// is true.
//
// The pages are a client of the native API and nothing else: the queue list
// reads GET /v1/stats and follows GET /v1/events (server-sent events), the
// queue page reads the queue (GET /v1/queues/{queue}), its history
// (GET /v1/queues/{queue}/history), its consumer streams (GET
// /v1/queues/{queue}/consumers, again with each live update), its messages and dead letters (browse:
// nothing is received), and its buttons call the same routes a program would
// (pause, resume, purge, delete, send, replay, create and edit a queue,
// pause and resume a schedule). The overview page reads GET /v1/overview
// beside the live statistics, a message's page browses for it (and reads its
// status where the broker serves one), the schedules page GET
// /v1/schedules. When the event stream is not available the pages poll once
// every 2 s instead.
//
// Every string that comes from the broker (queue names, message bodies,
// attributes, failure reasons) is put into the page as text, never as
// HTML, and the handler sends a Content-Security-Policy that allows only the
// embedded scripts: a message body holding <script> shows as text.
//
// The pages carry a CSRF token to their state-changing calls (csrf.go);
// package server refuses a browser's call without it.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var files embed.FS

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// csp allows the embedded files only: no inline script, no inline style
// attribute, no other origin. connect-src 'self' covers the API and the
// event stream.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the dashboard's files for the paths under Prefix (GET and
// HEAD), and redirects Prefix without its slash to Prefix.
func Handler() http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard answers GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change only with the binary: revalidate, so that an
		// upgraded broker is never shown with an old script.
		h.Set("Cache-Control", "no-cache")
		setCSRFCookie(w, r)
		files.ServeHTTP(w, r)
	})
}

// WantsDashboard reports whether r is a browser opening the server's root
// (GET / asking for HTML, without an SQS Action or target), which the server
// redirects to the dashboard. SQS requests to / never match: they carry an
// Action (query protocol) or an X-Amz-Target header (JSON protocol), and
// SDKs do not ask for text/html.
func WantsDashboard(r *http.Request) bool {
	if r.Method != http.MethodGet || r.URL.Path != "/" {
		return false
	}
	if r.URL.Query().Has("Action") || r.Header.Get("X-Amz-Target") != "" {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}
