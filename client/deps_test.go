package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoBrokerDeps checks that packages client and worker (their non-test
// code) import neither the broker nor a storage driver, even transitively:
// a program that only talks to a broker must not link Pebble or pgx.
func TestNoBrokerDeps(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "../client", "../worker").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/sluicemq/sluice/broker",
		"github.com/cockroachdb/pebble",
		"github.com/jackc/pgx",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps answered only %v", deps)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("client or worker depends on %s", dep)
			}
		}
	}
}
