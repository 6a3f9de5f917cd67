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

// Version is this build's version: the main module's version (a release
// tag, or the pseudo-version the go command stamps from the VCS, with
// "+dirty" for a modified tree) and the VCS revision with whether the tree
// was modified; "devel" when the build recorded neither.
func Version() string {
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
