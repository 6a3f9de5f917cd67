package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/live"
)

func TestHealthFlags(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	f, err := parseServeFlags(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.thresholds != live.DefaultThresholds() || !f.dashboard {
		t.Errorf("defaults: thresholds %+v dashboard %v, want %+v and true", f.thresholds, f.dashboard, live.DefaultThresholds())
	}
	f, err = parseServeFlags([]string{"--health-depth", "5,50", "--health-age", "10s,0", "--health-dead-letters", "critical", "--dashboard=false"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := live.Thresholds{DepthWarning: 5, DepthCritical: 50, AgeWarning: 10 * time.Second, DeadLetters: live.DeadLettersCritical}
	if f.thresholds != want || f.dashboard {
		t.Errorf("flags: thresholds %+v dashboard %v, want %+v and false", f.thresholds, f.dashboard, want)
	}
	env := map[string]string{"SLUICE_HEALTH_DEPTH": "7,70", "SLUICE_DASHBOARD": "false"}
	f, err = parseServeFlags(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil || f.thresholds.DepthWarning != 7 || f.dashboard {
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
	} {
		_, err := parseServeFlags(c.args, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseServeFlags(%q) = %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
