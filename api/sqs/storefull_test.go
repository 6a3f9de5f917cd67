package sqs

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// TestStoreFullIsServiceUnavailable: a send refused for a full disk is the
// 503 ServiceUnavailable every SDK retries, and its message says why (it is
// not hidden as an internal error); an error that is not a sentinel still
// shows nothing internal.
func TestStoreFullIsServiceUnavailable(t *testing.T) {
	t.Parallel()
	err := model.StoreFullError(10<<20, 64<<20)
	k := kindOf(err)
	if k.status != 503 || k.code != "ServiceUnavailable" {
		t.Fatalf("store full: %d %s, want 503 ServiceUnavailable", k.status, k.code)
	}
	if msg := wireMessage(err, k); !strings.Contains(msg, "disk is full") {
		t.Fatalf("store full message %q does not say the disk is full", msg)
	}
	other := errors.New("embedded: every message claimed by this receive has an unreadable body")
	k = kindOf(internal(other))
	if msg := wireMessage(internal(other), k); k.status != 500 || strings.Contains(msg, "unreadable") {
		t.Fatalf("internal error: %d %q", k.status, msg)
	}
}
