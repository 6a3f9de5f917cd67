package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
)

// TestAuthLiveRoutesAreTheOwnAccounts: the dashboard's live routes
// (/v1/stats, /v1/events, /v1/queues/{queue}/history) and the overview show the broker's own
// account's queues, so a key of another account is refused them; a key of
// the broker's own account (--account-id) reads them.
func TestAuthLiveRoutesAreTheOwnAccounts(t *testing.T) {
	e := setup(t, withKeys(t), withDashboard(t), func(c *broker.Config) { c.AccountID = "111111111111" })
	do := func(ctx context.Context, method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, e.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp.StatusCode, "(an event stream)"
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bg := context.Background()
	if status, body := do(bg, http.MethodPost, "/v1/queues", "admin:admin-secret", `{"name":"secret-jobs"}`); status/100 != 2 {
		t.Fatalf("admin create: %d %s", status, body)
	}
	// The sampler reads every second: poll until the owner sees the queue.
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := do(bg, http.MethodGet, "/v1/stats", "admin:admin-secret", "")
		if status == http.StatusOK && strings.Contains(body, "secret-jobs") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the owner's /v1/stats never showed its queue: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond) // polling the sampler's next tick
	}
	if status, body := do(bg, http.MethodGet, "/v1/overview", "admin:admin-secret", ""); status != http.StatusOK {
		t.Errorf("the owner's GET /v1/overview: %d %s", status, body)
	}
	// The receivers of a queue are its account's: another account's key
	// names a queue of its own, which does not exist.
	if status, body := do(bg, http.MethodGet, "/v1/queues/secret-jobs/receivers", "outsider:outsider-secret", ""); status != http.StatusNotFound {
		t.Errorf("GET the receivers with a key of another account: %d %s, want 404", status, body)
	}
	for _, path := range []string{"/v1/stats", "/v1/queues/secret-jobs/history", "/v1/events", "/v1/overview"} {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		status, body := do(ctx, http.MethodGet, path, "outsider:outsider-secret", "")
		cancel()
		if status != http.StatusForbidden || !strings.Contains(body, `"access_denied"`) {
			t.Errorf("GET %s with a key of another account: %d %s, want 403 access_denied", path, status, body)
		}
	}
}
