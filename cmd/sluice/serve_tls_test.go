package main

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

// TestServeTLS: sluice serve --tls-cert --tls-key serves HTTPS; the CLI
// reaches it with --ca-file (and not without, as the CA is private); a
// SIGHUP reloads the pair from the same files, and a SIGHUP with a broken
// pair keeps the one in use and says why.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t)
	certFile, keyFile := ca.Issue(t, "first")
	p := start(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile, "--dashboard=false")
	url := "https://" + p.addr

	cli := func(args ...string) result {
		var out, errb testutil.Buffer
		env := func(string) string { return "" }
		code := run(context.Background(), append(args, "--url", url), env, &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	if r := cli("queue", "create", "tls-q", "--ca-file", ca.CertFile()); r.code != 0 {
		t.Fatalf("queue create over TLS with --ca-file: exit %d: %s", r.code, r.stderr)
	}
	if r := cli("queue", "list", "--ca-file", ca.CertFile()); r.code != 0 || !strings.Contains(r.stdout, "tls-q") {
		t.Fatalf("queue list over TLS: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if r := cli("queue", "list"); r.code == 0 || !strings.Contains(r.stderr, "--ca-file") {
		t.Errorf("queue list without --ca-file: exit %d, stderr %q; want a certificate error naming --ca-file", r.code, r.stderr)
	}
	if r := cli("queue", "list", "--ca-file", certFile+".missing"); r.code != 2 || !strings.Contains(r.stderr, "--ca-file") {
		t.Errorf("a missing --ca-file: exit %d, stderr %q", r.code, r.stderr)
	}

	if name, err := ca.ServedName(p.addr); err != nil || name != "first" {
		t.Fatalf("served certificate %q (%v), want first", name, err)
	}
	ca.Issue(t, "second")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.logLine(t, "TLS certificate reloaded", "CN=second")
	testutil.Eventually(t, 10*time.Second, "the new certificate is served", func() bool {
		name, _ := ca.ServedName(p.addr)
		return name == "second"
	})
	if err := os.WriteFile(keyFile, []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.logLine(t, "TLS reload failed; still serving the previous certificate")
	if name, err := ca.ServedName(p.addr); err != nil || name != "second" {
		t.Errorf("after a failed reload: served certificate %q (%v), want second", name, err)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

func TestServeSecurityFlags(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "SLUICE_ALLOWED_HOSTS" {
			return "env.example"
		}
		return ""
	}
	f, err := parseServeFlags(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	f.applySecurity(&cfg)
	if !slices.Equal(cfg.AllowedHosts, []string{"env.example"}) {
		t.Errorf("SLUICE_ALLOWED_HOSTS: AllowedHosts %q", cfg.AllowedHosts)
	}
	f, err = parseServeFlags([]string{"--allowed-host", "a.example, b.example", "--allowed-host", "c.example", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f.applySecurity(&cfg)
	if !slices.Equal(cfg.AllowedHosts, []string{"a.example", "b.example", "c.example"}) || cfg.TLSCertFile != "c.pem" || cfg.TLSKeyFile != "k.pem" {
		t.Errorf("flags: AllowedHosts %q, TLS %q %q", cfg.AllowedHosts, cfg.TLSCertFile, cfg.TLSKeyFile)
	}
	for _, args := range [][]string{
		{"--tls-cert", "c.pem"},
		{"--tls-key", "k.pem"},
		{"--allowed-host", "http://a.example"},
		{"--allowed-host", "a.example:8080"},
	} {
		if _, err := parseServeFlags(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("%q: nil error", args)
		}
	}
}
