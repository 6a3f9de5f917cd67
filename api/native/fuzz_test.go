package native

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// stubBackend answers every call at once with canned results, so that the
// fuzz target runs whole routes (decode, validate, call the front, encode)
// without a store. It keeps the last entries sent, to check that message
// contents reach the broker exactly as sent.
type stubBackend struct {
	mu   sync.Mutex
	sent []model.SendEntry
}

func stubQueue(name string) model.Queue {
	c := model.DefaultQueueConfig(strings.HasSuffix(name, ".fifo"))
	if name != "dlq" {
		c.Redrive = &model.RedrivePolicy{DeadLetterTargetARN: "arn:aws:sqs:us-east-1:000000000000:dlq", DeadLetterQueue: "dlq", MaxReceiveCount: 3}
	}
	return model.Queue{ID: 1, Name: name, Config: c}
}

func (*stubBackend) CreateQueue(_ context.Context, spec storage.QueueSpec) (model.Queue, bool, error) {
	return model.Queue{Name: spec.Name, Config: spec.Config}, true, nil
}
func (*stubBackend) GetQueue(_ context.Context, q model.QueueRef) (model.QueueInfo, error) {
	return model.QueueInfo{Queue: stubQueue(q.Name), Stats: model.QueueStats{Visible: 1, OldestSentAt: time.Unix(1, 0)}}, nil
}
func (*stubBackend) ListQueues(context.Context, string, string, string, int) ([]model.Queue, error) {
	return []model.Queue{stubQueue("dlq"), stubQueue("q")}, nil
}
func (*stubBackend) UpdateQueue(_ context.Context, q model.QueueRef, change model.QueueChange) error {
	_, err := model.ApplyAttributes(stubQueue(q.Name).Config, change.Attributes)
	return err
}
func (*stubBackend) DeleteQueue(context.Context, model.QueueRef) error { return nil }
func (*stubBackend) PurgeQueue(context.Context, model.QueueRef, time.Duration) error {
	return nil
}
func (s *stubBackend) Send(_ context.Context, q model.QueueRef, es []model.SendEntry) ([]model.SendResult, error) {
	s.mu.Lock()
	s.sent = append([]model.SendEntry(nil), es...)
	s.mu.Unlock()
	cfg := stubQueue(q.Name).Config
	rs := make([]model.SendResult, len(es))
	for i := range es {
		rs[i] = model.SendResult{ID: es[i].ID, MessageID: model.NewMessageID(), Err: model.ValidateSendEntry(cfg, &es[i])}
	}
	return rs, nil
}
func (*stubBackend) Receive(context.Context, model.ReceiveRequest) ([]model.Delivery, error) {
	return []model.Delivery{{Receipt: "r", Message: model.Message{ID: "m", Body: "b\r", SentAt: time.Unix(1, 0),
		Attributes: map[string]model.MessageAttribute{
			"a": {DataType: "Binary", BinaryValue: []byte{1}}, model.MsgAttrPriority: {DataType: "Number", StringValue: "x"},
		}}}}, nil
}
func (*stubBackend) Delete(_ context.Context, _ model.QueueRef, rs []model.Receipt, _ []*string) ([]model.LeaseOutcome, error) {
	return make([]model.LeaseOutcome, len(rs)), nil
}
func (*stubBackend) ChangeVisibility(_ context.Context, _ model.QueueRef, cs []model.VisibilityChange) ([]model.LeaseOutcome, error) {
	out := make([]model.LeaseOutcome, len(cs))
	for i := range out {
		out[i] = model.LeaseOutcome(i % 4)
	}
	return out, nil
}
func (*stubBackend) Browse(context.Context, model.QueueRef, model.BrowseRequest) (model.BrowsePage, error) {
	return model.BrowsePage{Messages: []model.BrowsedMessage{{Message: model.Message{ID: "m", DeadLetterSource: "q"}, State: model.StateDelayed, VisibleAt: time.Unix(2, 0)}}, Next: "n"}, nil
}
func (*stubBackend) LookupMessage(context.Context, model.QueueRef, string) (model.MessageLookup, error) {
	return model.MessageLookup{}, nil
}
func (*stubBackend) DeleteMessages(_ context.Context, _ model.QueueRef, ids []string) ([]bool, error) {
	return make([]bool, len(ids)), nil
}
func (*stubBackend) StartMoveTask(_ context.Context, req model.MoveTaskRequest) (model.MoveTask, error) {
	return model.MoveTask{ID: "t", Source: req.Source, Destination: req.Destination, Status: model.MoveTaskRunning}, nil
}
func (*stubBackend) ListMoveTasks(context.Context, model.QueueRef, int) ([]model.MoveTask, error) {
	return []model.MoveTask{{ID: "t", Source: "dlq", Destination: "q", Status: model.MoveTaskCompleted}}, nil
}
func (*stubBackend) CancelMoveTask(context.Context, model.QueueRef, string) (model.MoveTask, error) {
	return model.MoveTask{}, nil
}
func (*stubBackend) CreateSchedule(_ context.Context, sch model.Schedule) (model.Schedule, bool, error) {
	return sch, true, nil
}
func (*stubBackend) GetSchedule(_ context.Context, ref model.ScheduleRef) (model.Schedule, error) {
	return model.Schedule{Name: ref.Name, Queue: "q", Spec: "@daily", TimeZone: "UTC", Missed: model.MissedSkip}, nil
}
func (*stubBackend) ListSchedules(context.Context, string, string, string, int) ([]model.Schedule, error) {
	return []model.Schedule{{Name: "s", Queue: "q", Spec: "@daily", TimeZone: "UTC", Missed: model.MissedSkip}}, nil
}
func (*stubBackend) SetSchedulePaused(_ context.Context, ref model.ScheduleRef, paused bool) (model.Schedule, error) {
	return model.Schedule{Name: ref.Name, Paused: paused}, nil
}
func (*stubBackend) DeleteSchedule(context.Context, model.ScheduleRef) error { return nil }
func (*stubBackend) Close() error                                            { return nil }

// Receipts signs the stub's receipt handles with a fixed key.
func (*stubBackend) RecordConsumers(context.Context, string, []model.ConsumerRecord, time.Duration) error {
	return nil
}
func (*stubBackend) ListConsumers(context.Context, model.QueueRef) ([]model.ConsumerInfo, error) {
	return nil, nil
}
func (*stubBackend) ListQueueStats(context.Context, string) ([]model.QueueInfo, error) {
	return nil, nil
}
func (*stubBackend) Clock() model.Clock                   { return model.RealClock{} }
func (*stubBackend) Failed() <-chan struct{}              { return nil }
func (*stubBackend) Syncs() (uint64, bool)                { return 0, false }
func (*stubBackend) Ping(context.Context) error           { return nil }
func (*stubBackend) PoolStats() (model.PoolStats, bool)   { return model.PoolStats{}, false }
func (*stubBackend) Backups() bool                        { return false }
func (*stubBackend) Backup(context.Context, string) error { return model.BackupsUnsupportedError() }
func (*stubBackend) Receipts() *model.ReceiptCodec        { return stubReceipts }

var stubReceipts, _ = model.NewReceiptCodec(make([]byte, model.ReceiptKeySize))

// FuzzNativeRequest throws bytes at the routes that decode a body or a
// query: whatever comes, a route answers a 2xx or a 4xx with this API's
// error shape (never a 5xx: with this backend only a bug gives one, a
// panic among them), and message contents reach the broker as sent.
func FuzzNativeRequest(f *testing.F) {
	backend := &stubBackend{}
	front, err := broker.New(backend, broker.Config{})
	if err != nil {
		f.Fatal(err)
	}
	h := New(front, Config{MaxBodyBytes: 64 << 10})
	targets := []struct{ method, path string }{
		{"POST", "/v1/queues/q/messages"},
		{"POST", "/v1/queues/q/messages/batch"},
		{"POST", "/v1/queues/q/receive"},
		{"POST", "/v1/queues/q/nack"},
		{"POST", "/v1/queues/q/extend"},
		{"POST", "/v1/queues/q/ack"},
		{"POST", "/v1/queues"},
		{"PATCH", "/v1/queues/q"},
		{"POST", "/v1/queues/q/dead-letters/replay"},
		{"POST", "/v1/queues/q/messages/delete"},
		{"GET", "/v1/queues/q/messages"},
		{"GET", "/v1/queues"},
		{"POST", "/v1/schedules"},
		{"GET", "/v1/schedules"},
	}
	for i, s := range []string{
		`{"body":"x","attributes":{"a":{"type":"Binary","value":"AAEC"},"n":{"type":"Number","value":1.5e3}},"priority":3,"deliverAt":"2030-01-01T00:00:00Z"}`,
		`{"messages":[{"id":"a","body":"b"},{"id":"a","body":"\ud800"}]}`,
		`{"max":10,"waitSeconds":0,"visibilitySeconds":99999999999999999999}`,
		`{"entries":[{"receipt":"r","reason":"x","delaySeconds":-1},{"receipt":"s"}]}`,
		`{"receipt":"AQIEAdXy63I","visibilitySeconds":5}`,
		`{"receipt":"r","entries":[]}`,
		`{"name":"q","attributes":{"VisibilityTimeout":"30"},"tags":{"k":"v"}}`,
		`{"attributes":{"MaxDepth":"-1"}}`,
		`{"ids":["m"],"body":"new","attributes":{"k":{"type":"String","value":"v"}},"maxPerSecond":1}`,
		`{"ids":[]}`,
		``,
		`[]`,
		`{"name":"s","queue":"q","schedule":"*/5 * * * *","timeZone":"Europe/Berlin","missed":"once","message":{"body":"x","priority":1}}`,
	} {
		f.Add(uint8(i), "limit=5&order=newest&attribute=a&value=1", []byte(s))
	}
	f.Add(uint8(0), "", []byte("{\"body\":\"a\xffb\"}"))
	f.Add(uint8(0), "x=%zz", []byte(`{"body":"\ud83d\ude00\\ud800"}`))
	f.Add(uint8(10), "limit=0&cursor=&order=sideways", []byte(nil))
	// Hostile shapes (issue 12): past the array bound, deep nesting, a
	// receipt handle with a line break inside.
	f.Add(uint8(1), "", []byte(`{"messages":[`+strings.Repeat(`{},`, apicommon.MaxJSONArray)+`{}]}`))
	f.Add(uint8(9), "", []byte(strings.Repeat(`{"ids":[`, 200)))
	f.Add(uint8(5), "", []byte(`{"receipt":"AgeAgICAgC\r\nADZn2myroFVbvvLN00c3CdIg"}`))
	f.Fuzz(func(t *testing.T, route uint8, query string, body []byte) {
		target := targets[int(route)%len(targets)]
		req := httptest.NewRequest(target.method, "/", bytes.NewReader(body))
		req.URL.Path, req.URL.RawQuery = target.path, query
		rec := httptest.NewRecorder()
		backend.mu.Lock()
		backend.sent = nil
		backend.mu.Unlock()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s?%s %q: status %d: %s", target.method, target.path, query, body, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusNoContent {
			return
		}
		var answer map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("answer %d is not a JSON object: %s", rec.Code, rec.Body)
		}
		if rec.Code >= 400 && (answer["code"] == "" || answer["message"] == "") {
			t.Fatalf("error answer without code or message: %s", rec.Body)
		}
		// Contents are refused or taken exactly: U+FFFD only if it was sent.
		sentFFFD := bytes.Contains(body, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))
		backend.mu.Lock()
		defer backend.mu.Unlock()
		for _, e := range backend.sent {
			if strings.Contains(e.Body, "\uFFFD") && !sentFFFD {
				t.Fatalf("body %q holds U+FFFD that the request %q did not send", e.Body, body)
			}
			for k, a := range e.Attributes {
				if strings.Contains(a.StringValue, "\uFFFD") && !sentFFFD {
					t.Fatalf("attribute %s %q holds U+FFFD that the request %q did not send", k, a.StringValue, body)
				}
			}
		}
	})
}
