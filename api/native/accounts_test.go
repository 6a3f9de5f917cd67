package native

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker"
)

// TestAccountsNative: the native API names the caller's own account's
// queues only (its paths carry no account): two accounts each have their
// own "jobs", listings and ARNs, and neither reaches the other's.
func TestAccountsNative(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const a, b = "111111111111", "222222222222"
	call := func(account, method, path, body string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		if account != "" {
			r = r.WithContext(broker.WithCaller(context.Background(), broker.Caller{Authenticated: true, Account: account}))
		}
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	if code, q := call(a, "POST", "/v1/queues", `{"name":"jobs"}`); code != http.StatusOK || q["arn"] != "arn:aws:sqs:us-east-1:"+a+":jobs" {
		t.Fatalf("A creates jobs: %d %v", code, q)
	}
	if code, _ := call(a, "POST", "/v1/queues/jobs/messages", `{"body":"for A"}`); code >= 300 {
		t.Fatalf("A sends: %d", code)
	}
	if code, out := call(b, "GET", "/v1/queues/jobs", ""); code != http.StatusNotFound || out["code"] != "queue_not_found" {
		t.Fatalf("B reads jobs before it has one: %d %v", code, out)
	}
	if code, q := call(b, "POST", "/v1/queues", `{"name":"jobs"}`); code != http.StatusOK || q["arn"] != "arn:aws:sqs:us-east-1:"+b+":jobs" {
		t.Fatalf("B creates jobs: %d %v", code, q)
	}
	for account, want := range map[string]float64{a: 1, b: 0} {
		if _, q := call(account, "GET", "/v1/queues/jobs", ""); q["stats"].(map[string]any)["visible"] != want {
			t.Errorf("%s's jobs: %v, want %v visible", account, q["stats"], want)
		}
	}
	for _, account := range []string{a, b, ""} {
		_, list := call(account, "GET", "/v1/queues", "")
		queues := list["queues"].([]any)
		want := 1
		if account == "" {
			want = 0
		}
		if len(queues) != want {
			t.Errorf("%q lists %v, want %d queue", account, queues, want)
		}
	}
}
