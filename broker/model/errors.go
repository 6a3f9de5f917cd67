package model

import (
	"errors"
	"fmt"
)

// The sentinel errors of the broker seam. Every backend returns them wrapped in
// an *Error (see Errorf) so that callers can match with errors.Is and still
// show a precise message. Each protocol maps them to its own error shape in one
// table (api/sqs/errors.go).
var (
	// ErrQueueDoesNotExist: the named queue does not exist (never created, or deleted).
	ErrQueueDoesNotExist = errors.New("the specified queue does not exist")
	// ErrQueueExists: CreateQueue on an existing name with a different attribute value.
	ErrQueueExists = errors.New("a queue already exists with the same name and a different value for an attribute")
	// ErrQueueDeletedRecently: reserved for AWS's 60-second re-create rule (Sluice does not enforce it).
	ErrQueueDeletedRecently = errors.New("queue deleted recently")
	// ErrPurgeInProgress: a second purge within 60 s when Limits.StrictPurge is on.
	ErrPurgeInProgress = errors.New("only one PurgeQueue operation is allowed every 60 seconds")
	// ErrOverLimit: a receive would take the queue past its in-flight cap, or an
	// AddPermission past the policy limits (statements, bytes, actions per call).
	ErrOverLimit = errors.New("too many messages in flight")
	// ErrReceiptHandleInvalid: a receipt handle that does not decode, or names another
	// queue (for example one that was deleted and re-created).
	ErrReceiptHandleInvalid = errors.New("the receipt handle is not valid")
	// ErrMessageNotInflight: ChangeVisibility on a message whose lease has expired
	// (the handle is still the latest one, but the message is visible again).
	ErrMessageNotInflight = errors.New("the message is not in flight")
	// ErrInvalidParameterValue: a request parameter out of range or malformed, or a
	// visibility change for a message that is gone or leased again.
	ErrInvalidParameterValue = errors.New("invalid parameter value")
	// ErrMissingParameter: a required parameter is absent (an empty body, for one).
	ErrMissingParameter = errors.New("missing required parameter")
	// ErrInvalidAttributeName: an unknown or not-settable queue attribute name.
	ErrInvalidAttributeName = errors.New("invalid attribute name")
	// ErrInvalidAttributeValue: a queue attribute value out of range or malformed.
	ErrInvalidAttributeValue = errors.New("invalid attribute value")
	// ErrInvalidMessageContents: a body with characters outside XML 1.0's set,
	// or message contents that are not valid Unicode text on the wire.
	ErrInvalidMessageContents = errors.New("invalid message contents")
	// ErrEmptyBatch: a batch call with no entries.
	ErrEmptyBatch = errors.New("there should be at least one entry in the request")
	// ErrTooManyEntries: a batch call with more than MaxBatchEntries entries.
	ErrTooManyEntries = errors.New("too many entries in batch request")
	// ErrBatchIDsNotDistinct: two entries of one batch share an id.
	ErrBatchIDsNotDistinct = errors.New("batch entry ids are not distinct")
	// ErrInvalidBatchEntryID: an entry id with characters outside [A-Za-z0-9_-] or longer than 80.
	ErrInvalidBatchEntryID = errors.New("invalid batch entry id")
	// ErrBatchRequestTooLong: the entries of a send batch add up to more than MaxBatchBytes.
	ErrBatchRequestTooLong = errors.New("batch request too long")
	// ErrUnsupportedOperation: an operation the backend does not provide.
	ErrUnsupportedOperation = errors.New("unsupported operation")
	// ErrResourceNotFound: a move task or other non-queue resource that does not exist.
	ErrResourceNotFound = errors.New("resource not found")
	// ErrThrottled: backpressure; the queue is past its maximum depth
	// (*DepthError), or too many receives wait.
	ErrThrottled = errors.New("request throttled")
	// ErrConflict: a request that the queue's settings do not allow (a
	// dead-letter-now on a queue without a dead-letter queue).
	ErrConflict = errors.New("conflict with the queue's settings")
	// ErrInvalidRequest: a native message envelope whose fields exclude each
	// other (EnvelopeEntry), or another request the native API cannot read
	// (a value that does not parse).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrAccessDenied: an authenticated caller acted on another account's
	// queue with an action that queue's Policy does not grant its account
	// (or that only the owner may take); see access.go.
	ErrAccessDenied = errors.New("access denied")
	// ErrClosed: the backend is shutting down or closed.
	ErrClosed = errors.New("broker is closed")
	// ErrStoreFull: the store's disk has less free space than its reserve, so
	// a send is refused before it could fill the disk (see StoreFullError).
	// Retryable: receives and deletes still work and free space.
	ErrStoreFull = errors.New("the store's disk is full")
	// ErrUnavailable: the backend's store cannot be reached now (a database
	// restarting or unreachable); the request may or may not have been
	// applied, and a retry may succeed (UnavailableError).
	ErrUnavailable = errors.New("store unavailable")
)

// Error is a broker error: one of the sentinels above (Kind) and a message for
// the user that names the offending value. errors.Is(err, ErrX) matches Kind.
type Error struct {
	Kind    error
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// ErrorMessage returns the user-facing text of err: the *Error message when err is
// one, else err.Error().
func ErrorMessage(err error) string {
	var be *Error
	if errors.As(err, &be) {
		return be.Message
	}
	return err.Error()
}

// The errors that several layers return, in one place so that each text is
// written once. Backends return these constructors' errors; the front
// (Broker) and the pure rules return the rest.

// QueueNotFoundError: the named queue does not exist (never created, or deleted).
func QueueNotFoundError() error {
	return Errorf(ErrQueueDoesNotExist, "The specified queue does not exist.")
}

// ClosedError: the broker is shutting down or closed.
func ClosedError() error {
	return Errorf(ErrClosed, "The broker is shutting down.")
}

// StoreFullError: a send refused because the store's disk has free bytes
// left, fewer than its reserve of reserve bytes. Receives, deletes and
// visibility changes still work; sends resume once space returns.
func StoreFullError(free, reserve uint64) error {
	return Errorf(ErrStoreFull, "The store's disk is full (%d MiB free, below the reserve of %d MiB): sends are refused until space returns; receives and deletes still work. Please retry later.", free>>20, reserve>>20)
}

// UnavailableError: the store could not be reached (cause, kept for logs
// and errors.Is but not shown to users); the request may or may not have
// been applied. Protocols answer it as a retryable 503.
func UnavailableError(cause error) error {
	return fmt.Errorf("%w (%w)", Errorf(ErrUnavailable, "The broker cannot reach its store; please try again."), cause)
}

// invalidParam builds the SQS-style "Value X for parameter Y is invalid. Reason: Z." error.
func InvalidParameterError(value any, param, reason string) error {
	return Errorf(ErrInvalidParameterValue, "Value %v for parameter %s is invalid. Reason: %s", value, param, reason)
}

// BackupsUnsupportedError: an online backup asked of a store that is backed
// up with tools of its own.
func BackupsUnsupportedError() error {
	return Errorf(ErrUnsupportedOperation, "This broker's store cannot take backups (the PostgreSQL store is backed up with PostgreSQL's own tools).")
}
