package client_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicemq/sluice/client"
)

// Every code of the API matches its family's sentinel, and only it; a code
// the client does not know falls back on the status.
func TestErrorIs(t *testing.T) {
	t.Parallel()
	sentinels := []error{
		client.ErrQueueNotFound, client.ErrMessageNotFound, client.ErrNotFound, client.ErrQueueExists,
		client.ErrQueueDeletedRecently, client.ErrPurgeInProgress, client.ErrConflict, client.ErrMessageNotInFlight,
		client.ErrQueueFull, client.ErrThrottled, client.ErrOverLimit, client.ErrInvalidParameter, client.ErrInvalidReceipt,
		client.ErrTooLarge, client.ErrUnsupported, client.ErrUnavailable, client.ErrInternal,
	}
	for _, tc := range []struct {
		status int
		code   string
		want   []error
	}{
		{404, "queue_not_found", []error{client.ErrQueueNotFound}},
		{404, "message_not_found", []error{client.ErrMessageNotFound}},
		{404, "not_found", []error{client.ErrNotFound}},
		{404, "no_such_route", []error{client.ErrUnsupported}},
		{405, "method_not_allowed", []error{client.ErrUnsupported}},
		{409, "queue_exists", []error{client.ErrQueueExists}},
		{409, "queue_deleted_recently", []error{client.ErrQueueDeletedRecently}},
		{409, "purge_in_progress", []error{client.ErrPurgeInProgress}},
		{409, "conflict", []error{client.ErrConflict}},
		{409, "message_not_in_flight", []error{client.ErrMessageNotInFlight}},
		{429, "queue_full", []error{client.ErrQueueFull}},
		{429, "throttled", []error{client.ErrThrottled}},
		{429, "over_limit", []error{client.ErrOverLimit}},
		{400, "invalid_receipt", []error{client.ErrInvalidReceipt, client.ErrInvalidParameter}},
		{400, "invalid_parameter", []error{client.ErrInvalidParameter}},
		{400, "missing_parameter", []error{client.ErrInvalidParameter}},
		{400, "malformed_json", []error{client.ErrInvalidParameter}},
		{400, "unknown_field", []error{client.ErrInvalidParameter}},
		{400, "invalid_request", []error{client.ErrInvalidParameter}},
		{400, "invalid_attribute_name", []error{client.ErrInvalidParameter}},
		{400, "invalid_attribute_value", []error{client.ErrInvalidParameter}},
		{400, "invalid_message_contents", []error{client.ErrInvalidParameter}},
		{400, "empty_batch", []error{client.ErrInvalidParameter}},
		{400, "too_many_entries", []error{client.ErrInvalidParameter}},
		{400, "batch_ids_not_distinct", []error{client.ErrInvalidParameter}},
		{400, "invalid_batch_entry_id", []error{client.ErrInvalidParameter}},
		{400, "batch_too_long", []error{client.ErrInvalidParameter}},
		{413, "too_large", []error{client.ErrTooLarge}},
		{501, "unsupported", []error{client.ErrUnsupported}},
		{503, "unavailable", []error{client.ErrUnavailable}},
		{500, "internal", []error{client.ErrInternal}},
		// Codes of a newer broker, and answers that are not the API's.
		{400, "some_new_code", []error{client.ErrInvalidParameter}},
		{404, "", []error{client.ErrNotFound}},
		{409, "x", []error{client.ErrConflict}},
		{429, "x", []error{client.ErrThrottled}},
		{502, "", []error{client.ErrUnavailable}},
		{504, "", []error{client.ErrUnavailable}},
		{500, "", []error{client.ErrInternal}},
		{418, "", nil},
	} {
		err := fmt.Errorf("wrapped: %w", &client.Error{Status: tc.status, Code: tc.code, Message: "m"})
		for _, s := range sentinels {
			want := false
			for _, w := range tc.want {
				want = want || w == s
			}
			if errors.Is(err, s) != want {
				t.Errorf("%d %s: errors.Is(%v) = %v", tc.status, tc.code, s, !want)
			}
		}
	}
	e := &client.Error{Status: 429, Code: "queue_full", Message: "Queue q is full (depth 2)."}
	if e.Error() != "sluice: queue_full (429): Queue q is full (depth 2)." {
		t.Errorf("Error() = %q", e.Error())
	}
	if e := (&client.Error{Status: 502, Message: "bad gateway"}); e.Error() != "sluice: Bad Gateway (502): bad gateway" {
		t.Errorf("Error() = %q", e.Error())
	}
}
