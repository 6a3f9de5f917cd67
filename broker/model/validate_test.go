package model

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Rules that real SQS clients tripped on.

func TestFifoAcceptsDelayZero(t *testing.T) {
	t.Parallel()
	fifo := DefaultQueueConfig(true)
	zero, one := time.Duration(0), time.Second
	if err := ValidateSendEntry(fifo, &SendEntry{Body: "a", GroupID: "g", DedupID: "d", Delay: &zero}); err != nil {
		t.Errorf("DelaySeconds=0 on a FIFO queue: %v", err)
	}
	err := ValidateSendEntry(fifo, &SendEntry{Body: "a", GroupID: "g", DedupID: "d", Delay: &one})
	if !errors.Is(err, ErrInvalidParameterValue) || !strings.Contains(ErrorMessage(err), "DelaySeconds") {
		t.Errorf("DelaySeconds=1 on a FIFO queue: %v", err)
	}
	if err := ValidateSendEntry(DefaultQueueConfig(false), &SendEntry{Body: "a", Delay: &one}); err != nil {
		t.Errorf("DelaySeconds=1 on a standard queue: %v", err)
	}
}

func TestEmptyBatchNamesItsEntry(t *testing.T) {
	t.Parallel()
	want := func(what string, err error, entry string) {
		t.Helper()
		if msg := "There should be at least one " + entry + " in the request."; !errors.Is(err, ErrEmptyBatch) || ErrorMessage(err) != msg {
			t.Errorf("%s: %v, want %q", what, err, msg)
		}
	}
	want("ValidateBatch of DeleteEntry", ValidateBatch([]DeleteEntry{}, func(e DeleteEntry) string { return e.ID }), "DeleteMessageBatchRequestEntry")
	want("ValidateBatch of VisibilityEntry", ValidateBatch([]VisibilityEntry{}, func(e VisibilityEntry) string { return e.ID }), "ChangeMessageVisibilityBatchRequestEntry")
	want("ValidateSendBatch", ValidateSendBatch(nil), "SendMessageBatchRequestEntry")
	want("ValidateBatchIDs", ValidateBatchIDs(DeleteBatchEntry, nil), "DeleteMessageBatchRequestEntry")
}

func TestOneEntryBatchTooLong(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", MaxBatchBytes+1)
	err := ValidateSendBatch([]SendEntry{{ID: "only", Body: big}})
	if !errors.Is(err, ErrBatchRequestTooLong) {
		t.Errorf("one-entry batch of 1 MiB + 1: %v", err)
	}
	if err := ValidateSendBatch([]SendEntry{{ID: "only", Body: big[1:]}}); err != nil {
		t.Errorf("one-entry batch of 1 MiB: %v", err)
	}
	// A plain send (no id) is not a batch: its size is ValidateSendEntry's.
	if err := ValidateSendBatch([]SendEntry{{Body: big}}); err != nil {
		t.Errorf("plain send of 1 MiB + 1 refused as a batch: %v", err)
	}
	err = ValidateSendEntry(DefaultQueueConfig(false), &SendEntry{Body: big})
	if !errors.Is(err, ErrInvalidParameterValue) || !strings.Contains(ErrorMessage(err), "shorter than") {
		t.Errorf("plain send of 1 MiB + 1: %v", err)
	}
}

func TestAttributeNamesAreASCII(t *testing.T) {
	t.Parallel()
	v := MessageAttribute{DataType: "String", StringValue: "v"}
	for _, name := range []string{"öther", "naïve", "日本", "a\u00a0b", "emoji😀", "a\xffb"} {
		err := ValidateMessageAttributes(map[string]MessageAttribute{name: v})
		if want := "Message (user) attribute name '" + name + "' is invalid."; !errors.Is(err, ErrInvalidParameterValue) || ErrorMessage(err) != want {
			t.Errorf("name %q: %v, want %q", name, err, want)
		}
	}
	if err := ValidateMessageAttributes(map[string]MessageAttribute{"Az09_.-x": v}); err != nil {
		t.Errorf("a name of every allowed kind of character: %v", err)
	}
}

func TestPermissionActionLimit(t *testing.T) {
	t.Parallel()
	seven := []string{"SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility", "GetQueueAttributes", "GetQueueUrl", "PurgeQueue"}
	p := Permission{Label: "l", AccountIDs: []string{"111122223333"}, Actions: seven, Resource: "arn:aws:sqs:us-east-1:000000000000:q"}
	if _, err := AddPolicyStatement("", p); err != nil {
		t.Fatalf("7 actions: %v", err)
	}
	p.Actions = append(seven, "ListQueueTags")
	_, err := AddPolicyStatement("", p)
	if !errors.Is(err, ErrOverLimit) || !strings.Contains(ErrorMessage(err), "7") {
		t.Fatalf("8 actions: %v", err)
	}
}

func TestMessageDelay(t *testing.T) {
	t.Parallel()
	std, fifo := DefaultQueueConfig(false), DefaultQueueConfig(true)
	std.Delay, fifo.Delay = 5*time.Second, 5*time.Second
	zero, two := time.Duration(0), 2*time.Second
	for _, c := range []struct {
		what string
		cfg  QueueConfig
		own  *time.Duration
		want time.Duration
	}{
		{"standard, no delay of its own", std, nil, 5 * time.Second},
		{"standard, DelaySeconds=0", std, &zero, 0},
		{"standard, DelaySeconds=2", std, &two, 2 * time.Second},
		{"FIFO, no delay of its own", fifo, nil, 5 * time.Second},
		{"FIFO, DelaySeconds=0", fifo, &zero, 5 * time.Second},
	} {
		if got := MessageDelay(c.cfg, &SendEntry{Delay: c.own}); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}
