package sqs_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The rate limits over the wire: a ReceiveMessage on a queue at its
// MaxInFlight or past its MaxReceivesPerSecond answers fewer messages or
// none, never an error (JSON with aws-sdk-go-v2, query with raw form
// requests); bad values are InvalidAttributeValue in each protocol's
// shape, saying what is allowed.

// rateRefusals are bad limit values and what the error must say.
var rateRefusals = []struct {
	attr, value, says string
}{
	{"MaxInFlight", "0", "between 1 and 120000"},
	{"MaxInFlight", "-2", "between 1 and 120000"},
	{"MaxReceivesPerSecond", "-0.5", "above 0 and at most 100000"},
	{"MaxReceivesPerSecond", "0", "above 0 and at most 100000"},
	{"MaxReceivesPerSecond", "250000", "above 0 and at most 100000"},
	{"MaxReceivesPerSecond", "0.1234567", "at most 6 decimal places"},
}

func TestRateLimitsJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	receive := func(url string) int {
		t.Helper()
		out, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		return len(out.Messages)
	}
	send := func(url string, n int) {
		t.Helper()
		for range n {
			if _, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("job")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	capped := e.queue("capped", map[string]string{"MaxInFlight": "2"})
	send(capped, 5)
	if n := receive(capped); n != 2 {
		t.Fatalf("a receive of 10 under MaxInFlight 2 got %d", n)
	}
	if n := receive(capped); n != 0 {
		t.Fatalf("a receive at the cap got %d, want none", n)
	}
	// One message in 1000 s: the first goes, the next waits.
	slow := e.queue("slow", map[string]string{"MaxReceivesPerSecond": "0.001"})
	send(slow, 3)
	if n := receive(slow); n != 1 {
		t.Fatalf("a receive of 10 at 0.001 a second got %d, want 1", n)
	}
	if n := receive(slow); n != 0 {
		t.Fatalf("the next receive got %d, want none", n)
	}

	var badValue *types.InvalidAttributeValue
	for _, c := range rateRefusals {
		_, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &capped,
			Attributes: map[string]string{c.attr: c.value}})
		if !errors.As(err, &badValue) || !strings.Contains(badValue.ErrorMessage(), c.says) || !strings.Contains(badValue.ErrorMessage(), c.attr) {
			t.Errorf("SetQueueAttributes %s=%s: %v, want InvalidAttributeValue naming it and saying %q", c.attr, c.value, err, c.says)
		}
	}
	resp, body := e.post("/", "application/x-amz-json-1.0", "AmazonSQS.CreateQueue",
		`{"QueueName":"neg","Attributes":{"MaxReceivesPerSecond":"-3"}}`)
	expectJSONError(t, resp, body, http.StatusBadRequest, "com.amazonaws.sqs#InvalidAttributeValue", "InvalidAttributeValue")
}

func TestRateLimitsQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.queue("capped", map[string]string{"MaxInFlight": "3"})
	path := "/" + acct + "/capped"
	for range 5 {
		if resp, body := e.form(path, vals("Action", "SendMessage", "MessageBody", "job")); resp.StatusCode != http.StatusOK {
			t.Fatalf("SendMessage: %d %s", resp.StatusCode, body)
		}
	}
	receive := func() int {
		t.Helper()
		resp, body := e.form(path, vals("Action", "ReceiveMessage", "MaxNumberOfMessages", "10"))
		var out struct {
			Messages []struct {
				ID string `xml:"MessageId"`
			} `xml:"ReceiveMessageResult>Message"`
		}
		decode(t, body, "ReceiveMessageResponse", &out)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("ReceiveMessage: %d %s", resp.StatusCode, body)
		}
		return len(out.Messages)
	}
	if n := receive(); n != 3 {
		t.Fatalf("a receive of 10 under MaxInFlight 3 got %d", n)
	}
	if n := receive(); n != 0 {
		t.Fatalf("a receive at the cap got %d, want none", n)
	}
	for _, c := range rateRefusals {
		resp, body := e.form(path, vals("Action", "SetQueueAttributes", "Attribute.1.Name", c.attr, "Attribute.1.Value", c.value))
		if er := expectError(t, resp, body, http.StatusBadRequest, "InvalidAttributeValue"); !strings.Contains(er.Message, c.says) {
			t.Errorf("SetQueueAttributes %s=%s: %q, want it to say %q", c.attr, c.value, er.Message, c.says)
		}
	}
}
