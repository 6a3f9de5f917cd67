package main

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

func TestCLIAccessKey(t *testing.T) {
	t.Parallel()
	keys, err := auth.NewKeys([]auth.Key{{AccessKeyID: "ops", SecretAccessKey: "ops-secret", Account: "123456789012", Allow: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := testbroker.Start(t, testbroker.Config{Server: func(c *server.Config) { c.Keys = keys }})
	runEnv := func(vars map[string]string, args ...string) result {
		var out, errb testutil.Buffer
		env := func(k string) string {
			if k == "SLUICE_URL" {
				return b.URL
			}
			return vars[k]
		}
		code := run(context.Background(), args, env, &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	r := runEnv(nil, "queue", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "--access-key") {
		t.Fatalf("no key: %+v", r)
	}
	for name, c := range map[string]struct {
		vars map[string]string
		args []string
	}{
		"flags":        {nil, []string{"--access-key", "ops", "--secret-key", "ops-secret"}},
		"SLUICE_TOKEN": {map[string]string{"SLUICE_TOKEN": "ops:ops-secret"}, nil},
		"AWS_*":        {map[string]string{"AWS_ACCESS_KEY_ID": "ops", "AWS_SECRET_ACCESS_KEY": "ops-secret"}, nil},
	} {
		if r := runEnv(c.vars, append([]string{"queue", "create", "q-" + strings.ReplaceAll(name, "*", "x")}, c.args...)...); r.code != 0 {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	if r := runEnv(map[string]string{"SLUICE_TOKEN": "ops:wrong-secret"}, "queue", "list"); r.code != 1 || !strings.Contains(r.stderr, "signature_mismatch") {
		t.Fatalf("wrong secret: %+v", r)
	}
	if r := runEnv(nil, "queue", "list", "--access-key", "ops"); r.code != 2 {
		t.Fatalf("id without secret: %+v", r)
	}
	// sluice bench takes the same key: SigV4 for the SQS protocols, a
	// bearer token for native (it once read only the AWS variables).
	for _, proto := range []string{"json", "query", "native"} {
		bench := []string{"bench", "--mode", "drain", "--messages", "40", "--producers", "2", "--consumers", "2",
			"--protocol", proto, "--quiet"}
		if r := runEnv(nil, append(bench, "--access-key", "ops", "--secret-key", "ops-secret")...); r.code != 0 || !strings.Contains(r.stdout, "0 missing") {
			t.Fatalf("bench --protocol %s with the key's flags: %+v", proto, r)
		}
		if r := runEnv(nil, bench...); r.code == 0 {
			t.Fatalf("bench --protocol %s without a key succeeded: %+v", proto, r)
		}
	}
}
