package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/postgres"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/health"
	"github.com/sluicemq/sluice/live"
	"github.com/sluicemq/sluice/metrics"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/webhook"
)

// serveFlags are the settings of `sluice serve`. Each has an environment
// variable; a flag given on the command line wins over the variable.
type serveFlags struct {
	addr, data, account, region string
	store                       string // "" (embedded at data) or a postgres:// URL
	strictPurge                 bool
	maxInFlight                 int
	maxConnections              int
	answerTimeout               time.Duration
	shutdownTimeout             time.Duration
	logLevel, logFormat         string
	// webhookSecret turns dead-letter webhooks on; webhookHosts are the
	// hosts they may call (package webhook).
	webhookSecret string
	webhookHosts  hostsFlag
	// dashboard serves /ui; thresholds decide the health states of the
	// dashboard and of GET /v1/stats.
	dashboard  bool
	thresholds health.Thresholds
	// auth: the keys file and --insecure-no-auth (serve_auth.go).
	auth authFlags
	// allowedHosts are the extra names the broker answers to (the browser
	// guard); tlsCert and tlsKey turn HTTPS on (serve_tls.go).
	allowedHosts    hostsFlag
	tlsCert, tlsKey string
	// diskReserve is embedded.Config.DiskReserve (--disk-reserve).
	diskReserve int64
	// backupDir is broker.Config.BackupDir (--backup-dir).
	backupDir string
	// archiveDir ("" for none: --archive-dir off), archiveID and
	// archiveFileBytes are the backend's Archive settings (--archive-dir,
	// --archive-id, --archive-file-size).
	archiveDir, archiveID string
	archiveFileBytes      int64
}

// hostsFlag is --webhook-allow-host and --allowed-host: repeatable, each
// value a host or a comma-separated list of hosts. Values from the environment are replaced,
// not extended, by the first one given on the command line.
type hostsFlag struct {
	hosts   []string
	fromEnv bool
}

func (h *hostsFlag) String() string { return strings.Join(h.hosts, ",") }

func (h *hostsFlag) Set(v string) error {
	if h.fromEnv {
		h.hosts, h.fromEnv = nil, false
	}
	h.hosts = append(h.hosts, v)
	return nil
}

func parseServeFlags(args []string, env func(string) string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("sluice serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: sluice serve [flags]

Run the broker: the SQS API (JSON and query protocols), the native API (/v1/), the
dashboard (/ui/), /metrics and the stream API, all on --addr. Queues live in the
embedded store at --data, or in PostgreSQL with --store postgres://... (several
brokers may share one). Every flag has an environment variable; a flag wins.
SIGTERM or Ctrl-C stops it cleanly.

examples:
  sluice serve
  sluice serve --addr 0.0.0.0:9324 --data /var/lib/sluice
  SLUICE_STORE=postgres://sluice@db.internal/sluice sluice serve --addr 0.0.0.0:9324
  sluice serve --tls-cert cert.pem --tls-key key.pem --log-format json

flags:
`)
		fs.PrintDefaults()
	}
	str := func(p *string, name, envName, def, usage string) {
		if v := env(envName); v != "" {
			def = v
		}
		fs.StringVar(p, name, def, usage+" (env "+envName+")")
	}
	// secret is str for a value that may hold a password or a key: its
	// environment value is not the flag's default, which the usage (-h, or
	// a bad flag) prints, but is read after parsing unless the flag is given.
	secretEnv := map[string]string{} // flag name -> its variable
	secret := func(p *string, name, envName, usage string) {
		fs.StringVar(p, name, "", usage+" (env "+envName+")")
		secretEnv[name] = envName
	}
	def := server.DefaultConfig()
	str(&f.addr, "addr", "SLUICE_ADDR", def.Addr, "address to listen on; port 0 picks a free port")
	str(&f.data, "data", "SLUICE_DATA", "./sluice-data", "data directory")
	secret(&f.store, "store", "SLUICE_STORE", "where queues live: empty for the embedded store at --data, or a postgres:// URL (several brokers may share one PostgreSQL)")
	str(&f.account, "account-id", "SLUICE_ACCOUNT_ID", broker.DefaultAccountID, "account id in queue URLs and ARNs")
	str(&f.region, "region", "SLUICE_REGION", def.Region, "region in queue ARNs")
	str(&f.logLevel, "log-level", "SLUICE_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	str(&f.logFormat, "log-format", "SLUICE_LOG_FORMAT", "text", "log format: text (key=value) or json (one object per line)")

	strictDef := false
	if v := env("SLUICE_STRICT_PURGE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, fmt.Errorf("SLUICE_STRICT_PURGE=%q is not a boolean (use true or false)", v)
		}
		strictDef = b
	}
	fs.BoolVar(&f.strictPurge, "strict-purge", strictDef, "enforce AWS's one PurgeQueue per queue per 60 s (env SLUICE_STRICT_PURGE)")
	intVar := func(p *int, name, envName string, def int, usage string) error {
		if v := env(envName); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q is not an integer", envName, v)
			}
			def = n
		}
		fs.IntVar(p, name, def, usage+" (env "+envName+")")
		return nil
	}
	if err := intVar(&f.maxInFlight, "max-inflight", "SLUICE_MAX_INFLIGHT", model.DefaultMaxInFlight,
		"leased messages per queue before receives get OverLimit"); err != nil {
		return f, err
	}
	if err := intVar(&f.maxConnections, "max-connections", "SLUICE_MAX_CONNECTIONS", def.MaxConnections,
		"client connections open at once; past it a new one is closed as it is accepted (default: the open-file limit less a fifth, at least 256, for the store)"); err != nil {
		return f, err
	}
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", def.ShutdownTimeout, "how long a shutdown waits for requests in flight")
	answerDef := postgres.DefaultConfig().AnswerTimeout
	if v := env("SLUICE_STORE_ANSWER_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return f, fmt.Errorf("SLUICE_STORE_ANSWER_TIMEOUT=%q is not a duration (e.g. 5s)", v)
		}
		answerDef = d
	}
	fs.DurationVar(&f.answerTimeout, "store-answer-timeout", answerDef, "with a postgres:// --store: how long a statement may go unanswered before its request answers 503 and its connection is dropped (a partition that keeps connections open); raise it if applications hold transactions that lock queues longer (env SLUICE_STORE_ANSWER_TIMEOUT)")
	secret(&f.webhookSecret, "webhook-secret", "SLUICE_WEBHOOK_SECRET",
		"the key that signs dead-letter webhook calls (HMAC-SHA256, at least 16 bytes); without it, webhooks are off. Prefer the variable: a flag shows in ps")
	if v := env("SLUICE_WEBHOOK_ALLOW_HOSTS"); v != "" {
		f.webhookHosts = hostsFlag{hosts: []string{v}, fromEnv: true}
	}
	fs.Var(&f.webhookHosts, "webhook-allow-host",
		"a host dead-letter webhooks may call: host (ports 80 and 443) or host:port; repeat it or give a comma-separated list (env SLUICE_WEBHOOK_ALLOW_HOSTS)")
	var diskReserve string
	str(&diskReserve, "disk-reserve", "SLUICE_DISK_RESERVE", "auto",
		"free space on the data directory's disk below which sends are refused (503, retried by clients): auto = max(64MiB, 2% of the disk), a size such as 256MiB, or off")
	str(&f.backupDir, "backup-dir", "SLUICE_BACKUP_DIR", "", "directory under which POST /v1/backups (sluice backup) writes online copies of the embedded store; empty: backups are refused")
	str(&f.archiveDir, "archive-dir", "SLUICE_ARCHIVE_DIR", "", "directory this broker owns for the archive of ArchiveExpired queues (gzip JSON lines of the messages whose retention ends); default <--data>/archive; off: no archive")
	str(&f.archiveID, "archive-id", "SLUICE_ARCHIVE_ID", "", "this broker's name in its archive files and its archive cursor: every broker needs its own id (on PostgreSQL even with its own --archive-dir: the cursor is a row per id), and a broker keeps its id across restarts (default: the host name and a hash of the archive directory's path)")
	var archiveSize string
	str(&archiveSize, "archive-file-size", "SLUICE_ARCHIVE_FILE_SIZE", "64MiB", "an archive file is closed (and a new one begun) past this many compressed bytes, or when the UTC day changes")
	var healthDepth, healthAge, healthDLQDepth, healthDead string
	str(&healthDepth, "health-depth", "SLUICE_HEALTH_DEPTH", "1000,10000", "queue depth (visible + in flight + delayed) at which a queue's health is warning, then critical; 0 turns one off; a queue's HealthDepth attribute overrides it")
	str(&healthAge, "health-age", "SLUICE_HEALTH_AGE", "1m,5m", "how long a queue's longest-visible message has waited (delayed and backing-off messages do not count) at which its health is warning, then critical; 0 turns one off; a queue's HealthAge attribute overrides it")
	str(&healthDLQDepth, "health-dlq-depth", "SLUICE_HEALTH_DLQ_DEPTH", "1,100", "messages in a dead-letter queue (one that a RedrivePolicy names: judged by count, never by age) at which its health is warning, then critical; 0 turns one off; the queue's HealthDepth attribute overrides it")
	str(&healthDead, "health-dead-letters", "SLUICE_HEALTH_DEAD_LETTERS", "warning", "health of a queue whose dead-letter queue holds messages: warning, critical or ignore")
	dashDef := true
	if v := env("SLUICE_DASHBOARD"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, fmt.Errorf("SLUICE_DASHBOARD=%q is not a boolean (use true or false)", v)
		}
		dashDef = b
	}
	fs.BoolVar(&f.dashboard, "dashboard", dashDef, "serve the web dashboard at /ui/ (env SLUICE_DASHBOARD); the live statistics under /v1/ are served either way")
	if err := f.auth.add(fs, env); err != nil {
		return f, err
	}
	addSecurityFlags(fs, &f, env, str)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	var err error
	if f.diskReserve, err = embedded.ParseDiskReserve(diskReserve); err != nil {
		return f, fmt.Errorf("--disk-reserve: %v", err)
	}
	switch f.archiveDir {
	case "":
		f.archiveDir = filepath.Join(f.data, "archive")
	case "off":
		f.archiveDir = ""
	}
	if n, err := embedded.ParseDiskReserve(archiveSize); err != nil || n <= 0 {
		return f, fmt.Errorf("--archive-file-size %q: give a size such as 64MiB or 1GiB", archiveSize)
	} else {
		f.archiveFileBytes = n
	}
	f.thresholds = health.DefaultThresholds()
	if err := f.thresholds.ParseDepthThresholds(healthDepth); err != nil {
		return f, fmt.Errorf("--health-depth: %v", err)
	}
	if err := f.thresholds.ParseAgeThresholds(healthAge); err != nil {
		return f, fmt.Errorf("--health-age: %v", err)
	}
	if err := f.thresholds.ParseDLQDepthThresholds(healthDLQDepth); err != nil {
		return f, fmt.Errorf("--health-dlq-depth: %v", err)
	}
	level, err := health.ParseDeadLetterLevel(healthDead)
	if err != nil {
		return f, fmt.Errorf("--health-dead-letters: %v", err)
	}
	f.thresholds.DeadLetters = level
	fs.Visit(func(fl *flag.Flag) { delete(secretEnv, fl.Name) })
	for name, envName := range secretEnv {
		if err := fs.Set(name, env(envName)); err != nil {
			return f, err
		}
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q (serve takes only flags)", fs.Args())
	}
	if f.maxInFlight < 1 {
		return f, fmt.Errorf("--max-inflight %d must be at least 1", f.maxInFlight)
	}
	if f.maxConnections < 1 || f.maxConnections > 1000000 {
		return f, fmt.Errorf("--max-connections %d must be 1 to 1000000", f.maxConnections)
	}
	if f.store != "" && !isPostgresURL(f.store) {
		return f, fmt.Errorf("--store %q: use a postgres:// or postgresql:// URL, or leave it empty for the embedded store", f.store)
	}
	if f.data == "" {
		return f, errors.New("--data must name a directory")
	}
	if f.webhookSecret == "" && len(f.webhookHosts.hosts) > 0 {
		return f, errors.New("--webhook-allow-host needs --webhook-secret (or SLUICE_WEBHOOK_SECRET): webhook calls are always signed")
	}
	if err := checkSecurityFlags(f); err != nil {
		return f, err
	}
	if f.webhookSecret != "" {
		if err := f.webhooks().Validate(); err != nil {
			return f, fmt.Errorf("--webhook-secret / --webhook-allow-host: %v", err)
		}
	}
	return f, nil
}

// webhooks is the dispatcher's configuration (nil: webhooks off).
func (f serveFlags) webhooks() *webhook.Config {
	if f.webhookSecret == "" {
		return nil
	}
	c := webhook.DefaultConfig()
	c.Secret, c.AllowedHosts = f.webhookSecret, f.webhookHosts.hosts
	return &c
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// serve runs the broker until ctx is cancelled (SIGTERM/SIGINT), then shuts
// down in order: the server stops accepting, answers waiting receives at
// once and finishes requests in flight (server.Stop); then the backend stops
// its duties, syncs and closes the store (Close).
func serve(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	f, err := parseServeFlags(args, env, helpOut(args, stdout, stderr))
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	log, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	storeKey, storeValue := storeName(f)
	log.Info("sluice starting", "version", version(), storeKey, storeValue, "addr", f.addr, "account_id", f.account, "region", f.region)
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Region, cfg.Logger = f.addr, f.region, log
	cfg.ShutdownTimeout = f.shutdownTimeout
	cfg.MaxConnections = f.maxConnections
	if cfg.Keys, err = f.auth.load(); err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	cfg.InsecureNoAuth = f.auth.insecureNoAuth
	f.applySecurity(&cfg)
	bcfg := broker.Config{Logger: log, AccountID: f.account, MaxInFlight: f.maxInFlight, StrictPurge: f.strictPurge, BackupDir: f.backupDir}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	if f.account == "" {
		fmt.Fprintln(stderr, "sluice serve: --account-id (SLUICE_ACCOUNT_ID) must not be empty: give 1..64 characters, e.g. the default "+broker.DefaultAccountID)
		return 2
	}
	if err := bcfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	// Before the store opens: a refused flag must not touch it.
	if err := server.CheckAccount(f.account, f.dashboard); err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	if cfg.Keys != nil {
		log.Info("authentication on", "keys_file", cfg.Keys.Path(), "keys", cfg.Keys.Len())
		defer reloadKeysOnHUP(ctx, cfg.Keys, log)()
	} else if cfg.InsecureNoAuth {
		log.Warn("authentication off, and --insecure-no-auth allows any --addr: anyone who reaches the port can do anything")
	}

	m := metrics.New()
	m.SetThresholds(f.thresholds) // sluice_queue_health: the same states as /v1/stats
	cfg.Metrics = m
	lcfg := live.DefaultConfig()
	lcfg.Thresholds, lcfg.Logger = f.thresholds, log
	lv, err := live.New(lcfg)
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		return 2
	}
	cfg.Live, cfg.Dashboard = lv, f.dashboard
	bcfg.Observer = model.Observers(m, lv)
	opts := storage.Options{Logger: log, Observer: bcfg.Observer}
	if wc := f.webhooks(); wc != nil {
		// The front refuses a DeadLetterWebhook of another host; the
		// dispatcher (started by the server) calls only these.
		hosts, _ := webhook.ParseHosts(wc.AllowedHosts...) // parseServeFlags validated them
		bcfg.WebhookHosts = hosts
		wc.Logger = log
		cfg.Webhooks = wc
		if hosts.Len() == 0 {
			log.Warn("dead-letter webhooks have a secret but no allowed host: every DeadLetterWebhook is refused (add --webhook-allow-host)")
		}
	}
	var backend storage.Backend
	if f.store != "" {
		pcfg := postgres.DefaultConfig()
		pcfg.URL, pcfg.Options, pcfg.AnswerTimeout = f.store, opts, f.answerTimeout
		pcfg.Archive.Dir, pcfg.Archive.ID, pcfg.Archive.MaxFileBytes = f.archiveDir, f.archiveID, f.archiveFileBytes
		backend, err = postgres.Open(ctx, pcfg)
		if err != nil {
			fmt.Fprintf(stderr, "sluice serve: open PostgreSQL store: %v\n", err)
			return 1
		}
	} else {
		ecfg := embedded.Config{Dir: f.data, DiskReserve: f.diskReserve, Options: opts}
		ecfg.Archive.Dir, ecfg.Archive.ID, ecfg.Archive.MaxFileBytes = f.archiveDir, f.archiveID, f.archiveFileBytes
		backend, err = embedded.Open(ecfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: open data directory %s: %v\n", f.data, err)
		switch {
		case errors.Is(err, embedded.ErrDirLocked):
			fmt.Fprintf(stderr, "Another sluice broker may be using %s: stop it, or start this one with another --data.\n", f.data)
		case errors.Is(err, embedded.ErrDirNotWritable):
			fmt.Fprintf(stderr, "The data directory %s is not writable by this user: choose another --data (or SLUICE_DATA), "+
				"or fix its permissions so that the broker can create files in it.\n", f.data)
		}
		return 1
	}
	front, err := broker.New(backend, bcfg)
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		closeBackend(backend, log)
		return 2
	}
	m.Attach(front)
	srv, err := server.New(cfg, front)
	if err == nil {
		err = srv.Start(ctx)
	}
	if err == nil && cfg.TLSCertFile != "" {
		defer reloadTLSOnHangup(srv)()
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice serve: %v\n", err)
		closeBackend(backend, log)
		return 1
	}
	// Tests and scripts parse this line for the address (port 0 picks one).
	fmt.Fprintf(stdout, "sluice listening on %s\n", srv.Addr())

	releaseCtx, stopRelease := context.WithCancel(ctx)
	defer stopRelease()
	go releaseMemory(releaseCtx, memoryReleaseInterval) // memory.go

	code := 0
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Wait() }()
	storeFailed := front.Failed()
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", "signal")
	case err := <-serveErr:
		log.Error("server stopped unexpectedly", "err", err)
		code = 1
	case <-storeFailed:
		log.Error("shutting down: the store failed; restart the broker to recover from its log", "reason", "store failure")
		code = 1
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		log.Warn("requests still in flight at the shutdown deadline were cut off", "err", err)
	}
	if !closeBackend(backend, log) {
		code = 1
	}
	if n, ok := front.Syncs(); ok {
		// Durability evidence for benchmarks: store syncs over this lifetime.
		log.Info("stopped", "syncs", n)
	} else {
		log.Info("stopped")
	}
	return code
}

// isPostgresURL reports whether store names a PostgreSQL database.
func isPostgresURL(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

func closeBackend(b interface{ Close() error }, log *slog.Logger) bool {
	if err := b.Close(); err != nil {
		log.Error("closing the store failed; the next start will recover from its log", "err", err)
		return false
	}
	return true
}
