// Package testbroker starts a real Sluice broker in-process for a test: the
// embedded backend in t.TempDir(), the front, and the HTTP server (both
// APIs) on 127.0.0.1:0, stopped in order when the test ends. The library
// side's tests (client, worker, examples) talk to it over HTTP as a program
// would.
package testbroker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

// Config changes the broker a test starts; the zero Config is the defaults
// with the wall clock and warnings logged to the test's log.
type Config struct {
	// Clock is the broker's clock (a *clocktest.FakeClock makes leases and
	// delays exact and instant). Default: the wall clock.
	Clock model.Clock
	// Logger receives the broker's and server's logs. Default: warnings
	// and errors, to the test's log.
	Logger *slog.Logger
	// Server, when set, changes the server's config before it starts.
	Server func(*server.Config)
	// Observer is the broker's observer (metrics), given to the front and
	// the store. Default nil.
	Observer model.Observer
}

// Broker is a running broker.
type Broker struct {
	// URL is the server's base URL ("http://127.0.0.1:port"), for client.New
	// and an SQS client's BaseEndpoint.
	URL    string
	Front  *broker.Broker
	Server *server.Server
}

// Start starts a broker for t and stops it (server, then store) when t ends.
func Start(t testing.TB, cfg Config) *Broker {
	t.Helper()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(testutil.Writer(t, ""), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir(),
		Options: storage.Options{Logger: log, Clock: cfg.Clock, Observer: cfg.Observer}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := broker.New(backend, broker.Config{Logger: log, Observer: cfg.Observer})
	if err != nil {
		_ = backend.Close()
		t.Fatal(err)
	}
	scfg := server.DefaultConfig()
	scfg.Addr = "127.0.0.1:0"
	scfg.Logger = log
	if cfg.Server != nil {
		cfg.Server(&scfg)
	}
	srv, err := server.New(scfg, front)
	if err != nil {
		_ = front.Close()
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		_ = front.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("testbroker: server Stop: %v", err)
		}
		if err := front.Close(); err != nil {
			t.Errorf("testbroker: broker Close: %v", err)
		}
	})
	return &Broker{URL: "http://" + srv.Addr().String(), Front: front, Server: srv}
}
