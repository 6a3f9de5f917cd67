package lifecycle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	l := New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Enter(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with a cancelled context: %v", err)
	}
	if err := l.Enter(context.Background()); err != nil {
		t.Fatalf("Enter: %v", err)
	}
	// A goroutine the lifecycle owns sees its context end only after the
	// call in progress has ended.
	var callEnded, goroutineSawEnd atomic.Bool
	goDone := make(chan struct{})
	l.Go(func(ctx context.Context) {
		defer close(goDone)
		<-ctx.Done()
		goroutineSawEnd.Store(callEnded.Load())
	})
	closed := make(chan bool)
	go func() { closed <- l.Close() }()
	select {
	case <-l.Closing():
	case <-time.After(5 * time.Second):
		t.Fatal("Closing was not closed when Close began")
	}
	if err := l.Enter(context.Background()); !errors.Is(err, model.ErrClosed) {
		t.Fatalf("Enter after Close began: %v", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned before the call in progress ended")
	case <-time.After(20 * time.Millisecond):
	}
	callEnded.Store(true)
	l.Done()
	if !<-closed {
		t.Fatal("the first Close reported false")
	}
	<-goDone
	if !goroutineSawEnd.Load() {
		t.Fatal("the goroutine's context ended before the call in progress")
	}
	if l.Close() {
		t.Fatal("a second Close reported true")
	}
	if !l.Closed() {
		t.Fatal("Closed is false after Close")
	}
}
