package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/loadgen"
)

func TestBenchSteadyJSON(t *testing.T) {
	e := setupCLI(t)
	r := e.ok("bench", "--mode", "steady", "--producers", "2", "--consumers", "2", "--duration", "500ms",
		"--warmup", "100ms", "--batch", "3", "--pid", strconv.Itoa(os.Getpid()), "--json")
	var s loadgen.Summary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("stdout is not a JSON summary: %v\n%s", err, r.stdout)
	}
	if s.Mode != loadgen.ModeSteady || s.Throughput <= 0 || s.Missing != 0 || s.Duplicates != 0 || s.BrokerPeakRSS <= 0 {
		t.Errorf("summary %+v", s)
	}
}

func TestBenchDrainText(t *testing.T) {
	e := setupCLI(t)
	r := e.ok("bench", "--mode", "drain", "--messages", "200", "--producers", "2", "--consumers", "2", "--protocol", "native", "--quiet")
	for _, want := range []string{"throughput:", "0 missing, 0 duplicates", "native"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	e := setupCLI(t)
	for _, args := range [][]string{{"bench", "--batch", "11"}, {"bench", "--mode", "fast"}, {"bench", "--pid", "x"}, {"bench", "--protocol", "grpc"}} {
		if r := e.run(args...); r.code != 2 || !strings.Contains(r.stderr, "sluice bench:") {
			t.Errorf("%v: code %d stderr %q", args, r.code, r.stderr)
		}
	}
}

func TestBenchNullServer(t *testing.T) {
	e := setupCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- e.runCtx(ctx, "bench", "--null-server", addr) }()
	// Poll until the null server answers, then drive it with the SDK.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("null server never listened: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := e.ok("bench", "--url", "http://"+addr, "--protocol", "sdk", "--producers", "2", "--consumers", "2",
		"--duration", "300ms", "--warmup", "0s", "--quiet")
	if !strings.Contains(r.stdout, "foreign") {
		t.Errorf("summary: %s", r.stdout)
	}
	cancel()
	if r := <-done; r.code != 0 {
		t.Errorf("null server exit %d: %s", r.code, r.stderr)
	}
}
