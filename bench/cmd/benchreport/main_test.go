package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/loadgen"
)

// TestReportSplicesTargets writes two runs of one load, renders the report
// into a file with hand-written text around the markers, and checks the
// target's ratio and that the hand-written text is kept.
func TestReportSplicesTargets(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, s loadgen.Summary) {
		b, _ := json.Marshal(s)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("1.json", loadgen.Summary{Mode: loadgen.ModeProduce, Throughput: 8000, BrokerCPUPerMsg: 10})
	put("2.json", loadgen.Summary{Mode: loadgen.ModeProduce, Throughput: 1000, BrokerCPUPerMsg: 50})
	index := "produce-batch\tsluice\tSluice\t1.json\t\nproduce-batch\trabbitmq\tRabbitMQ\t2.json\t\nproduce-batch\tnats-lazy\tNATS\t3.json\tnot reachable\n"
	if err := os.WriteFile(filepath.Join(dir, "index.tsv"), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.txt"), []byte("machine=2 cores\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "benchmarks.md")
	hand := "# Benchmarks\n\nbefore\n\n" + beginMarker + "\nold\n" + endMarker + "\n\nafter\n"
	if err := os.WriteFile(out, []byte(hand), 0o644); err != nil {
		t.Fatal(err)
	}
	var gen bytes.Buffer
	write(&gen, r)
	if err := splice(out, gen.Bytes()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	got := string(b)
	for _, want := range []string{"before\n", "\nafter\n", "8.00× (8000.0 vs 1000.0 msgs/s) | **met**", "| NATS | not reachable |", "machine: 2 cores"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\nold\n") || strings.Count(got, beginMarker) != 1 {
		t.Errorf("the old generated section was not replaced:\n%s", got)
	}
}
