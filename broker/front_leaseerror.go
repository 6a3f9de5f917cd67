package broker

// LeaseError is the answer to one Delete (visibility == false) or
// ChangeVisibility receipt whose backend outcome is o; handle is the receipt
// handle as the client sent it.
func LeaseError(o LeaseOutcome, handle string, visibility bool) error {
	switch o {
	case LeaseOtherQueue:
		return receiptInvalidError(handle)
	case LeaseStale:
		if visibility {
			return Errorf(ErrInvalidParameterValue,
				"Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", handle)
		}
		return nil // a stale delete succeeds without effect, as in SQS
	case LeaseEnded:
		if visibility {
			return Errorf(ErrMessageNotInflight, "The message referred to is not in flight.")
		}
		return ReceiptExpiredError(handle)
	}
	return nil
}
