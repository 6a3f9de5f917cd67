package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/sluicemq/sluice/api/native"
	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Authentication (Config.Keys): every request but the open ones below is
// verified (package auth) before any handler runs, its action is checked
// against the key's allow list, and the verified identity goes on the
// request's broker.Caller (Authenticated, Account, AccessKey).
//
// Open without a key: GET and HEAD of /healthz and /readyz (probes), the
// dashboard's static files under /ui/ and the redirect of a browser's GET /
// (the page then asks for a key: its data comes from the native API).
// GET /metrics needs a key allowed native:read (a bearer token or SigV4).

// requestKind is which API a request is for, as the server routes it.
type requestKind int

const (
	kindOpen   requestKind = iota // no key needed
	kindSQS                       // the SQS API: SigV4 only, SQS errors
	kindNative                    // /v1/ and /metrics: SigV4 or bearer, native errors
)

// kindOf decides on the route that serves r (route.go), not on its path's
// text.
func (s *Server) kindOf(r *http.Request) requestKind {
	switch s.routeOf(r) {
	case routeHealth, routeDashboard, routeDashboardRoot:
		return kindOpen
	case routeNative, routeMetrics:
		return kindNative
	}
	return kindSQS
}

// permission is the allow-list name of a request: the SQS action, or
// native:read / native:write.
func permission(kind requestKind, r *http.Request, body []byte) string {
	if kind == kindSQS {
		return sqs.Action(r, body)
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return auth.NativeRead
	}
	return auth.NativeWrite
}

// authenticate wraps h with the verification (nil Config.Keys: h itself).
func (s *Server) authenticate(h http.Handler) http.Handler {
	if s.cfg.Keys == nil {
		return h
	}
	v := auth.NewVerifier(s.cfg.Keys, s.broker.Clock())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := s.kindOf(r)
		if kind == kindOpen {
			h.ServeHTTP(w, r)
			return
		}
		fail := func(err error) {
			if kind == kindSQS {
				sqs.WriteError(w, r, err)
			} else {
				native.WriteError(w, err)
			}
		}
		// The signature covers the body: read it here, under the same cap
		// as the APIs, and give it back to the handler.
		var body []byte
		if r.Body != nil && r.Body != http.NoBody {
			var err error
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
			if err != nil {
				var mbe *http.MaxBytesError
				if !errors.As(err, &mbe) {
					err = model.Errorf(model.ErrInvalidParameterValue, "Could not read the request body: %v", err)
				}
				fail(err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		id, err := v.Authenticate(r, body, kind == kindNative)
		if err == nil {
			if action := permission(kind, r, body); !id.Allowed(action) {
				err = id.DeniedError(action)
			}
		}
		if err != nil {
			s.log.Debug("request refused by authentication", "addr", r.RemoteAddr, "path", r.URL.Path, "err", err)
			fail(err)
			return
		}
		c := broker.CallerFrom(r.Context())
		c.AccessKey, c.Authenticated, c.Account = id.AccessKeyID, true, id.Account
		h.ServeHTTP(w, r.WithContext(broker.WithCaller(r.Context(), c)))
	})
}

// ErrNoAuth is the error of Config.Validate for a non-loopback Addr without
// Keys or InsecureNoAuth.
var ErrNoAuth = errors.New("server: refusing to listen on a non-loopback address without authentication")

// checkAuth is the rule on where a broker without keys may listen: only on
// a loopback address (127.0.0.0/8, ::1, localhost), unless InsecureNoAuth.
func (c Config) checkAuth() error {
	if c.Keys != nil || c.InsecureNoAuth {
		return nil
	}
	host, _, _ := net.SplitHostPort(c.Addr)
	if isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: %s can be reached from other machines, and with no access keys anyone who reaches it can read, send and delete every message. Give a keys file (--keys FILE or SLUICE_KEYS_FILE; docs/security.md), listen on 127.0.0.1, or, behind your own access control (a container's private network), pass --insecure-no-auth (SLUICE_INSECURE_NO_AUTH=1)", ErrNoAuth, c.Addr)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
