package sqssource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/sluicemq/sluice/worker"
)

// ErrNoDeadLetterQueue is the error of a KindDeadLetter outcome on a queue
// with no RedrivePolicy when Config.DeadLetterQueueURL is empty: there is
// nowhere to send the message. The message is left leased and comes back
// when its lease ends. Give the queue a RedrivePolicy, or set
// Config.DeadLetterQueueURL.
var ErrNoDeadLetterQueue = errors.New("sqssource: the queue has no RedrivePolicy and Config.DeadLetterQueueURL is empty: nowhere to dead-letter the message")

// Lease loss: how an SQS endpoint says that a receipt handle no longer
// holds the message's lease, and so which errors become worker.ErrLeaseLost.
//
// What AWS documents and its users report:
//   - ReceiptHandleIsInvalid: the modeled error for a handle that is not
//     one (garbage), per the API reference; AWS also answers it in batch
//     entries with the message "The receipt handle has expired"
//     (smaskalik/sqsmover#54).
//   - MessageNotInflight (query code AWS.SimpleQueueService.MessageNotInflight):
//     ChangeMessageVisibility on a message that is no longer in flight, its
//     visibility timeout over (AWS's CodeGuru detector
//     java/amazon-sqs-change-message-visibility-check-status: "check for
//     MessageNotInFlight exceptions that signify that the specified message
//     is not in flight").
//   - InvalidParameterValue, an unmodeled code, with a message on the
//     parameter ReceiptHandle: "Reason: The receipt handle has expired."
//     (an expired handle; aws/aws-sdk-java#1628, where AWS confirmed
//     expired handles answer this rather than ReceiptHandleIsInvalid; and a
//     FIFO DeleteMessage after the visibility timeout, aws/aws-sdk-js#1750,
//     boto/boto3#2898), or "Reason: Message does not exist or is not
//     available for visibility timeout change." (the message was received
//     again, or deleted: mapbox/ecs-watchbot#135, vmihailenco/taskq#29;
//     elastic/beats#30675 asks SDKs to handle both codes).
//
// Sluice answers the same (broker.LeaseError, api/sqs/errors.go): a handle
// that does not decode or names another queue is ReceiptHandleIsInvalid; a
// visibility change of an ended lease with no receive since is
// MessageNotInflight; one of a message received again or deleted is
// InvalidParameterValue "... Message does not exist or is not available for
// visibility timeout change."; a FIFO delete of an expired handle is
// InvalidParameterValue "... The receipt handle has expired.".
//
// A DeleteMessage with a stale handle of a standard queue succeeds without
// effect, in SQS and in Sluice ("the request succeeds, but the message will
// not be deleted"): an ack after a lost lease cannot be detected there, and
// the message is delivered again.
func leaseLost(err error) bool {
	var invalid *types.ReceiptHandleIsInvalid
	var notInflight *types.MessageNotInflight
	if errors.As(err, &invalid) || errors.As(err, &notInflight) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	return leaseLostCode(api.ErrorCode(), api.ErrorMessage())
}

// leaseLostCode applies the rule above to an error code and message: a
// call's error, or a batch entry's (whose Code is the query code).
func leaseLostCode(code, message string) bool {
	switch {
	case code == "ReceiptHandleIsInvalid", strings.HasSuffix(code, ".ReceiptHandleIsInvalid"),
		code == "MessageNotInflight", strings.HasSuffix(code, ".MessageNotInflight"):
		return true
	case code == "InvalidParameterValue", strings.HasSuffix(code, ".InvalidParameterValue"):
		m := strings.ToLower(message)
		return strings.Contains(m, "receipt handle has expired") ||
			strings.Contains(m, "receipthandle is invalid") ||
			strings.Contains(m, "not available for visibility timeout change")
	}
	return false
}

// leaseError wraps an SQS error of a call on one receipt: worker.ErrLeaseLost
// (with the SQS error kept in the text) when it says the lease ended, else
// the error with what was being done.
func leaseError(what string, err error) error {
	if leaseLost(err) {
		return fmt.Errorf("sqssource: %s: %w (%v)", what, worker.ErrLeaseLost, err)
	}
	return fmt.Errorf("sqssource: %s: %w", what, err)
}

// entryError is the error of a failed batch entry.
func entryError(what string, e types.BatchResultErrorEntry) error {
	code, msg := deref(e.Code), deref(e.Message)
	if leaseLostCode(code, msg) {
		return fmt.Errorf("sqssource: %s: %w (%s: %s)", what, worker.ErrLeaseLost, code, msg)
	}
	return fmt.Errorf("sqssource: %s: %s: %s", what, code, msg)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
