package broker

import (
	"errors"
	"testing"
)

func TestLeaseError(t *testing.T) {
	t.Parallel()
	const handle = "AQID-handle"
	sentinels := []error{ErrReceiptHandleInvalid, ErrInvalidParameterValue, ErrMessageNotInflight}
	for _, tc := range []struct {
		name       string
		o          LeaseOutcome
		visibility bool
		want       error // nil: no error
		msg        string
	}{
		{"delete applied", LeaseApplied, false, nil, ""},
		{"visibility applied", LeaseApplied, true, nil, ""},
		{"delete stale succeeds", LeaseStale, false, nil, ""},
		{"visibility stale", LeaseStale, true, ErrInvalidParameterValue,
			"Value AQID-handle for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."},
		{"delete other queue", LeaseOtherQueue, false, ErrReceiptHandleInvalid, `The input receipt handle "AQID-handle" is not a valid receipt handle.`},
		{"visibility other queue", LeaseOtherQueue, true, ErrReceiptHandleInvalid, `The input receipt handle "AQID-handle" is not a valid receipt handle.`},
		{"delete ended", LeaseEnded, false, ErrInvalidParameterValue,
			"Value AQID-handle for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."},
		{"visibility ended", LeaseEnded, true, ErrMessageNotInflight, "The message referred to is not in flight."},
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
			if got := ErrorMessage(err); got != tc.msg {
				t.Errorf("message %q, want %q", got, tc.msg)
			}
		})
	}
}
