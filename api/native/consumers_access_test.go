package native

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicemq/sluice/broker"
)

// TestConsumersOfTheOwnAccount: the consumer list names the caller's own
// account's queue only, as every native route: account A's stream on its
// "jobs" is listed to A, and B, with no "jobs" of its own, gets 404
// queue_not_found, then an empty list once it has one.
func TestConsumersOfTheOwnAccount(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const a, b = "111111111111", "222222222222"
	as := func(account string) context.Context {
		return broker.WithCaller(context.Background(), broker.Caller{Authenticated: true, Account: account})
	}
	list := func(account string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest("GET", "/v1/queues/jobs/consumers", nil).WithContext(as(account))
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	if _, err := e.b.CreateQueue(as(a), "jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	con, err := e.b.Consume(as(a), broker.ConsumerConfig{Queue: "jobs", ClientName: "a-worker"})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	if code, out := list(a); code != http.StatusOK || len(out["consumers"].([]any)) != 1 {
		t.Fatalf("A lists its jobs' consumers: %d %v, want its stream", code, out)
	}
	if code, out := list(b); code != http.StatusNotFound || out["code"] != "queue_not_found" {
		t.Fatalf("B lists jobs' consumers before it has a jobs: %d %v, want 404 queue_not_found", code, out)
	}
	if _, err := e.b.CreateQueue(as(b), "jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	if code, out := list(b); code != http.StatusOK || len(out["consumers"].([]any)) != 0 {
		t.Fatalf("B lists its own jobs' consumers: %d %v, want none", code, out)
	}
}
