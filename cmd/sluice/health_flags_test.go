package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/health"
)

func TestHealthFlags(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	f, err := parseServeFlags(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.thresholds != health.DefaultThresholds() || !f.dashboard {
		t.Errorf("defaults: thresholds %+v dashboard %v, want %+v and true", f.thresholds, f.dashboard, health.DefaultThresholds())
	}
	if f.thresholds.DLQDepthWarning != 1 || f.thresholds.DLQDepthCritical != 100 {
		t.Errorf("default --health-dlq-depth: %d,%d, want 1,100", f.thresholds.DLQDepthWarning, f.thresholds.DLQDepthCritical)
	}
	f, err = parseServeFlags([]string{"--health-depth", "5,50", "--health-age", "10s,0", "--health-dlq-depth", "10,0", "--health-dead-letters", "critical", "--dashboard=false"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := health.Thresholds{DepthWarning: 5, DepthCritical: 50, AgeWarning: 10 * time.Second, DLQDepthWarning: 10, DeadLetters: health.DeadLettersCritical}
	if f.thresholds != want || f.dashboard {
		t.Errorf("flags: thresholds %+v dashboard %v, want %+v and false", f.thresholds, f.dashboard, want)
	}
	env := map[string]string{"SLUICE_HEALTH_DEPTH": "7,70", "SLUICE_HEALTH_DLQ_DEPTH": "3,30", "SLUICE_DASHBOARD": "false"}
	f, err = parseServeFlags(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil || f.thresholds.DepthWarning != 7 || f.thresholds.DLQDepthCritical != 30 || f.dashboard {
		t.Errorf("environment: %+v %v, %v", f.thresholds, f.dashboard, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--health-depth", "1000"}, "--health-depth"},
		{[]string{"--health-depth", "10,5"}, "below the warning depth"},
		{[]string{"--health-depth", "a,b"}, "whole numbers"},
		{[]string{"--health-age", "5m,1m"}, "below the warning age"},
		{[]string{"--health-age", "1,2"}, "durations"},
		{[]string{"--health-age", "500ms,1m"}, "at least 1s"},
		{[]string{"--health-dead-letters", "loud"}, "warning, critical or ignore"},
		{[]string{"--health-dlq-depth", "100"}, "--health-dlq-depth"},
		{[]string{"--health-dlq-depth", "100,1"}, "below the warning depth"},
	} {
		_, err := parseServeFlags(c.args, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseServeFlags(%q) = %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
