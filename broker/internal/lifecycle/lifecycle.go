package lifecycle

import (
	"context"
	"sync"

	"github.com/sluicemq/sluice/broker/model"
)

// Lifecycle is the one admission and shutdown protocol of a backend: it
// admits calls until Close begins, owns the backend's background goroutines
// and Duties, and closes in a fixed order. The zero value is not ready: use
// New. Safe for concurrent use.
//
// Close order: (1) refuse new calls and close Closing, so that waiting calls
// (long polls) return at once; (2) wait for the calls in progress; (3)
// cancel the duties' context, stop every Duty and wait for every goroutine
// started with Go. The backend then syncs and releases its store.
type Lifecycle struct {
	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	calls   sync.WaitGroup

	ctx    context.Context
	cancel context.CancelFunc
	duties []*Duty
	gor    sync.WaitGroup
	done   chan struct{} // closed when the first Close has finished
}

// New returns a Lifecycle admitting calls.
func New() *Lifecycle {
	ctx, cancel := context.WithCancel(context.Background())
	return &Lifecycle{closing: make(chan struct{}), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Enter admits a call; it fails with ClosedError once Close began, and
// with ctx.Err() when the caller has gone away. Every admitted call ends
// with Done.
func (l *Lifecycle) Enter(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return model.ClosedError()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	l.calls.Add(1)
	return nil
}

// Done ends a call admitted by Enter.
func (l *Lifecycle) Done() { l.calls.Done() }

// Closing is closed when Close begins: a call that waits selects on it.
func (l *Lifecycle) Closing() <-chan struct{} { return l.closing }

// Closed reports whether Close has begun.
func (l *Lifecycle) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Go runs f in a goroutine the lifecycle owns; f's ctx is cancelled at
// Close, after the calls in progress have ended.
func (l *Lifecycle) Go(f func(ctx context.Context)) {
	l.gor.Add(1)
	go func() {
		defer l.gor.Done()
		f(l.ctx)
	}()
}

// Start starts d on the lifecycle's context; Close stops it.
func (l *Lifecycle) Start(d *Duty) {
	l.mu.Lock()
	l.duties = append(l.duties, d)
	l.mu.Unlock()
	d.Start(l.ctx)
}

// Close runs the close order (see Lifecycle) and reports whether this call
// did it: a later Close waits for the first to finish and returns false.
func (l *Lifecycle) Close() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return false
	}
	l.closed = true
	close(l.closing)
	duties := l.duties
	l.mu.Unlock()
	l.calls.Wait()
	l.cancel()
	for _, d := range duties {
		_ = d.Stop(context.Background())
	}
	l.gor.Wait()
	close(l.done)
	return true
}
