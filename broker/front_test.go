package broker

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// coreOnly is a Backend whose embedded Backend is nil: a call that reaches
// the store panics, so the tests below show that the front answers without
// it.
type coreOnly struct{ storage.Backend }

// Receipts and Clock are the methods every backend answers without its
// store.
func (coreOnly) Receipts() *model.ReceiptCodec { return frontReceipts }
func (coreOnly) Clock() model.Clock            { return model.RealClock{} }

// frontReceipts is a codec with a fixed key.
var frontReceipts = func() *model.ReceiptCodec {
	c, err := model.NewReceiptCodec(bytes.Repeat([]byte{7}, model.ReceiptKeySize))
	if err != nil {
		panic(err)
	}
	return c
}()

// noReceipts is a backend that lacks a receipt codec: New refuses it.
type noReceipts struct{ storage.Backend }

func (noReceipts) Receipts() *model.ReceiptCodec { return nil }
func (noReceipts) Clock() model.Clock            { return model.RealClock{} }

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		backend storage.Backend
		cfg     Config
		wantErr error // nil: New succeeds; errAny: any error
	}{
		{name: "nil backend", backend: nil, wantErr: errNilBackend},
		{name: "no receipt codec", backend: noReceipts{}, wantErr: errNoReceiptCodec},
		{name: "negative MaxInFlight", backend: coreOnly{}, cfg: Config{MaxInFlight: -1}, wantErr: errAny},
		{name: "bad AccountID", backend: coreOnly{}, cfg: Config{AccountID: "a:b"}, wantErr: errAny},
		{name: "zero config", backend: coreOnly{}},
		{name: "explicit MaxInFlight", backend: coreOnly{}, cfg: Config{MaxInFlight: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := New(tc.backend, tc.cfg)
			switch {
			case tc.wantErr == nil:
				if err != nil || b == nil {
					t.Fatalf("New = %v, %v", b, err)
				}
				if b.backend != tc.backend {
					t.Errorf("backend = %v, want the backend given", b.backend)
				}
				want := tc.cfg.MaxInFlight
				if want == 0 {
					want = model.DefaultMaxInFlight
				}
				if b.cfg.MaxInFlight != want || b.AccountID() != DefaultAccountID || b.Clock() == nil || b.log == nil {
					t.Errorf("config not defaulted: %+v", b.cfg)
				}
			case err == nil || b != nil:
				t.Errorf("New = %v, %v; want nil and an error", b, err)
			case tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Errorf("New: %v, want %v", err, tc.wantErr)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, tc := range []struct {
		n    int
		fail bool
	}{{-1, true}, {-model.DefaultMaxInFlight, true}, {0, false}, {1, false}, {model.DefaultMaxInFlight * 10, false}} {
		err := Config{MaxInFlight: tc.n}.Validate()
		if (err != nil) != tc.fail {
			t.Errorf("Validate(MaxInFlight %d) = %v, want failure %v", tc.n, err, tc.fail)
		}
		if err != nil && !strings.Contains(err.Error(), "MaxInFlight") {
			t.Errorf("Validate(MaxInFlight %d) = %q: does not name the field", tc.n, err)
		}
	}
	for _, id := range []string{strings.Repeat("1", 65), "a/b", "a:b", "a?b", "a#b", "a b", "a\rb", "a\x7fb", "a\u00a0b"} {
		if err := (Config{AccountID: id}).Validate(); err == nil || !strings.Contains(err.Error(), "AccountID") {
			t.Errorf("Validate(AccountID %q) = %v, want an AccountID error", id, err)
		}
	}
}

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
