package brokertest

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

var lifecycleTests = []testCase{
	{"CloseEndsWaitingReceive", testCloseEndsWaitingReceive},
	{"ClosedBackendRefuses", testClosedBackendRefuses},
}

// testCloseEndsWaitingReceive: Close answers waiting receives at once,
// empty or with ErrClosed.
func testCloseEndsWaitingReceive(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	ch := e.goWait(e.ctx, "q", model.MaxWaitTime)
	e.notYet(ch, "long poll before Close")
	closed := make(chan error, 1)
	go func() { closed <- e.b.Close() }()
	r := e.await(ch, promptly, "long poll during Close (clock not advanced)")
	if len(r.ds) != 0 || r.err != nil && !errors.Is(r.err, model.ErrClosed) {
		t.Fatalf("long poll ended by Close: %d messages, err %v; want none and nil or ErrClosed", len(r.ds), r.err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(realTimeout):
		t.Fatal("Close did not return")
	}
}

func testClosedBackendRefuses(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	if err := e.b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.b.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil (Close is idempotent)", err)
	}
	_, err := e.b.Send(e.ctx, "q", []model.SendEntry{{ID: "a", Body: "x"}})
	wantErr(t, "Send after Close", err, model.ErrClosed)
	_, err = e.receive(model.ReceiveRequest{Queue: "q", WaitTime: dur(model.MaxWaitTime)})
	wantErr(t, "Receive after Close", err, model.ErrClosed)
	_, err = e.b.GetQueue(e.ctx, "q")
	wantErr(t, "GetQueue after Close", err, model.ErrClosed)
	_, err = e.b.CreateQueue(e.ctx, "r", nil, nil)
	wantErr(t, "CreateQueue after Close", err, model.ErrClosed)
}
