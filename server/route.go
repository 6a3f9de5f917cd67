package server

import (
	"net/http"
	"strings"

	"github.com/sluicemq/sluice/dashboard"
)

// route is what serves a request, as the server's mux routes it. The
// authentication's open paths and the browser guard's exemptions are
// decided on it, never on the text of the request's decoded path: the mux
// matches the escaped path segment by segment, so "/ui%2F..%2F" (one
// segment, "/ui/../" once decoded) goes to the SQS API, "/v1%2Fx" too, and
// a POST to /healthz is no health probe.
type route int

const (
	routeSQS           route = iota // the SQS API (every other path)
	routeHealth                     // GET or HEAD /healthz, /readyz
	routeDashboard                  // the dashboard's files under /ui/
	routeDashboardRoot              // a browser's GET / sent to the dashboard
	routeNative                     // the native API under /v1/ and the live routes
	routeMetrics                    // GET /metrics
)

// routeOf returns the route the server's mux serves r with.
func (s *Server) routeOf(r *http.Request) route {
	_, pattern := s.mux.Handler(r)
	switch {
	case pattern == "GET /healthz" || pattern == "GET /readyz":
		return routeHealth
	case s.cfg.Dashboard && (pattern == dashboard.Prefix || pattern == strings.TrimSuffix(dashboard.Prefix, "/")):
		return routeDashboard
	case s.cfg.Dashboard && pattern == "/" && dashboard.WantsDashboard(r):
		return routeDashboardRoot
	case strings.HasPrefix(pattern, "/v1/") || strings.HasPrefix(pattern, "GET /v1/"):
		return routeNative
	case pattern == "GET /metrics":
		return routeMetrics
	}
	return routeSQS
}
