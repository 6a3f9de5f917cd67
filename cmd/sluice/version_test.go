package main

import (
	"bufio"
	"errors"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	rev := "0123456789abcdef0123456789abcdef01234567"
	setting := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3"},
		{"v0.0.0-20260101000000-0123456789ab+dirty", setting("vcs.revision", rev, "vcs.modified", "true"),
			"v0.0.0-20260101000000-0123456789ab+dirty (revision 0123456789ab, modified)"},
		{"(devel)", setting("vcs.revision", rev, "vcs.modified", "false"), "devel (revision 0123456789ab)"},
		{"(devel)", nil, "devel"},
		{"", nil, "devel"},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/sluicemq/sluice", Version: c.main}, Settings: c.settings}
		if got := versionOf(info); got != c.want {
			t.Errorf("versionOf(%q, %v) = %q, want %q", c.main, c.settings, got, c.want)
		}
	}
}

// TestStampedVersion: a release build's version (scripts/release.sh stamps
// buildVersion and buildCommit) reads as versionOf's do.
func TestStampedVersion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ v, commit, want string }{
		{"v1.2.3", "0123456789abcdef0123456789abcdef01234567", "v1.2.3 (revision 0123456789ab)"},
		{"v1.2.3-4-g0123456789ab", "0123456789ab", "v1.2.3-4-g0123456789ab (revision 0123456789ab)"},
		{"v1.2.3", "", "v1.2.3"},
	} {
		if got := stampedVersion(c.v, c.commit); got != c.want {
			t.Errorf("stampedVersion(%q, %q) = %q, want %q", c.v, c.commit, got, c.want)
		}
	}
}

// TestVersionOnBinary: `sluice --version`, `sluice -version` and `sluice
// version` print the version the binary's build info holds (what `go
// version -m` reads from it).
func TestVersionOnBinary(t *testing.T) {
	t.Parallel()
	bin := sluiceBin.Path(t)
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	modVersion, rev, modified := "", "", false
	sc := bufio.NewScanner(strings.NewReader(string(info)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "mod":
			modVersion = f[2]
		case len(f) >= 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			rev = strings.TrimPrefix(f[1], "vcs.revision=")
		case len(f) >= 2 && f[0] == "build" && f[1] == "vcs.modified=true":
			modified = true
		}
	}
	want := "sluice " + versionOf(&debug.BuildInfo{Main: debug.Module{Version: modVersion},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: map[bool]string{true: "true"}[modified]}}}) + "\n"
	if !regexp.MustCompile(`^sluice (devel|v\S+)( \(revision [0-9a-f]{12}(, modified)?\))?\n$`).MatchString(want) {
		t.Fatalf("the expected version line %q is malformed", want)
	}
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || string(out) != want {
			t.Errorf("sluice %s = %q, %v; want %q", args[0], out, err, want)
		}
	}
	out, err := exec.Command(bin, "version", "extra").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("sluice version extra: %v\n%s", err, out)
	}
	t.Logf("version: %s", strings.TrimSpace(want))
}

// TestStartLogLine: serve's first log line gives the version and names the
// store: the data directory, or the PostgreSQL URL without its passwords.
func TestStartLogLine(t *testing.T) {
	t.Parallel()
	bin := sluiceBin.Path(t)
	vout, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSuffix(strings.TrimPrefix(string(vout), "sluice "), "\n")
	quoted := "version=" + v
	if strings.Contains(v, " ") {
		quoted = `version="` + v + `"`
	}

	data := t.TempDir()
	p := start(t, nil, "serve", "--addr", "127.0.0.1:0", "--data", data)
	p.logLine(t, `msg="sluice starting"`, quoted, "data="+data, "addr=127.0.0.1:0")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// A store that cannot be reached: the line is logged before it is opened.
	out, err := exec.Command(bin, "serve", "--addr", "127.0.0.1:0",
		"--store", "postgres://sluice:s3cret@127.0.0.1:1/db?password=s3cret2&sslpassword=s3cret3&sslmode=disable").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve with an unreachable store: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `msg="sluice starting" `+quoted+" store=") ||
		!strings.Contains(string(out), "store=\"postgres://sluice:xxxxx@127.0.0.1:1/db?password=xxxxx&sslmode=disable&sslpassword=xxxxx\"") &&
			!strings.Contains(string(out), "store=postgres://sluice:xxxxx@127.0.0.1:1/db?password=xxxxx&sslmode=disable&sslpassword=xxxxx") {
		t.Fatalf("the start line does not name the store without its passwords:\n%s", out)
	}
	if strings.Contains(string(out), "s3cret") {
		t.Fatalf("a password reached the log:\n%s", out)
	}
}
