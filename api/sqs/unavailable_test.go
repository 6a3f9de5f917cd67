package sqs

import (
	"io"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// A store that cannot be reached is a retryable 503 ServiceUnavailable with
// the broker's text, not a 500 InternalFailure (SDKs retry both, but only
// the 503 says what happened); the cause stays out of the answer.
func TestUnavailableIsServiceUnavailable(t *testing.T) {
	err := model.UnavailableError(io.ErrUnexpectedEOF)
	k := kindOf(err)
	if k.status != 503 || k.code != "ServiceUnavailable" {
		t.Fatalf("kind %+v, want 503 ServiceUnavailable", k)
	}
	msg := wireMessage(err, k)
	if !strings.Contains(msg, "cannot reach its store") || strings.Contains(msg, "EOF") {
		t.Fatalf("message %q", msg)
	}
}
