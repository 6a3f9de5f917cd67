package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoBrokerDeps checks that package client (its non-test code) depends,
// even transitively, only on the standard library and on the native API's
// wire types (api/native/wire), besides itself: a program that only talks
// to a broker must not link the broker, Pebble or pgx. And that
// api/native/wire depends on the standard library alone. The stream client
// (client/stream) adds gRPC and protobuf (google.golang.org/...,
// golang.org/x/...) and the generated protocol, and nothing of the broker;
// package worker, whose default source is a stream, adds client and
// client/stream and what they use, and nothing of the broker either.
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
		// thirdParty are the prefixes of the modules besides Sluice's
		// that may be there.
		thirdParty []string
	}{
		{[]string{"../client"}, []string{module + "client", module + "api/native/wire"}, nil},
		{[]string{"../worker"}, []string{module + "worker", module + "client", module + "api/native/wire",
			module + "client/stream", module + "api/stream/streampb"},
			[]string{"google.golang.org/", "golang.org/x/"}},
		{[]string{"../api/native/wire"}, []string{module + "api/native/wire"}, nil},
		{[]string{"../client/stream"}, []string{module + "client/stream", module + "api/stream/streampb"},
			[]string{"google.golang.org/", "golang.org/x/"}},
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
			if !slices.Contains(c.allowed, dep) && !slices.ContainsFunc(c.thirdParty, func(p string) bool { return strings.HasPrefix(dep, p) }) {
				t.Errorf("go list -deps %s lists %s: only the standard library and %s may be there",
					strings.Join(c.dirs, " "), dep, strings.Join(c.allowed, ", "))
			}
		}
	}
}
