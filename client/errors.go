package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
)

// Error is an error the broker answered: the HTTP status, the API's error
// code (docs/api.md, "Errors") and its message, which names the field or
// value at fault. A failed batch entry's error is an *Error too (Status is
// then the status the code has when a whole request fails).
//
// Match it with errors.Is against the sentinels below, which stand for
// families of codes; Code tells them apart more finely.
type Error struct {
	// Status is the HTTP status (0 for a batch entry whose code the client
	// does not know).
	Status int
	// Code is the API's error code ("queue_full", "invalid_parameter", ...);
	// "" when the answer was not the API's (a proxy's 502, say).
	Code string
	// Message is the broker's explanation.
	Message string
	// RetryAfter is the wait the broker asked for before a retry (its
	// Retry-After header: 1 s on every 429); 0 when it gave none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	if e.Status == 0 {
		return fmt.Sprintf("sluice: %s: %s", code, e.Message)
	}
	return fmt.Sprintf("sluice: %s (%d): %s", code, e.Status, e.Message)
}

// The sentinels: errors.Is(err, ErrQueueFull) is true for an *Error (wrapped
// or not) whose code is in that family. They are never returned bare.
var (
	// ErrQueueNotFound: the queue does not exist (queue_not_found). Create
	// it, or check its name.
	ErrQueueNotFound = errors.New("sluice: queue not found")
	// ErrMessageNotFound: a status or a delete by id of a message the
	// queue does not hold (message_not_found).
	ErrMessageNotFound = errors.New("sluice: message not found")
	// ErrNotFound: another thing that does not exist (not_found: a move
	// task, a schedule).
	ErrNotFound = errors.New("sluice: not found")
	// ErrQueueExists: a create of an existing queue with another attribute
	// value (queue_exists). Update the queue instead, or use another name.
	ErrQueueExists = errors.New("sluice: queue exists with other attributes")
	// ErrQueueDeletedRecently: a create of a queue deleted in the last 60
	// seconds (queue_deleted_recently): wait, then create it.
	ErrQueueDeletedRecently = errors.New("sluice: queue deleted recently")
	// ErrPurgeInProgress: a purge within 60 s of the previous one
	// (purge_in_progress).
	ErrPurgeInProgress = errors.New("sluice: purge in progress")
	// ErrConflict: the request conflicts with the queue's settings
	// (conflict): a dead-letter now, or a look at dead letters, on a queue
	// without a RedrivePolicy; a replay of all dead letters of a dead-letter
	// queue shared with other queues; a create of an existing schedule with
	// other settings.
	ErrConflict = errors.New("sluice: conflicts with the queue's settings")
	// ErrMessageNotInFlight: a control on a lease that has ended
	// (message_not_in_flight): the message went back to the queue and may be
	// delivered again.
	ErrMessageNotInFlight = errors.New("sluice: message not in flight")
	// ErrQueueFull: backpressure (queue_full): the send would take the queue
	// past its MaxDepth (or LowPriorityMaxDepth). Retry later, slow down, or
	// raise the limit. Retried by the client before it is returned.
	ErrQueueFull = errors.New("sluice: queue full")
	// ErrThrottled: too many receives wait at once on the broker
	// (throttled). Retried by the client before it is returned.
	ErrThrottled = errors.New("sluice: throttled")
	// ErrOverLimit: too many messages are in flight (over_limit): settle
	// some first. Retried by the client before it is returned.
	ErrOverLimit = errors.New("sluice: over limit")
	// ErrInvalidParameter: the request is wrong (every 400 code: a field
	// out of range, missing or unknown, malformed JSON, a bad batch, a stale
	// receipt ...); the message names the field. Do not retry as is.
	ErrInvalidParameter = errors.New("sluice: invalid parameter")
	// ErrInvalidReceipt: a receipt that does not decode, or names another
	// queue (invalid_receipt); errors.Is matches ErrInvalidParameter too. A
	// stale receipt (the message was received again since) is
	// invalid_parameter, as in SQS.
	ErrInvalidReceipt = errors.New("sluice: invalid receipt")
	// ErrTooLarge: the request body is past the broker's limit (too_large):
	// send fewer or smaller messages per request.
	ErrTooLarge = errors.New("sluice: request too large")
	// ErrUnsupported: the broker does not provide this (unsupported: its
	// backend lacks it; no_such_route or method_not_allowed: an older broker
	// than this client).
	ErrUnsupported = errors.New("sluice: unsupported")
	// ErrUnavailable: the broker is shutting down, or a proxy in front of it
	// answered 502/503/504 (unavailable): retry later, or on another
	// broker. Retried by the client before it is returned.
	ErrUnavailable = errors.New("sluice: unavailable")
	// ErrUnauthenticated: the broker has access keys and the request had
	// none, or a wrong one (401: unauthenticated, invalid_key,
	// signature_mismatch, request_expired, incomplete_signature). Give one
	// with WithToken.
	ErrUnauthenticated = errors.New("sluice: unauthenticated")
	// ErrAccessDenied: the key may not do this (403 access_denied: its
	// allow list in the broker's keys file lacks it).
	ErrAccessDenied = errors.New("sluice: access denied")
	// ErrInternal: a bug or a store failure in the broker (internal, or
	// another 5xx); the broker's log has the details.
	ErrInternal = errors.New("sluice: internal error")
)

// codes maps each error code of the API to its sentinel.
var codes = map[string]error{
	"queue_not_found":          ErrQueueNotFound,
	"message_not_found":        ErrMessageNotFound,
	"not_found":                ErrNotFound,
	"no_such_route":            ErrUnsupported,
	"method_not_allowed":       ErrUnsupported,
	"unsupported":              ErrUnsupported,
	"queue_exists":             ErrQueueExists,
	"queue_deleted_recently":   ErrQueueDeletedRecently,
	"purge_in_progress":        ErrPurgeInProgress,
	"conflict":                 ErrConflict,
	"message_not_in_flight":    ErrMessageNotInFlight,
	"queue_full":               ErrQueueFull,
	"throttled":                ErrThrottled,
	"over_limit":               ErrOverLimit,
	"invalid_receipt":          ErrInvalidReceipt,
	"invalid_parameter":        ErrInvalidParameter,
	"missing_parameter":        ErrInvalidParameter,
	"malformed_json":           ErrInvalidParameter,
	"unknown_field":            ErrInvalidParameter,
	"invalid_request":          ErrInvalidParameter,
	"invalid_attribute_name":   ErrInvalidParameter,
	"invalid_attribute_value":  ErrInvalidParameter,
	"invalid_message_contents": ErrInvalidParameter,
	"empty_batch":              ErrInvalidParameter,
	"too_many_entries":         ErrInvalidParameter,
	"batch_ids_not_distinct":   ErrInvalidParameter,
	"invalid_batch_entry_id":   ErrInvalidParameter,
	"batch_too_long":           ErrInvalidParameter,
	"too_large":                ErrTooLarge,
	"unavailable":              ErrUnavailable,
	"internal":                 ErrInternal,
	"unauthenticated":          ErrUnauthenticated,
	"invalid_key":              ErrUnauthenticated,
	"signature_mismatch":       ErrUnauthenticated,
	"request_expired":          ErrUnauthenticated,
	"incomplete_signature":     ErrUnauthenticated,
	"access_denied":            ErrAccessDenied,
}

// Is reports whether target is the sentinel of e's code family. A code the
// client does not know (a newer broker's) falls back on the status: 400 is
// ErrInvalidParameter, 404 ErrNotFound, 409 ErrConflict, 413 ErrTooLarge,
// 429 ErrThrottled, 501 ErrUnsupported, 502..504 ErrUnavailable, other 5xx
// ErrInternal.
func (e *Error) Is(target error) bool {
	if s, ok := codes[e.Code]; ok {
		return s == target || s == ErrInvalidReceipt && target == ErrInvalidParameter
	}
	return statusSentinel(e.Status) == target
}

func statusSentinel(status int) error {
	switch {
	case status == http.StatusBadRequest:
		return ErrInvalidParameter
	case status == http.StatusUnauthorized:
		return ErrUnauthenticated
	case status == http.StatusForbidden:
		return ErrAccessDenied
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusConflict:
		return ErrConflict
	case status == http.StatusRequestEntityTooLarge:
		return ErrTooLarge
	case status == http.StatusTooManyRequests:
		return ErrThrottled
	case status == http.StatusNotImplemented:
		return ErrUnsupported
	case status >= 502 && status <= 504:
		return ErrUnavailable
	case status >= 500:
		return ErrInternal
	}
	return nil
}

// entryError is a failed batch entry's error: its code and message, with
// the status the code has as a whole request's answer.
func entryError(b *wire.ErrorBody) error {
	if b == nil {
		return &Error{Code: "internal", Message: "the broker answered a failed entry without its error"}
	}
	return &Error{Status: codeStatus[b.Code], Code: b.Code, Message: b.Message}
}

// codeStatus is each code's HTTP status (docs/api.md's table).
var codeStatus = map[string]int{
	"queue_not_found": 404, "message_not_found": 404, "not_found": 404, "no_such_route": 404,
	"method_not_allowed": 405, "queue_exists": 409, "queue_deleted_recently": 409, "purge_in_progress": 409,
	"conflict": 409, "message_not_in_flight": 409, "too_large": 413,
	"queue_full": 429, "throttled": 429, "over_limit": 429,
	"unsupported": 501, "unavailable": 503, "internal": 500,
	"invalid_receipt": 400, "invalid_parameter": 400, "missing_parameter": 400, "malformed_json": 400,
	"unknown_field": 400, "invalid_request": 400, "invalid_attribute_name": 400, "invalid_attribute_value": 400,
	"invalid_message_contents": 400, "empty_batch": 400, "too_many_entries": 400, "batch_ids_not_distinct": 400,
	"invalid_batch_entry_id": 400, "batch_too_long": 400,
	"unauthenticated": 401, "invalid_key": 401, "signature_mismatch": 401, "request_expired": 401,
	"incomplete_signature": 401, "access_denied": 403,
}
