package sqs

import (
	"context"
	"errors"
	"net/http"

	"github.com/sluicemq/sluice/api/apicommon"
	"github.com/sluicemq/sluice/broker/model"
)

// Errors the API itself raises (not the broker). They take part in the one
// error table below like the broker's sentinels.
var (
	// errInvalidAction: a query request whose Action is not an SQS action, or an
	// account-level action sent to a queue path.
	errInvalidAction = errors.New("invalid action")
	// errUnknownOperation: a JSON request whose X-Amz-Target names no SQS
	// operation, or a request that names no action at all.
	errUnknownOperation = errors.New("unknown operation")
	// errTooLarge: a request body past Config.MaxBodyBytes.
	errTooLarge = errors.New("request entity too large")
	// errSerialization: a JSON request whose member has the wrong JSON type
	// (a number where a string belongs, a string where a list belongs).
	errSerialization = errors.New("serialization")
	// errInternal: anything unexpected (a backend error that is not a broker sentinel).
	errInternal = errors.New("internal failure")
)

// errorKind is how one error shows on the wire in both protocols.
type errorKind struct {
	// shape is the JSON __type, fully qualified (com.amazonaws.sqs#X for the
	// modeled errors, com.amazon.coral.service#XException for the common ones).
	shape string
	// code is the query-protocol <Code> and the x-amzn-query-error header's code.
	code string
	// status is the HTTP status in both protocols.
	status int
	// message replaces the error's own text in the query protocol when set
	// (real SQS words some query messages differently).
	queryMessage string
}

const (
	modeled = "com.amazonaws.sqs#"
	common  = "com.amazon.coral.service#"
)

// errorTable maps every broker sentinel, and the API's own errors, to its SQS
// error. It is the only place that decides codes and statuses.
var errorTable = []struct {
	err  error
	kind errorKind
}{
	{model.ErrQueueDoesNotExist, errorKind{modeled + "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", 400,
		"The specified queue does not exist for this wsdl version."}},
	{model.ErrQueueExists, errorKind{modeled + "QueueNameExists", "QueueAlreadyExists", 400, ""}},
	{model.ErrQueueDeletedRecently, errorKind{modeled + "QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently", 400, ""}},
	{model.ErrPurgeInProgress, errorKind{modeled + "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress", 403, ""}},
	{model.ErrOverLimit, errorKind{modeled + "OverLimit", "OverLimit", 403, ""}},
	{model.ErrReceiptHandleInvalid, errorKind{modeled + "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404, ""}},
	{model.ErrMessageNotInflight, errorKind{modeled + "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", 400, ""}},
	{model.ErrInvalidParameterValue, errorKind{common + "InvalidParameterValueException", "InvalidParameterValue", 400, ""}},
	{model.ErrMissingParameter, errorKind{common + "MissingRequiredParameterException", "MissingParameter", 400, ""}},
	{model.ErrInvalidAttributeName, errorKind{modeled + "InvalidAttributeName", "InvalidAttributeName", 400, ""}},
	{model.ErrInvalidAttributeValue, errorKind{modeled + "InvalidAttributeValue", "InvalidAttributeValue", 400, ""}},
	{model.ErrInvalidMessageContents, errorKind{modeled + "InvalidMessageContents", "InvalidMessageContents", 400, ""}},
	{model.ErrEmptyBatch, errorKind{modeled + "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", 400, ""}},
	{model.ErrTooManyEntries, errorKind{modeled + "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400, ""}},
	{model.ErrBatchIDsNotDistinct, errorKind{modeled + "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, ""}},
	{model.ErrInvalidBatchEntryID, errorKind{modeled + "InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", 400, ""}},
	{model.ErrBatchRequestTooLong, errorKind{modeled + "BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", 400, ""}},
	{model.ErrUnsupportedOperation, errorKind{modeled + "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", 400, ""}},
	{model.ErrInvalidRequest, errorKind{common + "InvalidParameterValueException", "InvalidParameterValue", 400, ""}},
	{model.ErrConflict, errorKind{common + "InvalidParameterValueException", "InvalidParameterValue", 400, ""}},
	{model.ErrResourceNotFound, errorKind{modeled + "ResourceNotFoundException", "ResourceNotFoundException", 404, ""}},
	// RequestThrottled is in the SDKs' list of retryable throttle codes, so
	// clients back off and retry (also used when the waiting-receive cap is hit).
	{model.ErrThrottled, errorKind{modeled + "RequestThrottled", "RequestThrottled", 403, ""}},
	// 503 is retried by every SDK: a shutting-down broker sends clients elsewhere or later.
	{model.ErrClosed, errorKind{common + "ServiceUnavailableException", "ServiceUnavailable", 503, ""}},
	// Authentication (package auth, checked by the server before the
	// handler): AWS's common errors, with the query code in
	// x-amzn-query-error, which the SDKs read.
	{model.ErrMissingAuthenticationToken, errorKind{common + "MissingAuthenticationTokenException", "MissingAuthenticationToken", 403, ""}},
	{model.ErrIncompleteSignature, errorKind{common + "IncompleteSignatureException", "IncompleteSignature", 400, ""}},
	{model.ErrInvalidClientTokenID, errorKind{common + "UnrecognizedClientException", "InvalidClientTokenId", 403, ""}},
	{model.ErrSignatureDoesNotMatch, errorKind{common + "InvalidSignatureException", "SignatureDoesNotMatch", 403, ""}},
	{model.ErrRequestExpired, errorKind{common + "InvalidSignatureException", "RequestExpired", 400, ""}},
	// The server's guard (a browser's cross-site request, a Host not
	// answered to): SDKs do not retry AccessDenied.
	{apicommon.ErrRefused, errorKind{common + "AccessDeniedException", "AccessDenied", 403, ""}},
	// Another account's queue that its Policy does not open to the caller.
	{model.ErrAccessDenied, errorKind{common + "AccessDeniedException", "AccessDenied", 403, ""}},
	// A full disk refuses sends with the same retryable 503.
	{model.ErrStoreFull, errorKind{common + "ServiceUnavailableException", "ServiceUnavailable", 503, ""}},
	// The store is unreachable (a PostgreSQL restart or outage): the same
	// retryable 503, at once rather than after a timeout.
	{model.ErrUnavailable, errorKind{common + "ServiceUnavailableException", "ServiceUnavailable", 503, ""}},
	{errInvalidAction, errorKind{common + "InvalidActionException", "InvalidAction", 400, ""}},
	{errUnknownOperation, errorKind{common + "UnknownOperationException", "UnknownOperationException", 400, ""}},
	{errTooLarge, errorKind{common + "RequestEntityTooLargeException", "RequestEntityTooLarge", 413, ""}},
	{errSerialization, errorKind{common + "SerializationException", "SerializationException", 400, ""}},
	{errInternal, errorKind{common + "InternalFailure", "InternalFailure", 500, ""}},
}

// kindOf returns the wire form of err; errors outside the table are internal failures.
func kindOf(err error) errorKind {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.kind
		}
	}
	return errorTable[len(errorTable)-1].kind
}

// wireMessage is the user-facing text of err (internal errors are not shown).
func wireMessage(err error, k errorKind) string {
	if k.status >= 500 && !errors.Is(err, model.ErrClosed) && !errors.Is(err, model.ErrStoreFull) && !errors.Is(err, model.ErrUnavailable) {
		return "We encountered an internal error. Please try again."
	}
	return model.ErrorMessage(err)
}

// normalize maps context errors (the client went away, the broker is
// draining) and body-size errors to table entries.
func normalize(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return model.Errorf(errTooLarge, "Request body is larger than %d bytes.", mbe.Limit)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return model.Errorf(model.ErrClosed, "The request was cancelled.")
	}
	return err
}

// missing is the MissingParameter error for a required parameter.
func missing(param string) error {
	return model.Errorf(model.ErrMissingParameter, "The request must contain the parameter %s.", param)
}

// invalidValue is the InvalidParameterValue error for a parameter.
func invalidValue(value any, param, reason string) error {
	return model.Errorf(model.ErrInvalidParameterValue, "Value %v for parameter %s is invalid. Reason: %s", value, param, reason)
}
