package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestDemoCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"demo", "--addr", "127.0.0.1:0", "--duration", "1500ms"}, func(string) string { return "" }, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("sluice demo exited %d: %s", code, stderr.String())
	}
	for _, want := range []string{"Open the dashboard: http://127.0.0.1:", "/ui/", "What to watch for", "sluice demo: stopped."} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the output does not say %q:\n%s", want, stdout.String())
		}
	}
	if code := run(context.Background(), []string{"demo", "--duration", "-1s"}, func(string) string { return "" }, &stdout, &stderr); code != 2 {
		t.Errorf("--duration -1s: exit %d, want 2", code)
	}
}
