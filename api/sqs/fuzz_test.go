package sqs

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// stubBackend answers every call at once with canned results, so that the
// fuzz targets run whole actions (decode, validate, encode) without a store.
type stubBackend struct{}

func (stubBackend) CreateQueue(_ context.Context, spec storage.QueueSpec) (model.Queue, bool, error) {
	return model.Queue{Name: spec.Name, Config: spec.Config}, true, nil
}
func (stubBackend) GetQueue(_ context.Context, q model.QueueRef) (model.QueueInfo, error) {
	return model.QueueInfo{Queue: model.Queue{Name: q.Name, Config: model.DefaultQueueConfig(false)}}, nil
}
func (stubBackend) ListQueues(context.Context, string, string, string, int) ([]model.Queue, error) {
	return []model.Queue{{Name: "a"}, {Name: "b"}}, nil
}
func (stubBackend) UpdateQueue(_ context.Context, q model.QueueRef, change model.QueueChange) error {
	_, err := model.ApplyAttributes(model.DefaultQueueConfig(false), change.Attributes)
	return err
}
func (stubBackend) DeleteQueue(context.Context, model.QueueRef) error { return nil }
func (stubBackend) PurgeQueue(context.Context, model.QueueRef, time.Duration) error {
	return model.ErrPurgeInProgress
}
func (stubBackend) Send(_ context.Context, _ model.QueueRef, es []model.SendEntry) ([]model.SendResult, error) {
	rs := make([]model.SendResult, len(es))
	for i, e := range es {
		rs[i] = model.SendResult{ID: e.ID, MessageID: "m"}
		if i%2 == 1 {
			rs[i].Err = model.Errorf(model.ErrInvalidMessageContents, "bad")
		}
	}
	return rs, nil
}
func (stubBackend) Receive(context.Context, model.ReceiveRequest) ([]model.Delivery, error) {
	return []model.Delivery{{Receipt: "r", Message: model.Message{ID: "m", Body: "b\r", SentAt: time.Unix(1, 0),
		Attributes: map[string]model.MessageAttribute{"a": {DataType: "Binary", BinaryValue: []byte{1}}}}}}, nil
}
func (stubBackend) Delete(_ context.Context, _ model.QueueRef, rs []model.Receipt, _ []*string) ([]model.LeaseOutcome, error) {
	return make([]model.LeaseOutcome, len(rs)), nil
}
func (stubBackend) ChangeVisibility(_ context.Context, _ model.QueueRef, cs []model.VisibilityChange) ([]model.LeaseOutcome, error) {
	return make([]model.LeaseOutcome, len(cs)), nil
}
func (stubBackend) Browse(context.Context, model.QueueRef, model.BrowseRequest) (model.BrowsePage, error) {
	return model.BrowsePage{}, nil
}
func (stubBackend) LookupMessage(context.Context, model.QueueRef, string) (model.MessageLookup, error) {
	return model.MessageLookup{}, nil
}
func (stubBackend) DeleteMessages(_ context.Context, _ model.QueueRef, ids []string) ([]bool, error) {
	return make([]bool, len(ids)), nil
}
func (stubBackend) RecordConsumers(context.Context, string, []model.ConsumerRecord, time.Duration) error {
	return nil
}
func (stubBackend) ListConsumers(context.Context, model.QueueRef) ([]model.ConsumerInfo, error) {
	return nil, nil
}
func (stubBackend) ListQueueStats(context.Context, string) ([]model.QueueInfo, error) {
	return nil, nil
}
func (stubBackend) StartMoveTask(context.Context, model.MoveTaskRequest) (model.MoveTask, error) {
	return model.MoveTask{ID: "t", Status: model.MoveTaskRunning}, nil
}
func (stubBackend) ListMoveTasks(context.Context, model.QueueRef, int) ([]model.MoveTask, error) {
	return []model.MoveTask{{ID: "t", Status: model.MoveTaskCompleted}}, nil
}
func (stubBackend) CancelMoveTask(context.Context, model.QueueRef, string) (model.MoveTask, error) {
	return model.MoveTask{ID: "t", Status: model.MoveTaskCancelling}, nil
}
func (stubBackend) CreateSchedule(_ context.Context, sch model.Schedule) (model.Schedule, bool, error) {
	return sch, true, nil
}
func (stubBackend) GetSchedule(_ context.Context, ref model.ScheduleRef) (model.Schedule, error) {
	return model.Schedule{}, model.ScheduleNotFoundError(ref.Name)
}
func (stubBackend) ListSchedules(context.Context, string, string, string, int) ([]model.Schedule, error) {
	return nil, nil
}
func (stubBackend) SetSchedulePaused(_ context.Context, ref model.ScheduleRef, _ bool) (model.Schedule, error) {
	return model.Schedule{}, model.ScheduleNotFoundError(ref.Name)
}
func (stubBackend) DeleteSchedule(_ context.Context, ref model.ScheduleRef) error {
	return model.ScheduleNotFoundError(ref.Name)
}
func (stubBackend) Clock() model.Clock                   { return model.RealClock{} }
func (stubBackend) Failed() <-chan struct{}              { return nil }
func (stubBackend) Syncs() (uint64, bool)                { return 0, false }
func (stubBackend) Ping(context.Context) error           { return nil }
func (stubBackend) PoolStats() (model.PoolStats, bool)   { return model.PoolStats{}, false }
func (stubBackend) Backups() bool                        { return false }
func (stubBackend) Backup(context.Context, string) error { return model.BackupsUnsupportedError() }
func (stubBackend) Receipts() *model.ReceiptCodec        { return stubReceipts }
func (stubBackend) Close() error                         { return nil }

// stubReceipts signs the stubs' receipt handles with a fixed key.
var stubReceipts, _ = model.NewReceiptCodec(make([]byte, model.ReceiptKeySize))

var fuzzHandler = func() *Handler {
	b, err := broker.New(stubBackend{}, broker.Config{})
	if err != nil {
		panic(err)
	}
	return New(b, Config{})
}()

// The request decoders must never panic, whatever the client sends: each
// fuzz target feeds arbitrary input to every action's decoder and then to
// the queue-name and sender parsing the handler does before any action.

func FuzzQueryDecode(f *testing.F) {
	for _, s := range []string{
		"Action=SendMessage&MessageBody=x&MessageAttribute.1.Name=a&MessageAttribute.1.Value.DataType=String&MessageAttribute.1.Value.StringValue=v",
		"Action=SendMessageBatch&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=b&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.BinaryValue=AAEC",
		"Action=ReceiveMessage&AttributeName.1=All&AttributeName.99999999999=x&MaxNumberOfMessages=abc&WaitTimeSeconds=-1",
		"Action=CreateQueue&QueueName=q&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=30&Tag.1.Key=k&Tag.1.Value=v",
		"Action=DeleteMessageBatch&DeleteMessageBatchRequestEntry.1.Id=a&DeleteMessageBatchRequestEntry..ReceiptHandle=x",
		"Action=ChangeMessageVisibilityBatch&ChangeMessageVisibilityBatchRequestEntry.0.Id=a&ChangeMessageVisibilityBatchRequestEntry.-1.VisibilityTimeout=9e99",
		"QueueUrl=http://h/a/b?x#y&AttributeName.=&AttributeName.1.2=z",
		"%zz&&==&Attribute.1.Name",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		form, _ := url.ParseQuery(s)
		p := newParams(form, form)
		for name, o := range operations {
			in, err := o.fromQuery(p)
			if err == nil && in == nil {
				t.Fatalf("%s: nil input without error", name)
			}
		}
		_, _, _ = queueFromURL(p.str("QueueUrl"))
		_, _ = queueFromPath(p.str("QueueUrl"))
		n := p.num("MaxNumberOfMessages")
		_, _, _ = n.get("MaxNumberOfMessages")
		// The whole request path, as GET on a queue path and as POST on /.
		rec := httptest.NewRecorder()
		if req, err := http.NewRequest(http.MethodGet, "http://h/000000000000/q?"+s, nil); err == nil {
			fuzzHandler.ServeHTTP(rec, req)
		}
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(s))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		fuzzHandler.ServeHTTP(httptest.NewRecorder(), req)
	})
}

func FuzzJSONDecode(f *testing.F) {
	for _, s := range []string{
		`{"QueueUrl":"http://h/000000000000/q","MessageBody":"x","DelaySeconds":"5","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"AAEC"}}}`,
		`{"QueueUrl":"q","Entries":[{"Id":"a","MessageBody":"b"},{"Id":"a","ReceiptHandle":"h","VisibilityTimeout":1e400}]}`,
		`{"QueueName":"q","Attributes":{"VisibilityTimeout":"30"},"tags":{"k":"v"}}`,
		`{"MaxNumberOfMessages":"abc","WaitTimeSeconds":-99999999999999999999,"AttributeNames":["All"]}`,
		`{"MaxResults":null,"NextToken":7}`,
		`[]`, `null`, `"x"`, `{`, ``,
		// Message contents that must be refused, not rewritten to U+FFFD
		// (unpaired surrogates, bytes that are not UTF-8), and valid ones.
		`{"QueueUrl":"q","MessageBody":"a\ud800b"}`, `{"QueueUrl":"q","MessageBody":"\udc00"}`,
		`{"QueueUrl":"q","MessageBody":"\ud800\u0041"}`, `{"QueueUrl":"q","MessageBody":"\ud800\\udc00"}`,
		`{"QueueUrl":"q","MessageBody":"\ud83d\ude00\ufffd"}`, "{\"QueueUrl\":\"q\",\"MessageBody\":\"a\xffb\xed\xa0\x80\"}",
		`{"QueueUrl":"q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"String","StringValue":"\udbff"}}}`,
		`{"QueueUrl":"q","Entries":[{"Id":"a","MessageBody":"\uD800\uDC00"},{"Id":"b","MessageBody":"\ud800"}]}`,
		// Members of the wrong JSON type.
		`{"QueueName":5,"Attributes":{"VisibilityTimeout":30},"tags":[]}`, `{"Entries":{"Id":1},"AttributeNames":"All"}`,
		// Hostile shapes (issue 12): past the array bound, deep nesting, a
		// receipt handle with a line break inside (base64 decoders skip it).
		`{"QueueUrl":"q","Entries":[` + strings.Repeat(`{},`, apicommon.MaxJSONArray) + `{}]}`,
		strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300),
		`{"QueueUrl":"q","ReceiptHandle":"AgeAgICAgC\r\nADZn2myroFVbvvLN00c3CdIg","Entries":[{"Id":"a","ReceiptHandle":"=="}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, o := range operations {
			in, err := o.fromJSON(b)
			if err == nil && in == nil {
				t.Fatalf("%s: nil input without error", name)
			}
			if err == nil {
				checkContentsUnchanged(t, b, in)
			}
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(b)))
			req.Header.Set("X-Amz-Target", "AmazonSQS."+name)
			rec := httptest.NewRecorder()
			fuzzHandler.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s: status %d: %s", name, rec.Code, rec.Body)
			}
		}
	})
}

// checkContentsUnchanged fails t if the decoded message contents of a send
// hold U+FFFD that the raw request did not: the decoder replaced something
// (invalid UTF-8, an unpaired surrogate) instead of keeping it for the
// broker to refuse.
func checkContentsUnchanged(t *testing.T, raw []byte, in any) {
	t.Helper()
	var entries []sendEntry
	switch v := in.(type) {
	case *sendMessageInput:
		entries = []sendEntry{v.sendEntry}
	case *sendMessageBatchInput:
		entries = v.Entries
	default:
		return
	}
	sent := bytes.Contains(raw, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`))
	check := func(what string, s text) {
		// The encoded U+FFFD, not ContainsRune: kept invalid bytes decode
		// as utf8.RuneError too, and keeping them is the point.
		if strings.Contains(string(s), "\uFFFD") && !sent {
			t.Fatalf("%s %q holds U+FFFD that the request %q did not send", what, s, raw)
		}
	}
	for _, e := range entries {
		if e.MessageBody != nil {
			check("MessageBody", *e.MessageBody)
		}
		for k, a := range e.MessageAttributes {
			check("attribute "+k, a.StringValue)
		}
	}
}

// FuzzUnquoteText checks the JSON text decoder against encoding/json: on a
// string literal, wherever unquoteText's result is valid UTF-8 it is exactly
// what encoding/json decodes; where it is not, encoding/json would have
// replaced something by U+FFFD.
func FuzzUnquoteText(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\\u0041\u0041\/\b\f\n\r\t"`,
		"\"\xff\"", "\"\xed\xa0\x80\"", `"\uD83D\uDE00\uFFFD"`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		var want string
		if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' || json.Unmarshal(lit, &want) != nil {
			return // not exactly a string literal (UnmarshalJSON gets no surrounding space)
		}
		got := unquoteText(lit)
		if utf8.ValidString(got) {
			if got != want {
				t.Fatalf("unquoteText(%q) = %q, encoding/json %q", lit, got, want)
			}
		} else if !strings.Contains(want, "\uFFFD") {
			t.Fatalf("unquoteText(%q) = %q is not UTF-8, yet encoding/json decoded %q without a replacement", lit, got, want)
		}
	})
}
