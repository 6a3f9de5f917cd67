package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoBrokerDeps checks that packages client and worker (their non-test
// code) depend, even transitively, only on the standard library and on the
// native API's wire types (api/native/wire), besides themselves: a program
// that only talks to a broker must not link the broker, Pebble or pgx. And
// that api/native/wire depends on the standard library alone.
func TestNoBrokerDeps(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	const module = "github.com/sluicemq/sluice/"
	for _, c := range []struct {
		// dirs are the packages listed; allowed the Sluice packages their
		// dependencies may include (the packages themselves among them).
		dirs, allowed []string
	}{
		{[]string{"../client", "../worker"}, []string{module + "client", module + "worker", module + "api/native/wire"}},
		{[]string{"../api/native/wire"}, []string{module + "api/native/wire"}},
	} {
		// A line a dependency: its import path, and whether the standard
		// library has it.
		args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}"}, c.dirs...)
		out, err := exec.Command(gobin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %v: %v\n%s", c.dirs, err, out)
		}
		var standard, others []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			switch path, std, _ := strings.Cut(line, " "); std {
			case "true":
				standard = append(standard, path)
			default:
				others = append(others, path)
			}
		}
		if len(standard) < 10 || !slices.Contains(others, c.allowed[0]) {
			t.Fatalf("go list -deps %v answered only %s", c.dirs, out)
		}
		for _, dep := range others {
			if !slices.Contains(c.allowed, dep) {
				t.Errorf("go list -deps %s lists %s: only the standard library and %s may be there",
					strings.Join(c.dirs, " "), dep, strings.Join(c.allowed, ", "))
			}
		}
	}
}
