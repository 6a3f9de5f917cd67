package broker

import "github.com/sluicemq/sluice/broker/model"

// LeaseError is the answer to one Delete (visibility == false) or
// ChangeVisibility receipt whose backend outcome is o; handle is the receipt
// handle as the client sent it.
func LeaseError(o model.LeaseOutcome, handle string, visibility bool) error {
	switch o {
	case model.LeaseOtherQueue:
		return model.ReceiptInvalidError(handle)
	case model.LeaseStale:
		if visibility {
			return model.Errorf(model.ErrInvalidParameterValue,
				"Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", handle)
		}
		return nil // a stale delete succeeds without effect, as in SQS
	case model.LeaseEnded:
		if visibility {
			return model.Errorf(model.ErrMessageNotInflight, "The message referred to is not in flight.")
		}
		return model.ReceiptExpiredError(handle)
	}
	return nil
}
