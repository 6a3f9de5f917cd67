// Package server runs Sluice's HTTP listener: it builds the http.Server that
// bounds what a client can make the broker hold (header and body sizes,
// read-header, read, write and idle timeouts, a cap on waiting receives), mounts
// the native API under /v1/, the dashboard under /ui/ (Config.Dashboard) and
// the SQS API on every other path, and shuts
// down in a documented order. A browser guard (guard.go) runs in front of
// every API, and with Config.TLSCertFile the server speaks HTTPS only
// (tls.go).
//
// Shutdown order (Stop):
//  1. stop accepting: the listener is closed, so no new connection arrives;
//  2. drain: every waiting receive (SQS's ReceiveMessage, the native API's
//     receive) answers at once with an empty result (it claims nothing), and
//     new receives on open connections answer empty; the dashboard's event
//     streams end and its sampler stops (Config.Live);
//  3. finish in-flight requests, up to the Stop context's deadline (default
//     Config.ShutdownTimeout), then close whatever connections remain;
//  4. stop the dead-letter webhook dispatcher, when there is one
//     (Config.Webhooks): a call in progress is cut and its events are
//     delivered again later;
//  5. the caller then closes the broker (which stops the backend's duties,
//     syncs and closes the store). The server never closes the broker: it
//     does not own it.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/api/native"
	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/api/stream"
	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/dashboard"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/webhook"
)

// Config configures a Server. Use DefaultConfig and change fields; Validate
// reports the first field out of range.
type Config struct {
	// Addr is the TCP address to listen on. Default "127.0.0.1:9324"; port 0
	// picks a free port (see Server.Addr).
	Addr string
	// Region is the region in queue ARNs. Default "us-east-1"; not empty.
	Region string
	// Logger receives server logs. Nil discards.
	Logger *slog.Logger

	// MaxHeaderBytes caps the request line and headers. Default 64 KiB;
	// 4 KiB..1 MiB. Past it the client gets 431 Request Header Fields Too Large.
	MaxHeaderBytes int
	// MaxBodyBytes caps a request body, in both APIs. Default 3 MiB + 64 KiB:
	// a 1 MiB batch after form encoding or JSON escaping (up to 3x). 1 MiB..64
	// MiB. Past it the client gets 413 in its API's error shape.
	MaxBodyBytes int64
	// ReadHeaderTimeout bounds reading a request's headers. Default 10 s; 1 s..5 min.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. Default 60 s;
	// at least ReadHeaderTimeout and 25 s, at most 10 min. It must outlast the
	// longest long poll too: net/http keeps this read deadline while the
	// handler runs and cancels the request's context when it passes.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end of
	// its answer, so it must outlast the longest long poll (20 s) with margin.
	// Default 45 s; 25 s..10 min.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long. Default 120 s; 1 s..1 h.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long Stop waits for in-flight requests when its
	// context has no deadline. Default 10 s; 0..10 min.
	ShutdownTimeout time.Duration
	// MaxWaitingReceives caps concurrent receives that may wait, across both
	// APIs (one apicommon.Gate). Past it a long poll gets RequestThrottled (403), which the
	// SDKs retry with backoff (429 throttled on the native API); short polls
	// (WaitTimeSeconds=0) are still served. Default 10000; 1..1000000.
	MaxWaitingReceives int
	// MaxConnections caps the client connections open at once (the SQS,
	// native and stream APIs share the port). A connection past it is
	// closed as it is accepted, counted (sluice_connections_refused_total)
	// and logged at most every 10 s. Default DefaultMaxConnections(), from
	// the open-file limit less a reserve for the store; 1..1000000.
	MaxConnections int

	// Metrics, when not nil, is served at GET /metrics and told every API
	// request (package metrics implements it). Default nil: /metrics is
	// not served.
	Metrics Metrics

	// Webhooks, when not nil, runs a dead-letter webhook dispatcher over the
	// broker (package webhook): Start starts it, Stop stops it. Default nil
	// (webhooks off). The broker's Config.WebhookHosts should hold the same
	// hosts (webhook.ParseHosts(Webhooks.AllowedHosts...)), so that the front
	// refuses the URLs the dispatcher would not call. A nil Logger logs with
	// the server's Logger; a nil Clock is the broker's clock.
	Webhooks *webhook.Config

	// Live, when not nil, is the dashboard's sampler (package live): the
	// server attaches it to the broker, serves GET /v1/stats, GET /v1/events
	// and GET /v1/queues/{queue}/history from it, starts it in Start and
	// stops it in Stop (step 2, with the waiting receives, so that open
	// event streams end before the server waits for requests). It should
	// also be the broker's Config.Observer (and the store's storage.Options.Observer) (model.Observers), or its
	// rates stay 0. Default nil: those routes answer no_such_route.
	Live *live.Live
	// AllowedHosts are the host names, besides localhost, IP addresses and
	// the host of Addr, that a request's Host header may name (the browser
	// guard, guard.go): a request to another name is refused, so that a web
	// page whose name is pointed at the broker (DNS rebinding) cannot drive
	// it. A page served under one of these names (a proxy's) also counts as
	// the broker's own origin. Names only, without port or scheme; "*" lets
	// any Host in (it turns the rebinding check off). Default none.
	AllowedHosts []string

	// TLSCertFile and TLSKeyFile, when set (both or neither), make the
	// server serve HTTPS only, with this PEM certificate (its chain
	// after it) and key (tls.go). ReloadTLS reads them again. Queue URLs
	// are then https. Default "" (plain HTTP).
	TLSCertFile, TLSKeyFile string

	// Dashboard serves the web dashboard (package dashboard) at /ui/, and
	// redirects a browser's GET / (asking for HTML, with no SQS Action) to
	// it. It reads Live's routes, so it needs Live. Default false (sluice
	// serve turns it on: --dashboard, default true).
	Dashboard bool

	// Keys, when not nil, turns authentication on (package auth; server/auth.go
	// says which paths stay open): every other request must be signed with
	// one of them (SigV4, or a bearer token on /v1/ and /metrics) and be in
	// its allow list. Default nil: no authentication, which Validate allows
	// only on a loopback Addr unless InsecureNoAuth.
	Keys *auth.Keys
	// InsecureNoAuth allows a non-loopback Addr without Keys. Default false.
	InsecureNoAuth bool
}

// Metrics is what the server needs of package metrics: a handler for GET
// /metrics and an observer of every request.
type Metrics interface {
	Handler() http.Handler
	apicommon.RequestObserver
}

// ConnectionObserver is a Metrics that also reports the connections:
// Start hands it the count open now and the count refused at
// MaxConnections since the start.
type ConnectionObserver interface {
	Connections(open, refused func() int64)
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{
		Addr:               "127.0.0.1:9324",
		Region:             apicommon.DefaultRegion,
		MaxHeaderBytes:     64 << 10,
		MaxBodyBytes:       apicommon.DefaultMaxBodyBytes,
		ReadHeaderTimeout:  10 * time.Second,
		ReadTimeout:        60 * time.Second,
		WriteTimeout:       45 * time.Second,
		IdleTimeout:        120 * time.Second,
		ShutdownTimeout:    10 * time.Second,
		MaxWaitingReceives: apicommon.DefaultMaxWaitingReceives,
		MaxConnections:     DefaultMaxConnections(),
	}
}

// Validate reports the first field out of its allowed range.
func (c Config) Validate() error {
	if c.Addr == "" {
		return errors.New("server: Addr must not be empty (host:port, e.g. 127.0.0.1:9324)")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("server: Addr %q is not host:port: %v", c.Addr, err)
	}
	if err := validateAllowedHosts(c.AllowedHosts); err != nil {
		return err
	}
	if err := validateTLS(c); err != nil {
		return err
	}
	if c.Region == "" {
		return errors.New("server: Region must not be empty (e.g. us-east-1)")
	}
	if err := c.checkAuth(); err != nil {
		return err
	}
	if c.Dashboard && c.Live == nil {
		return errors.New("server: Dashboard needs Live (the dashboard reads its live statistics; live.New)")
	}
	if c.Webhooks != nil {
		if err := c.Webhooks.Validate(); err != nil {
			return fmt.Errorf("server: Webhooks: %w", err)
		}
	}
	checks := []struct {
		name      string
		v, lo, hi int64
		unit      string
	}{
		{"MaxHeaderBytes", int64(c.MaxHeaderBytes), 4 << 10, 1 << 20, "bytes"},
		{"MaxBodyBytes", c.MaxBodyBytes, model.MaxBatchBytes, 64 << 20, "bytes"},
		{"ReadHeaderTimeout", int64(c.ReadHeaderTimeout), int64(time.Second), int64(5 * time.Minute), "ns"},
		{"ReadTimeout", int64(c.ReadTimeout), int64(max(c.ReadHeaderTimeout, model.MaxWaitTime+5*time.Second)), int64(10 * time.Minute), "ns"},
		{"WriteTimeout", int64(c.WriteTimeout), int64(model.MaxWaitTime + 5*time.Second), int64(10 * time.Minute), "ns"},
		{"IdleTimeout", int64(c.IdleTimeout), int64(time.Second), int64(time.Hour), "ns"},
		{"ShutdownTimeout", int64(c.ShutdownTimeout), 0, int64(10 * time.Minute), "ns"},
		{"MaxWaitingReceives", int64(c.MaxWaitingReceives), 1, 1000000, ""},
		{"MaxConnections", int64(c.MaxConnections), 1, 1000000, ""},
	}
	for _, ch := range checks {
		if ch.v < ch.lo || ch.v > ch.hi {
			if ch.unit == "ns" {
				return fmt.Errorf("server: %s %v out of range [%v, %v]", ch.name, time.Duration(ch.v), time.Duration(ch.lo), time.Duration(ch.hi))
			}
			return fmt.Errorf("server: %s %d out of range [%d, %d]", ch.name, ch.v, ch.lo, ch.hi)
		}
	}
	return nil
}

// Server is Sluice's HTTP front end over the broker's front (broker.Broker).
type Server struct {
	cfg    Config
	broker *broker.Broker
	// readyCall is the readiness check under way, nil when none (ready).
	readyMu   sync.Mutex
	readyCall *readyCall
	log       *slog.Logger
	handler   http.Handler
	// mux routes every request; route.go asks it which route serves one.
	mux *http.ServeMux
	// gate is both APIs' waiting-receive gate (the cap, the drain).
	gate *apicommon.Gate
	http *http.Server
	// grpc serves the stream API (api/stream) on the same port
	// (streams.go).
	grpc  *grpc.Server
	hooks *webhook.Dispatcher // nil: webhooks off
	tls   *tlsCert            // nil: plain HTTP
	// drain is cancelled by Stop to answer waiting receives at once.
	drain       context.Context
	cancelDrain context.CancelFunc

	// mu guards the lifecycle fields below.
	mu       sync.Mutex
	started  bool
	stopped  bool
	ln       net.Listener
	serveErr chan error // receives Serve's result, then is closed
	stopErr  error
	stopDone chan struct{}
}

// CheckAccount refuses a broker account id (broker.Config.AccountID) whose
// queue URLs, /<account>/<queue>, would lie under a path the server serves
// itself: "v1" (the native API), and "ui" while the dashboard is on. New
// checks it; sluice serve checks it before it opens the store.
func CheckAccount(account string, dashboard bool) error {
	switch {
	case account == "v1":
		return errors.New(`server: the broker's AccountID must not be "v1": queue URLs would lie under /v1/, where the native API is served`)
	case dashboard && account == "ui":
		return errors.New(`server: the broker's AccountID must not be "ui" while Dashboard is on: queue URLs would lie under /ui/, where the dashboard is served`)
	}
	return nil
}

// New returns a Server for b. It validates cfg; it does not listen yet.
func New(cfg Config, b *broker.Broker) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("server: broker is nil")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The broker's own account (broker.Config.AccountID) is the one in
	// this server's queue URLs: /<account>/<queue> must not fall under the
	// native API's or the dashboard's paths.
	if err := CheckAccount(b.AccountID(), cfg.Dashboard); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, broker: b, log: log, stopDone: make(chan struct{})}
	if cfg.Webhooks != nil {
		wc := *cfg.Webhooks
		if wc.Logger == nil {
			wc.Logger = log
		}
		if wc.Clock == nil {
			wc.Clock = b.Clock() // the window and the signature's time
		}
		d, err := webhook.New(wc, b)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.hooks = d
	}
	s.drain, s.cancelDrain = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	// One gate for both APIs: the waiting-receive cap is the server's.
	s.gate = apicommon.NewGate(cfg.MaxWaitingReceives, s.drain)
	api := apicommon.Config{
		Region:       cfg.Region,
		Logger:       log,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Gate:         s.gate,
	}
	if cfg.Metrics != nil {
		api.Requests = cfg.Metrics
		mux.Handle("GET /metrics", cfg.Metrics.Handler())
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if cfg.Live != nil {
		// Specific patterns: more specific than the native API's /v1/.
		cfg.Live.Attach(b)
		s.registerLive(mux) // the broker's own account's only
	}
	sqsHandler := sqs.New(b, api)
	nativeHandler := native.New(b, api)
	// The native API owns /v1/ and everything under it; every other path,
	// /v1 itself included, is the SQS API's (an SQS queue path is
	// /<account>/<queue>, and AccountID cannot be "v1").
	mux.Handle("/v1/", nativeHandler)
	mux.Handle("/v1", sqsHandler)
	root := http.Handler(sqsHandler)
	if cfg.Dashboard {
		ui := dashboard.Handler()
		mux.Handle("/ui/", ui)
		mux.Handle("/ui", ui)
		// A browser opening the root gets the dashboard; SQS requests to /
		// (an Action, an X-Amz-Target) go on to the SQS API.
		root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if dashboard.WantsDashboard(r) {
				http.Redirect(w, r, dashboard.Prefix, http.StatusFound)
				return
			}
			sqsHandler.ServeHTTP(w, r)
		})
	}
	mux.Handle("/", root)
	s.mux = mux
	// The guard refuses a browser's cross-site request before anything
	// else; authentication then verifies the key.
	s.handler = withCaller(s.withGuard(s.authenticate(mux)))
	s.http = &http.Server{
		Handler:           s.handler,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	s.grpc, _ = stream.NewServer(b, stream.Config{Keys: cfg.Keys, Drain: s.drain, Logger: log})
	if cfg.TLSCertFile != "" {
		tc, tcfg, err := newTLSConfig(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, err
		}
		s.tls, s.http.TLSConfig = tc, tcfg
		// Over TLS the streams are HTTP/2 requests of this server
		// (streams.go), kept alive by its pings.
		s.http.Handler = s.withStreams(s.handler)
		s.http.HTTP2 = &http.HTTP2Config{SendPingTimeout: stream.KeepaliveTime, PingTimeout: stream.KeepaliveTimeout}
	}
	return s, nil
}

// readyz answers GET /readyz: 200 "ready" when the broker can serve
// (broker.Ready: the store has not failed and answers within 2 s), else 503
// with the reason. /healthz answers 200 while the process serves HTTP at
// all: a liveness probe restarts on /healthz, a load balancer routes on
// /readyz.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.drain.Err() != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: shutting down\n")
		return
	}
	if err := s.ready(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

// errStoreSilent: the store did not answer the readiness check in time.
var errStoreSilent = errors.New("the store did not answer within 2 s (a write may be stalled: is its disk full, or PostgreSQL unreachable?)")

// ready runs the broker's readiness check, but answers by ctx's deadline
// whatever the store does: a store whose writes are stalled (a full disk
// under the embedded store's lock, a PostgreSQL that accepts and never
// answers) may not return at all. One check runs at a time: a probe that
// finds one under way waits for its answer (until its own deadline)
// rather than piling goroutines onto a stuck store.
func (s *Server) ready(ctx context.Context) error {
	s.readyMu.Lock()
	call := s.readyCall
	if call == nil {
		call = &readyCall{done: make(chan struct{})}
		s.readyCall = call
		go func() {
			// Its own deadline: the check may outlive this probe, never
			// for long where the store heeds a context.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			call.err = s.broker.Ready(rctx)
			s.readyMu.Lock()
			s.readyCall = nil
			s.readyMu.Unlock()
			close(call.done)
		}()
	}
	s.readyMu.Unlock()
	select {
	case <-call.done:
		return call.err
	case <-ctx.Done():
		return errStoreSilent
	}
}

// readyCall is a readiness check under way; err is its answer once done
// is closed.
type readyCall struct {
	done chan struct{}
	err  error
}

// withCaller records who made each request (broker.WithCaller), for the
// front's audit log: the peer address, the SigV4 access key id when the
// request is signed, and the User-Agent.
func withCaller(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := broker.Caller{Addr: r.RemoteAddr, AccessKey: accessKey(r), UserAgent: r.UserAgent()}
		h.ServeHTTP(w, r.WithContext(broker.WithCaller(r.Context(), c)))
	})
}

// accessKey is the access key id of a SigV4-signed request (header or
// presigned query), "" when it is not signed.
func accessKey(r *http.Request) string {
	cred := r.URL.Query().Get("X-Amz-Credential")
	if auth := r.Header.Get("Authorization"); auth != "" {
		_, cred, _ = strings.Cut(auth, "Credential=")
	}
	if i := strings.IndexAny(cred, "/, "); i >= 0 {
		cred = cred[:i]
	}
	if len(cred) > 128 {
		cred = cred[:128]
	}
	return cred
}

// Handler returns the server's HTTP handler (for embedding in another server
// or for httptest). Its receives still drain on Stop.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Config.Addr and serves in a goroutine the Server owns,
// and starts the webhook dispatcher (Config.Webhooks). It returns once the
// listener is open, so Addr is valid. Starting a started server does
// nothing; starting a stopped one is an error.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("server: Start after Stop")
	}
	if s.started {
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: listen on %s: %w (is another process using the address? pick another with --addr)", s.cfg.Addr, err)
	}
	if s.hooks != nil {
		if err := s.hooks.Start(ctx); err != nil {
			_ = ln.Close()
			return fmt.Errorf("server: %w", err)
		}
	}
	if s.cfg.Live != nil {
		if err := s.cfg.Live.Start(ctx); err != nil {
			_ = ln.Close()
			if s.hooks != nil {
				_ = s.hooks.Stop(ctx)
			}
			return fmt.Errorf("server: %w", err)
		}
	}
	limited := newLimitListener(ln, s.cfg.MaxConnections, s.log)
	if co, ok := s.cfg.Metrics.(ConnectionObserver); ok {
		co.Connections(limited.open.Load, limited.refused.Load)
	}
	ln = limited
	s.ln = ln
	s.started = true
	s.serveErr = make(chan error, 1)
	tlsOn := s.tls != nil
	var httpLn net.Listener = ln
	if !tlsOn {
		split := newSplitListener(ln, s.cfg.ReadHeaderTimeout)
		httpLn = split.httpLn
		go func() {
			// The listener's close (Stop) ends Serve with net.ErrClosed,
			// as it ends the HTTP server's.
			if err := s.grpc.Serve(split.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, net.ErrClosed) {
				s.log.Error("the stream API stopped serving", "err", err)
			}
		}()
	}
	go func() {
		var err error
		if tlsOn {
			err = s.http.ServeTLS(httpLn, "", "") // the certificate comes from TLSConfig.GetCertificate
		} else {
			err = s.http.Serve(httpLn)
		}
		s.serveErr <- err
		close(s.serveErr)
	}()
	s.log.Info("listening", "addr", ln.Addr().String(), "tls", tlsOn)
	return nil
}

// WaitingReceives is the number of receives that may be waiting right now,
// in both APIs.
func (s *Server) WaitingReceives() int { return s.gate.Waiting() }

// Addr is the address the server listens on (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Stop shuts down in the order of the package comment: stop accepting, drain
// waiting receives, finish in-flight requests until ctx is done (or
// Config.ShutdownTimeout when ctx has no deadline), then close the rest. It
// returns ctx's error when requests had to be cut off. Stop is idempotent and
// safe on a server never started; concurrent calls wait for the first.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		<-s.stopDone
		return s.stopErr
	}
	s.stopped = true
	started := s.started
	s.mu.Unlock()

	defer close(s.stopDone)
	if !started {
		s.cancelDrain()
		if s.cfg.Live != nil {
			s.cfg.Live.Stop()
		}
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
	}
	// 1. Stop accepting.
	_ = s.ln.Close()
	// 2. Answer waiting receives at once, end the event streams and stop
	// sampling.
	s.cancelDrain()
	if s.cfg.Live != nil {
		s.cfg.Live.Stop()
	}
	// 3. Finish in-flight requests within the deadline, then cut the rest.
	// The drain has ended the streams: each Publish stream ends once its
	// sends are confirmed. The HTTP server goes first: over TLS the gRPC
	// streams are its HTTP/2 requests, and the gRPC server's GracefulStop
	// would close those at once (it drains a ServeHTTP stream by closing
	// it), cutting a Publish stream's confirms; Shutdown waits for them.
	// Meanwhile the plain connections' streams end by themselves, and
	// GracefulStop then waits for what is left of them.
	err := s.http.Shutdown(ctx)
	grpcDone := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(grpcDone)
	}()
	select {
	case <-grpcDone:
	case <-ctx.Done():
		s.grpc.Stop()
		<-grpcDone
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil // Shutdown closes the listener again: step 1 already did
	}
	if err != nil {
		_ = s.http.Close()
		s.log.Warn("shutdown deadline passed; closed remaining connections", "err", err)
	}
	if serr := <-s.serveErr; serr != nil && !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, net.ErrClosed) {
		s.log.Error("serve ended with an error", "err", serr)
	}
	// 4. Stop the webhook dispatcher (before the caller closes the broker).
	if s.hooks != nil {
		if herr := s.hooks.Stop(ctx); herr != nil {
			s.log.Warn("the webhook dispatcher did not stop by the shutdown deadline", "err", herr)
			err = errors.Join(err, herr)
		}
	}
	s.stopErr = err
	return err
}

// Wait blocks until the server stops serving (after Stop, or when the
// listener fails) and returns the reason, nil after a Stop.
func (s *Server) Wait() error {
	s.mu.Lock()
	ch := s.serveErr
	s.mu.Unlock()
	if ch == nil {
		return errors.New("server: not started")
	}
	err, ok := <-ch
	if !ok || errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
