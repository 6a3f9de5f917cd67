package broker

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

func TestLeaseError(t *testing.T) {
	t.Parallel()
	const handle = "AQID-handle"
	sentinels := []error{model.ErrReceiptHandleInvalid, model.ErrInvalidParameterValue, model.ErrMessageNotInflight}
	for _, tc := range []struct {
		name       string
		o          model.LeaseOutcome
		visibility bool
		want       error // nil: no error
		msg        string
	}{
		{"delete applied", model.LeaseApplied, false, nil, ""},
		{"visibility applied", model.LeaseApplied, true, nil, ""},
		{"delete stale succeeds", model.LeaseStale, false, nil, ""},
		{"visibility stale", model.LeaseStale, true, model.ErrInvalidParameterValue,
			"Value AQID-handle for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."},
		{"delete other queue", model.LeaseOtherQueue, false, model.ErrReceiptHandleInvalid, `The input receipt handle "AQID-handle" is not a valid receipt handle.`},
		{"visibility other queue", model.LeaseOtherQueue, true, model.ErrReceiptHandleInvalid, `The input receipt handle "AQID-handle" is not a valid receipt handle.`},
		{"delete ended", model.LeaseEnded, false, model.ErrInvalidParameterValue,
			"Value AQID-handle for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."},
		{"visibility ended", model.LeaseEnded, true, model.ErrMessageNotInflight, "The message referred to is not in flight."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := LeaseError(tc.o, handle, tc.visibility)
			if tc.want == nil {
				if err != nil {
					t.Errorf("LeaseError = %v, want nil", err)
				}
				return
			}
			for _, s := range sentinels {
				if errors.Is(err, s) != (s == tc.want) {
					t.Errorf("LeaseError = %v: errors.Is(err, %q) = %v", err, s, errors.Is(err, s))
				}
			}
			if got := model.ErrorMessage(err); got != tc.msg {
				t.Errorf("message %q, want %q", got, tc.msg)
			}
		})
	}
}
