package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/sluicemq/sluice/internal/buildinfo"
)

// version is this build's version (buildinfo.Version).
func version() string { return buildinfo.Version() }

// versionOf is buildinfo.VersionOf.
func versionOf(info *debug.BuildInfo) string { return buildinfo.VersionOf(info) }

// stampedVersion is buildinfo.StampedVersion.
func stampedVersion(v, commit string) string { return buildinfo.StampedVersion(v, commit) }

// printVersion is `sluice version` and `sluice --version`.
func printVersion(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 1 && asksHelp(args) {
		fmt.Fprintln(stdout, "usage: sluice version\n\nPrint the version and the commit it was built from (also sluice --version).")
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "sluice version: unexpected arguments %q\n", args)
		return 2
	}
	fmt.Fprintf(stdout, "sluice %s\n", version())
	return 0
}

// storeName names where serve keeps its queues, for the start log line: the
// embedded store's data directory (absolute), or the PostgreSQL URL without
// its password.
func storeName(f serveFlags) (key, value string) {
	if f.store == "" {
		dir, err := filepath.Abs(f.data)
		if err != nil {
			dir = f.data
		}
		return "data", dir
	}
	return "store", redactURL(f.store)
}

// redactURL returns a database URL with every password in it (user info,
// or a query parameter such as password= or sslpassword=) replaced by xxxxx.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}
