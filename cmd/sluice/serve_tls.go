package main

// The settings of `sluice serve` that protect it: the names it answers to
// (--allowed-host, the browser guard) and HTTPS (--tls-cert, --tls-key,
// reloaded on SIGHUP). docs/security.md describes them.

import (
	"errors"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicemq/sluice/server"
)

// addSecurityFlags registers --allowed-host, --tls-cert and --tls-key on fs;
// str is parseServeFlags's helper for a string flag with a variable.
func addSecurityFlags(fs *flag.FlagSet, f *serveFlags, env func(string) string, str func(p *string, name, envName, def, usage string)) {
	if v := env("SLUICE_ALLOWED_HOSTS"); v != "" {
		f.allowedHosts = hostsFlag{hosts: []string{v}, fromEnv: true}
	}
	fs.Var(&f.allowedHosts, "allowed-host",
		"a host name clients and browsers reach the broker by, besides localhost and IP addresses (a proxy's name, a container's service name); "+
			"repeat it or give a comma-separated list; * allows any name and turns DNS-rebinding protection off (env SLUICE_ALLOWED_HOSTS)")
	str(&f.tlsCert, "tls-cert", "SLUICE_TLS_CERT", "", "PEM certificate (chain) file: serve HTTPS only, with --tls-key; both are read again on SIGHUP")
	str(&f.tlsKey, "tls-key", "SLUICE_TLS_KEY", "", "PEM private key file of --tls-cert")
}

// checkSecurityFlags reports a wrong combination or value of those flags.
func checkSecurityFlags(f serveFlags) error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both (a certificate and its key) or neither")
	}
	cfg := server.DefaultConfig()
	f.applySecurity(&cfg)
	if err := cfg.Validate(); err != nil {
		return errors.New("--allowed-host: " + strings.TrimPrefix(err.Error(), "server: "))
	}
	return nil
}

// applySecurity sets the server's AllowedHosts and TLS files.
func (f serveFlags) applySecurity(cfg *server.Config) {
	cfg.AllowedHosts = nil
	for _, v := range f.allowedHosts.hosts {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				cfg.AllowedHosts = append(cfg.AllowedHosts, h)
			}
		}
	}
	cfg.TLSCertFile, cfg.TLSKeyFile = f.tlsCert, f.tlsKey
}

// reloadTLSOnHangup reloads srv's certificate and key on each SIGHUP until
// the returned stop is called (server.ReloadTLS logs the outcome; a failed
// reload keeps the pair in use). Only a broker serving TLS catches SIGHUP:
// without TLS, SIGHUP ends the process as it always did.
func reloadTLSOnHangup(srv *server.Server) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				_ = srv.ReloadTLS()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
