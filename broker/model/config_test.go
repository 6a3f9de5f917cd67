package model

import (
	"testing"
	"time"
)

func TestParseAttributes(t *testing.T) {
	t.Parallel()
	c, err := ParseAttributes("q", map[string]string{"VisibilityTimeout": "60", "RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":"3"}`})
	if err != nil {
		t.Fatal(err)
	}
	if c.VisibilityTimeout != time.Minute || c.Redrive.DeadLetterQueue != "dlq" || c.Redrive.MaxReceiveCount != 3 {
		t.Fatalf("config %+v", c)
	}
	if got := c.Attributes()["RedrivePolicy"]; got != `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":3}` {
		t.Errorf("RedrivePolicy rendered %s", got)
	}
	for _, bad := range []map[string]string{
		{"VisibilityTimeout": "43201"}, {"DelaySeconds": "-1"}, {"MessageRetentionPeriod": "59"},
		{"MaximumMessageSize": "1048577"}, {"RedrivePolicy": "{"}, {"Foo": "1"}, {"ContentBasedDeduplication": "true"},
	} {
		if _, err := ParseAttributes("q", bad); err == nil {
			t.Errorf("ParseAttributes(%v) accepted", bad)
		}
	}
	if _, err := ParseAttributes("q.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}); err != nil {
		t.Error(err)
	}
	if a := c.ConflictingAttribute("q", map[string]string{"VisibilityTimeout": "60"}); a != "" {
		t.Errorf("conflict on same value: %s", a)
	}
	if a := c.ConflictingAttribute("q", map[string]string{"DelaySeconds": "5"}); a != "DelaySeconds" {
		t.Errorf("conflict = %q", a)
	}
}

func TestValidBodyChars(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"ok\r\n\t": true, "\x00": false, "\uFFFD": true, "\uFFFE": false, "😀": true, "\xff": false} {
		if ValidBodyChars(s) != want {
			t.Errorf("ValidBodyChars(%q) != %v", s, want)
		}
	}
}
