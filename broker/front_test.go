package broker

import (
	"bytes"
	"context"
	"errors"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"strings"
	"testing"
)

// coreOnly is a Backend without optional capabilities. Its embedded Backend
// is nil: a call that reaches it panics, so the tests below show that the
// front answers without the backend.
type coreOnly struct{ storage.Backend }

// Receipts is the one method every backend answers without its store.
func (coreOnly) Receipts() *model.ReceiptCodec { return frontReceipts }

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

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		backend storage.Backend
		opts    Options
		wantErr error // nil: New succeeds; errAny: any error
	}{
		{name: "nil backend", backend: nil, opts: Options{}, wantErr: errNilBackend},
		{name: "no receipt codec", backend: noReceipts{}, opts: Options{}, wantErr: errNoReceiptCodec},
		{name: "negative MaxInFlight", backend: coreOnly{}, opts: Options{MaxInFlight: -1}, wantErr: errAny},
		{name: "zero options", backend: coreOnly{}, opts: Options{}},
		{name: "explicit MaxInFlight", backend: coreOnly{}, opts: Options{MaxInFlight: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := New(tc.backend, tc.opts)
			switch {
			case tc.wantErr == nil:
				if err != nil || b == nil {
					t.Fatalf("New = %v, %v", b, err)
				}
				if b.Backend() != tc.backend {
					t.Errorf("Backend() = %v, want the backend given", b.Backend())
				}
				want := tc.opts.MaxInFlight
				if want == 0 {
					want = model.DefaultMaxInFlight
				}
				if b.opts.MaxInFlight != want || b.opts.Clock == nil || b.log == nil {
					t.Errorf("options not defaulted: %+v", b.opts)
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

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		fail bool
	}{{-1, true}, {-model.DefaultMaxInFlight, true}, {0, false}, {1, false}, {model.DefaultMaxInFlight * 10, false}} {
		err := Options{MaxInFlight: tc.n}.Validate()
		if (err != nil) != tc.fail {
			t.Errorf("Validate(MaxInFlight %d) = %v, want failure %v", tc.n, err, tc.fail)
		}
		if err != nil && !strings.Contains(err.Error(), "MaxInFlight") {
			t.Errorf("Validate(MaxInFlight %d) = %q: does not name the field", tc.n, err)
		}
	}
}

func TestMoveTasksUnsupported(t *testing.T) {
	t.Parallel()
	b, err := New(coreOnly{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, action string
		call         func() error
	}{
		{"StartMoveTask", "StartMessageMoveTask", func() error {
			_, err := b.StartMoveTask(ctx, model.MoveTaskRequest{Source: "dlq", Destination: "q"})
			return err
		}},
		{"StartMoveTask bad rate", "StartMessageMoveTask", func() error { // refused before the rate is checked
			_, err := b.StartMoveTask(ctx, model.MoveTaskRequest{Source: "dlq", MaxPerSecond: -1})
			return err
		}},
		{"ListMoveTasks", "ListMessageMoveTasks", func() error {
			_, err := b.ListMoveTasks(ctx, "dlq", 0)
			return err
		}},
		{"ListMoveTasks bad limit", "ListMessageMoveTasks", func() error { // refused before the limit is checked
			_, err := b.ListMoveTasks(ctx, "dlq", model.MaxListMoveTasks+1)
			return err
		}},
		{"CancelMoveTask", "CancelMessageMoveTask", func() error {
			_, err := b.CancelMoveTask(ctx, "dlq", "task")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call()
			if !errors.Is(err, model.ErrUnsupportedOperation) {
				t.Fatalf("%s = %v, want ErrUnsupportedOperation", tc.action, err)
			}
			if msg := model.ErrorMessage(err); !strings.Contains(msg, tc.action) {
				t.Errorf("message %q does not name %s", msg, tc.action)
			}
		})
	}
}
