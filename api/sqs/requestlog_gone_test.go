package sqs_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker/storage"
)

// A request whose client went away (its context cancelled during a long
// poll) is logged at debug level as abandoned, not as an error.
func TestRequestLogClientGone(t *testing.T) {
	t.Parallel()
	front, client, _ := wrapped(t, func(b storage.Backend) storage.Backend { return b }, sqs.Config{})
	q, err := client.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String("gone")})
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{}
	h := sqs.New(front, sqs.Config{Logger: slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is gone before the broker answers
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/",
		strings.NewReader("Action=ReceiveMessage&WaitTimeSeconds=5&QueueUrl="+*q.QueueUrl))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code < 500 {
		t.Fatalf("status %d, want a 5xx for the abandoned request (body %s)", w.Code, w.Body)
	}
	if recs := sink.records(t, "request failed"); len(recs) != 0 {
		t.Fatalf("an abandoned request was logged as a failure: %v", recs)
	}
	rec := find(t, sink.records(t, "request abandoned: the client went away"), "ReceiveMessage")
	if rec["level"] != "DEBUG" || rec["queue"] != "gone" {
		t.Fatalf("abandoned record: %v", rec)
	}
}
