package server

// The browser guard: without authentication, a web page that a user opens
// must not be able to drive the broker through the user's browser. The query
// protocol takes GETs and form POSTs, which any page can make a browser send
// (<img src="http://127.0.0.1:9324/?Action=PurgeQueue&...">, an
// auto-submitted <form>), and a page whose name an attacker points at
// 127.0.0.1 (DNS rebinding) is, for the browser, of the broker's own origin.
//
// The guard runs in front of every API (not in front of /healthz and
// /readyz, which change and reveal nothing) and refuses, in this order:
//
//  1. a Host header that names neither an IP address, nor localhost (or a
//     name under .localhost), nor the listen address's host, nor one of
//     Config.AllowedHosts: a rebound name reaches the broker with the
//     attacker's name in Host. An IP address in Host is never a rebinding
//     (the page's origin is then that address itself).
//  2. a request that the browser marks as made by a page of another site
//     (Sec-Fetch-Site: cross-site or same-site);
//  3. a request whose Origin is not the broker's own (the Host it was sent
//     to, or an allowed host), "null" included (sandboxed frames, files);
//  4. a state-changing request without Origin and Sec-Fetch-Site (older
//     browsers) whose Referer is of another origin;
//  5. a state-changing request (any method but GET, HEAD, OPTIONS) that
//     carries a browser's marks (Origin, Sec-Fetch-Site) without the
//     dashboard's CSRF token (dashboard.ValidCSRF): the broker's only page
//     that calls it is the dashboard, which sends the token.
//
// The dashboard's pages themselves (GET and HEAD under /ui/, and a browser's
// GET / that is sent there) pass rules 2 to 5: they are static, and a link
// on another site to the dashboard must open it. Programs (the SDKs, the
// aws CLI, curl, sluice's CLI and Go client) send none of Origin,
// Sec-Fetch-* or Referer, so only rule 1 concerns them (Node.js's fetch
// sends Sec-Fetch-Mode alone, which no rule looks at).
//
// A refusal is answered in the request's protocol (SQS AccessDenied 403, the
// native API's request_refused 403, plain text elsewhere) with a message that
// says why and what to change, and logged at warning level.

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/api/native"
	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/dashboard"
)

// guard is the browser guard's configuration; see the comment above.
type guard struct {
	// hosts are the names (lower case, without port or trailing dot) that
	// rule 1 lets in besides IP addresses and localhost: the listen
	// address's host and Config.AllowedHosts.
	hosts map[string]bool
	// allowed are Config.AllowedHosts alone: the broker's names behind a
	// proxy, whose pages count as the broker's own origin (rule 3).
	allowed map[string]bool
	// anyHost turns rule 1 off (Config.AllowedHosts holds "*").
	anyHost bool
}

// newGuard builds the guard of cfg: the listen address's host and
// AllowedHosts are the names it answers to.
func newGuard(cfg Config) *guard {
	g := &guard{hosts: map[string]bool{}, allowed: map[string]bool{}}
	if host, _, err := net.SplitHostPort(cfg.Addr); err == nil && host != "" {
		g.hosts[normalHost(host)] = true
	}
	for _, h := range cfg.AllowedHosts {
		if h == "*" {
			g.anyHost = true
			continue
		}
		g.hosts[normalHost(h)] = true
		g.allowed[normalHost(h)] = true
	}
	return g
}

// refusal is why the guard refuses a request: a message for the client
// and a short reason for the log.
type refusal struct {
	message, reason string
}

// check returns why r, served by route rt (route.go), is refused, or nil
// when it may pass.
func (g *guard) check(r *http.Request, rt route) *refusal {
	if host := hostOnly(r.Host); host != "" && !g.hostAllowed(host) {
		return &refusal{reason: "host not allowed", message: "The broker does not answer to the host name " + quote(host) +
			": a web page whose name was pointed at the broker's address (DNS rebinding) would reach it by such a name. " +
			"If clients reach the broker by this name, start the broker with --allowed-host " + strings.Trim(quote(host), `"`) + " (docs/security.md)."}
	}
	if dashboardPage(r, rt) {
		return nil
	}
	site := r.Header.Get("Sec-Fetch-Site")
	if site == "cross-site" || site == "same-site" {
		return &refusal{reason: "cross-site request", message: "The broker refuses requests that a web page of another site makes through a browser " +
			"(Sec-Fetch-Site: " + site + "): without authentication, any page could otherwise drive it. " +
			"Programs (SDKs, CLIs, curl) are not refused; call the broker from a program or a server, not from a page of another site (docs/security.md)."}
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !g.ownOrigin(r, origin) {
			return &refusal{reason: "foreign origin", message: "The broker refuses requests from web pages of another origin (Origin: " + quote(origin) + "): " +
				"without authentication, any page could otherwise drive it. If the broker is reached through a proxy under that name, " +
				"start it with --allowed-host and the proxy's host name (docs/security.md)."}
		}
	} else if site == "" && stateChanging(r, rt) {
		if ref := r.Header.Get("Referer"); ref != "" && !g.ownOrigin(r, ref) {
			return &refusal{reason: "foreign referer", message: "The broker refuses requests that a web page of another origin makes through a browser " +
				"(Referer: " + quote(originOf(ref)) + "): without authentication, any page could otherwise drive it (docs/security.md)."}
		}
	}
	if unsafeMethod(r.Method) && browserMarked(r) && !dashboard.ValidCSRF(r) {
		return &refusal{reason: "missing CSRF token", message: "The broker refuses a browser's state-changing request without the dashboard's CSRF token " +
			"(the " + dashboard.CSRFCookie + " cookie, echoed in the " + dashboard.CSRFHeader + " header). If this is the dashboard, reload it (docs/security.md)."}
	}
	return nil
}

// hostAllowed is rule 1: an IP address, localhost, or a configured name.
func (g *guard) hostAllowed(host string) bool {
	if g.anyHost || g.hosts[host] || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// ownOrigin reports whether origin (an Origin header, or a Referer URL) is
// the broker's own: its host is the host r was sent to, and its port the
// same when r's Host names a port (a Host without a port, behind a proxy,
// is matched by name); or its host is one of the configured names (the
// broker's names behind a proxy). The scheme is not compared: behind a
// proxy that terminates TLS, the page is https and the request to the
// broker plain http.
func (g *guard) ownOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null", a file, an extension's page, garbage
	}
	host := normalHost(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if g.allowed[host] {
		return true
	}
	rhost, rport := splitHost(r.Host)
	return host == rhost && (rport == "" || rport == port)
}

// dashboardPage reports whether r asks for one of the dashboard's static
// pages: GET or HEAD of the dashboard's route (/ui/), or a browser's GET /
// that the server sends to /ui/.
func dashboardPage(r *http.Request, rt route) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return rt == routeDashboard || rt == routeDashboardRoot
}

// stateChanging reports whether r may change something: any method but
// GET, HEAD and OPTIONS, and a GET to the SQS API (the query protocol's
// actions, PurgeQueue included, are GETs too). The native API's and
// /metrics's GETs only read.
func stateChanging(r *http.Request, rt route) bool {
	if unsafeMethod(r.Method) {
		return true
	}
	return r.Method == http.MethodGet && rt != routeNative && rt != routeMetrics
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// browserMarked reports whether r carries the headers browsers add and
// programs do not: Origin or Sec-Fetch-Site. Sec-Fetch-Mode alone is not a
// browser's mark: Node.js's built-in fetch (undici) sends "Sec-Fetch-Mode:
// cors" on every request, without Origin or Sec-Fetch-Site, while a browser
// that sends Sec-Fetch-Mode always sends Sec-Fetch-Site with it.
func browserMarked(r *http.Request) bool {
	return r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != ""
}

// refuse answers a refused request, served by route rt, in its protocol's
// shape.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, rt route, why *refusal) {
	s.log.Warn("request refused by the browser guard", "reason", why.reason, "method", r.Method, "path", r.URL.Path,
		"host", r.Host, "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
	err := model.Errorf(apicommon.ErrRefused, "%s", why.message)
	switch rt {
	case routeNative:
		native.WriteError(w, err)
	case routeDashboard, routeMetrics:
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.Error(w, why.message, http.StatusForbidden)
	default:
		sqs.WriteError(w, r, err)
	}
}

// withGuard runs the guard in front of h, but not in front of the health
// probes.
func (s *Server) withGuard(h http.Handler) http.Handler {
	g := newGuard(s.cfg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt := s.routeOf(r); rt != routeHealth {
			if why := g.check(r, rt); why != nil {
				s.refuse(w, r, rt, why)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// hostOnly is the host of a Host header, without port, brackets or
// trailing dot, in lower case.
func hostOnly(hostport string) string {
	h, _ := splitHost(hostport)
	return h
}

// splitHost splits a Host header into its normalized host and its port
// ("" when it names none).
func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return normalHost(h), p
	}
	return normalHost(hostport), ""
}

// normalHost is host in lower case, without brackets and trailing dot.
func normalHost(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// originOf is the scheme://host[:port] of a URL, for a message.
func originOf(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || u.Host == "" {
		return ref
	}
	return u.Scheme + "://" + u.Host
}

// quote is s in double quotes, cut to 200 bytes (a header is the client's
// text: a message must not grow with it).
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return `"` + s + `"`
}

// validateAllowedHosts checks Config.AllowedHosts: each a host name or
// address without scheme, port, path or spaces, or "*".
func validateAllowedHosts(hosts []string) error {
	for _, h := range hosts {
		if h == "*" {
			continue
		}
		bad := h == "" || strings.ContainsAny(h, "/@?# \t,") || strings.Contains(h, "://")
		if !bad && strings.Contains(h, ":") {
			// Only an IPv6 address may hold a colon (a port is not part of it).
			_, err := netip.ParseAddr(normalHost(h))
			bad = err != nil
		}
		if bad {
			return fmt.Errorf("server: AllowedHosts %q must be a host name or address, without scheme, port or path (e.g. queue.example.com), or \"*\"", h)
		}
	}
	return nil
}
