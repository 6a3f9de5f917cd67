// Package buildinfo tells which build is running and since when: the
// version `sluice version` prints and the native API's overview
// (GET /v1/overview) answers, and the process's start.
package buildinfo

import (
	"runtime/debug"
	"time"
)

// started is when this package was initialized: the process's start, as
// near as the program can tell.
var started = time.Now()

// Started is when the process started.
func Started() time.Time { return started }

// buildVersion and buildCommit are stamped at link time by a release build
// (scripts/release.sh, the Dockerfile):
//
//	-ldflags "-X github.com/sluicemq/sluice/internal/buildinfo.buildVersion=v1.2.3
//	          -X github.com/sluicemq/sluice/internal/buildinfo.buildCommit=<full commit hash>"
//
// A release build turns the go command's VCS stamping off (-buildvcs=false),
// so that the binary's bytes depend on the source and the flags only; these
// two say what it was built from instead.
var (
	buildVersion string
	buildCommit  string
)

// StampedVersion is the version of a release build: its version and the
// first 12 digits of its commit, in VersionOf's shape.
func StampedVersion(v, commit string) string {
	if commit == "" {
		return v
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return v + " (revision " + commit + ")"
}

// Version is this build's version: a release build's stamped version and
// commit (StampedVersion); otherwise the main module's version (a release
// tag, or the pseudo-version the go command stamps from the VCS, with
// "+dirty" for a modified tree) and the VCS revision with whether the tree
// was modified; "devel" when the build recorded neither.
func Version() string {
	if buildVersion != "" {
		return StampedVersion(buildVersion, buildCommit)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return VersionOf(info)
}

// VersionOf is Version for the build information info.
func VersionOf(info *debug.BuildInfo) string {
	var rev string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		return v + " (revision " + rev + ", modified)"
	}
	return v + " (revision " + rev + ")"
}
