package native

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker/model"
)

// Errors the API itself raises (not the broker). They take part in the one
// error table below like the broker's sentinels.
var (
	// errMalformed: a body that is not one JSON value (syntax, trailing
	// data, invalid UTF-8, an unpaired surrogate escape).
	errMalformed = errors.New("malformed JSON")
	// errUnknownField: a JSON member, or a query parameter, the route does
	// not take.
	errUnknownField = errors.New("unknown field")
	// errBadRequest: a member of the wrong JSON type, a value that does not
	// parse (a time, base64), or fields that exclude each other.
	// It is the broker's sentinel, as the envelope rule (model.EnvelopeEntry)
	// lives there.
	errBadRequest = model.ErrInvalidRequest
	// errTooLarge: a body past Config.MaxBodyBytes.
	errTooLarge = errors.New("request entity too large")
	// errNoSuchRoute: a path no route has.
	errNoSuchRoute = errors.New("no such route")
	// errMethodNotAllowed: a route asked with a method it does not take.
	errMethodNotAllowed = errors.New("method not allowed")
	// errMessageNotFound: a delete by id of a message the queue does not hold.
	errMessageNotFound = errors.New("message not found")
	// errInternal: anything unexpected (an error that is no broker sentinel).
	errInternal = errors.New("internal error")
)

// errorKind is how one error shows on the wire.
type errorKind struct {
	code   string
	status int
}

// Error codes that are not in the table, because errors.As rather than a
// sentinel picks them.
const codeQueueFull = "queue_full"

// errorTable maps every broker sentinel, and the API's own errors, to its
// code and HTTP status. It is the only place that decides them. openapi.json
// lists the same codes (ErrorCode); a test checks that they agree.
var errorTable = []struct {
	err  error
	kind errorKind
}{
	{model.ErrQueueDoesNotExist, errorKind{"queue_not_found", http.StatusNotFound}},
	{model.ErrResourceNotFound, errorKind{"not_found", http.StatusNotFound}},
	{errMessageNotFound, errorKind{"message_not_found", http.StatusNotFound}},
	{errNoSuchRoute, errorKind{"no_such_route", http.StatusNotFound}},
	{model.ErrQueueExists, errorKind{"queue_exists", http.StatusConflict}},
	{model.ErrQueueDeletedRecently, errorKind{"queue_deleted_recently", http.StatusConflict}},
	{model.ErrConflict, errorKind{"conflict", http.StatusConflict}},
	{model.ErrPurgeInProgress, errorKind{"purge_in_progress", http.StatusConflict}},
	// A lease that ended: the consumer lost the message to the queue.
	{model.ErrMessageNotInflight, errorKind{"message_not_in_flight", http.StatusConflict}},
	// Another account's queue (the native API names only the caller's own
	// queues, so it answers this only if that ever changes).
	{model.ErrAccessDenied, errorKind{"access_denied", http.StatusForbidden}},
	// Backpressure: a full queue (a *model.DepthError, answered
	// queue_full), too many waiting receives, the in-flight cap. Each is
	// 429 with Retry-After.
	{model.ErrThrottled, errorKind{"throttled", http.StatusTooManyRequests}},
	{model.ErrOverLimit, errorKind{"over_limit", http.StatusTooManyRequests}},
	{model.ErrReceiptHandleInvalid, errorKind{"invalid_receipt", http.StatusBadRequest}},
	{model.ErrInvalidParameterValue, errorKind{"invalid_parameter", http.StatusBadRequest}},
	{model.ErrMissingParameter, errorKind{"missing_parameter", http.StatusBadRequest}},
	{model.ErrInvalidAttributeName, errorKind{"invalid_attribute_name", http.StatusBadRequest}},
	{model.ErrInvalidAttributeValue, errorKind{"invalid_attribute_value", http.StatusBadRequest}},
	{model.ErrInvalidMessageContents, errorKind{"invalid_message_contents", http.StatusBadRequest}},
	{model.ErrEmptyBatch, errorKind{"empty_batch", http.StatusBadRequest}},
	{model.ErrTooManyEntries, errorKind{"too_many_entries", http.StatusBadRequest}},
	{model.ErrBatchIDsNotDistinct, errorKind{"batch_ids_not_distinct", http.StatusBadRequest}},
	{model.ErrInvalidBatchEntryID, errorKind{"invalid_batch_entry_id", http.StatusBadRequest}},
	{model.ErrBatchRequestTooLong, errorKind{"batch_too_long", http.StatusBadRequest}},
	// The server's guard: a browser's cross-site request, a Host not
	// answered to, a dashboard action without its CSRF token.
	{apicommon.ErrRefused, errorKind{"request_refused", http.StatusForbidden}},
	{errMalformed, errorKind{"malformed_json", http.StatusBadRequest}},
	{errUnknownField, errorKind{"unknown_field", http.StatusBadRequest}},
	{errBadRequest, errorKind{"invalid_request", http.StatusBadRequest}},
	{errTooLarge, errorKind{"too_large", http.StatusRequestEntityTooLarge}},
	{errMethodNotAllowed, errorKind{"method_not_allowed", http.StatusMethodNotAllowed}},
	{model.ErrUnsupportedOperation, errorKind{"unsupported", http.StatusNotImplemented}},
	// Authentication (package auth, checked by the server before the
	// handler): 401 with WWW-Authenticate, or 403 for a key whose allow
	// list does not include the call.
	{model.ErrMissingAuthenticationToken, errorKind{"unauthenticated", http.StatusUnauthorized}},
	{model.ErrIncompleteSignature, errorKind{"incomplete_signature", http.StatusUnauthorized}},
	{model.ErrInvalidClientTokenID, errorKind{"invalid_key", http.StatusUnauthorized}},
	{model.ErrSignatureDoesNotMatch, errorKind{"signature_mismatch", http.StatusUnauthorized}},
	{model.ErrRequestExpired, errorKind{"request_expired", http.StatusUnauthorized}},
	// 503: the broker is shutting down (or its store failed): retry, here
	// later or on another broker.
	{model.ErrClosed, errorKind{"unavailable", http.StatusServiceUnavailable}},
	// 503 with Retry-After: the store's disk is below its reserve; sends
	// are refused until space returns, everything else works.
	{model.ErrStoreFull, errorKind{"store_full", http.StatusServiceUnavailable}},
	{errInternal, errorKind{"internal", http.StatusInternalServerError}},
}

// kindOf returns the wire form of err; an error outside the table is
// internal.
func kindOf(err error) errorKind {
	var full *model.DepthError
	if errors.As(err, &full) {
		return errorKind{codeQueueFull, http.StatusTooManyRequests}
	}
	if errors.Is(err, model.ErrUnavailable) {
		err = model.ErrClosed // the same "unavailable" 503: the store is unreachable now
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.kind
		}
	}
	return errorTable[len(errorTable)-1].kind
}

// wireMessage is the user-facing text of err; an internal error's is not
// shown.
func wireMessage(err error, k errorKind) string {
	if k.status == http.StatusInternalServerError {
		return "The broker met an internal error; it is logged. Please try again."
	}
	return model.ErrorMessage(err)
}

// normalize maps context errors (the client went away, the broker is
// draining) and body-size errors to table entries.
func normalize(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errorf(errTooLarge, "The request body is larger than %d bytes.", mbe.Limit)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errorf(model.ErrClosed, "The request was cancelled.")
	}
	return err
}

// errorf is model.Errorf: an error of kind with a message for the user.
func errorf(kind error, format string, args ...any) error {
	return model.Errorf(kind, format, args...)
}

// errorBody is the JSON of an error answer, and of a failed batch entry.
type errorBody = wire.ErrorBody

// errorOf is the wire form of err.
func errorOf(err error) (errorBody, errorKind) {
	err = normalize(err)
	k := kindOf(err)
	return errorBody{Code: k.code, Message: wireMessage(err, k)}, k
}

// ErrorOf is the native API's code and message for err, as its error
// answers carry them: the stream API (api/stream) answers with the same.
func ErrorOf(err error) wire.ErrorBody {
	body, _ := errorOf(err)
	return body
}

// writeError answers err. A 429, and a store_full 503, carry Retry-After: 1
// (seconds).
func (h *Handler) writeError(c *call, err error) {
	c.err = err
	body, k := errorOf(err)
	if k.status == http.StatusTooManyRequests || k.code == "store_full" {
		c.w.Header().Set("Retry-After", strconv.Itoa(1))
	}
	h.writeJSON(c, k.status, body)
}

// WriteError answers err as the native API does, with the code and status
// of the one error table; a 401 carries WWW-Authenticate: Bearer. The
// server uses it for the authentication errors (model.ErrMissingAuthenticationToken,
// …), raised before the request reaches a Handler, and for GET /metrics.
func WriteError(w http.ResponseWriter, err error) {
	body, k := errorOf(err)
	b, _ := json.Marshal(body)
	if k.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(k.status)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON answers v as JSON with the given status.
func (h *Handler) writeJSON(c *call, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a bug gets here (every answer is a plain struct).
		c.err = err
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Code: "internal", Message: wireMessage(err, errorKind{status: status})})
	}
	c.w.Header().Set("Content-Type", "application/json")
	c.w.Header().Set("X-Content-Type-Options", "nosniff")
	c.w.WriteHeader(status)
	_, _ = c.w.Write(append(b, '\n'))
}
