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

// TestBackupIsTheOwnAccounts: a backup copies the whole store, every
// account's queues, so only the broker's own account may take one; a key
// of another account is refused (403 access_denied) and no backup is
// written.
func TestBackupIsTheOwnAccounts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	own := e.b.AccountID()
	call := func(caller *broker.Caller, name string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest("POST", "/v1/backups", strings.NewReader(`{"name":"`+name+`"}`))
		r.Header.Set("Content-Type", "application/json")
		if caller != nil {
			r = r.WithContext(broker.WithCaller(context.Background(), *caller))
		}
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	if code, out := call(&broker.Caller{Authenticated: true, Account: "222222222222"}, "theirs"); code != http.StatusForbidden || out["code"] != "access_denied" {
		t.Fatalf("a key of another account takes a backup: %d %v", code, out)
	}
	if code, out := call(&broker.Caller{Authenticated: true, Account: own}, "mine"); code != http.StatusCreated {
		t.Fatalf("a key of the broker's own account: %d %v", code, out)
	}
	if code, out := call(nil, "open"); code != http.StatusCreated {
		t.Fatalf("without authentication: %d %v", code, out)
	}
}
