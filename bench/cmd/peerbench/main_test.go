package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/loadgen"
)

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--system", "kafka"}, {"--system", "nats", "--batch", "0"}, {"--system", "nats", "--pid", "x"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "peerbench:") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestJSONSummary runs a short steady load against the local NATS and
// reads the same JSON summary sluice bench prints.
func TestJSONSummary(t *testing.T) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:4222", 2*time.Second)
	if err != nil {
		testutil.Missing(t, "nats", "NATS is not running at 127.0.0.1:4222 (nats-server -js): "+err.Error())
	}
	c.Close()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--system", "nats", "--producers", "2", "--consumers", "2",
		"--duration", "300ms", "--warmup", "0s", "--json", "--quiet"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var s loadgen.Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s.Throughput <= 0 || s.Missing != 0 {
		t.Fatalf("summary %+v (%v)\n%s", s, err, out.String())
	}
}
