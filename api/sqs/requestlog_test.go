package sqs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// logSink collects slog records as JSON, safe for concurrent handlers.
type logSink struct{ testutil.Buffer }

// records returns the records logged so far with the given message.
func (s *logSink) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// find returns the record with the given action, failing t when there is not
// exactly one.
func find(t *testing.T, recs []map[string]any, action string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, r := range recs {
		if r["action"] == action {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d records of %s in %v", len(found), action, recs)
	}
	return found[0]
}

// failingBackend fails PurgeQueue with an error that is no broker sentinel:
// an internal failure, answered 500.
type failingBackend struct{ storage.Backend }

func (failingBackend) PurgeQueue(context.Context, model.QueueRef, time.Duration) error {
	return errors.New("disk on fire")
}

// TestRequestLog: every request gets a debug record with its action, queue,
// HTTP status and duration, in both protocols; a 5xx gets an error record
// with the error.
func TestRequestLog(t *testing.T) {
	t.Parallel()
	sink := &logSink{}
	logger := slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	front, client, url := wrapped(t, func(b storage.Backend) storage.Backend { return failingBackend{b} }, sqs.Config{Logger: logger})
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("logged")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: q.QueueUrl}); err == nil {
		t.Fatal("PurgeQueue of the failing backend succeeded")
	}
	form := func(body string) {
		resp, err := http.Post(url+"/", "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	form("Action=ReceiveMessage&QueueUrl=" + *q.QueueUrl + "&WaitTimeSeconds=0")
	form("Action=DeleteQueue&QueueUrl=nosuch")

	recs := sink.records(t, "request")
	check := func(action, protocol, queue string, status float64) {
		t.Helper()
		r := find(t, recs, action)
		d, _ := r["duration"].(float64) // nanoseconds in slog's JSON
		if r["level"] != "DEBUG" || r["protocol"] != protocol || r["queue"] != queue || r["status"] != status || d <= 0 || r["request_id"] == "" {
			t.Fatalf("%s record: %v", action, r)
		}
	}
	check("CreateQueue", "json", "logged", 200)
	check("SendMessage", "json", "logged", 200)
	check("ReceiveMessage", "query", "logged", 200)
	check("DeleteQueue", "query", "nosuch", 400)
	if len(recs) != 4 {
		t.Fatalf("%d debug records, want 4 (the 5xx is logged at error level): %v", len(recs), recs)
	}
	failed := find(t, sink.records(t, "request failed"), "PurgeQueue")
	if failed["level"] != "ERROR" || failed["status"] != float64(500) || failed["queue"] != "logged" ||
		!strings.Contains(failed["err"].(string), "disk on fire") {
		t.Fatalf("5xx record: %v", failed)
	}

	// At info level nothing but the 5xx is logged.
	quiet := &logSink{}
	qsrv := httptest.NewServer(sqs.New(front, sqs.Config{Logger: slog.New(slog.NewJSONHandler(quiet, nil))}))
	defer qsrv.Close()
	for _, body := range []string{"Action=ListQueues", "Action=PurgeQueue&QueueUrl=logged"} {
		resp, err := http.Post(qsrv.URL+"/", "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := len(quiet.records(t, "request")); n != 0 {
		t.Fatalf("%d debug records at info level", n)
	}
	find(t, quiet.records(t, "request failed"), "PurgeQueue")
}
