package embedded

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// gateFS holds the WAL syncs back while armed: the first sync to arrive
// signals entered and waits for release.
type gateFS struct {
	vfs.FS
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateFS) arm() {
	g.mu.Lock()
	g.armed = true
	g.entered, g.release = make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

// open releases the held sync (idempotent).
func (g *gateFS) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed {
		g.armed = false
		close(g.release)
	}
}

func (g *gateFS) hold() {
	g.mu.Lock()
	if !g.armed {
		g.mu.Unlock()
		return
	}
	entered, release := g.entered, g.release
	select {
	case <-entered:
	default:
		close(entered)
	}
	g.mu.Unlock()
	<-release
}

func (g *gateFS) wrap(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != walCategory {
		return f, err
	}
	return &gateFile{File: f, g: g}, nil
}

func (g *gateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, category)
	return g.wrap(f, err, category)
}

func (g *gateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, category)
	return g.wrap(f, err, category)
}

func (g *gateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, category, opts...)
	return g.wrap(f, err, category)
}

type gateFile struct {
	vfs.File
	g *gateFS
}

func (f *gateFile) Sync() error                  { f.g.hold(); return f.File.Sync() }
func (f *gateFile) SyncData() error              { f.g.hold(); return f.File.SyncData() }
func (f *gateFile) SyncTo(n int64) (bool, error) { f.g.hold(); return f.File.SyncTo(n) }

// syncWaiters counts the goroutines waiting for a WAL sync.
func syncWaiters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			waiting := 0
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "pebble/v2.(*Batch).SyncWait(") {
					waiting++
				}
			}
			return waiting
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestAnswerWaitsForEarlierChange: an answer that writes nothing but
// depends on an earlier change still syncing (a FIFO send answered from the
// dedup window, a delete of a message whose delete is syncing) is given only
// once that change is durable. Otherwise a crash loses a send or brings
// back a delete that a client was told about.
func TestAnswerWaitsForEarlierChange(t *testing.T) {
	t.Parallel()
	fifoSend := func(b *broker.Broker) error {
		res, err := b.Send(context.Background(), "q.fifo", []model.SendEntry{{Body: "x", GroupID: "g", DedupID: "d"}})
		if err == nil {
			err = res[0].Err
		}
		return err
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, b *broker.Broker) (op func() error, check func(t *testing.T, b *broker.Broker))
	}{
		{"DuplicateSend", func(t *testing.T, b *broker.Broker) (func() error, func(*testing.T, *broker.Broker)) {
			if _, err := b.CreateQueue(context.Background(), "q.fifo", map[string]string{model.AttrFifoQueue: "true"}, nil); err != nil {
				t.Fatal(err)
			}
			return func() error { return fifoSend(b) }, func(t *testing.T, b *broker.Broker) {
				info, err := b.GetQueue(context.Background(), "q.fifo")
				if err != nil || info.Stats.Visible != 1 {
					t.Fatalf("after the crash: %+v, %v; want the acknowledged send", info.Stats, err)
				}
			}
		}},
		{"RepeatedCreateWithRedrivePolicy", func(t *testing.T, b *broker.Broker) (func() error, func(*testing.T, *broker.Broker)) {
			ctx := context.Background()
			if _, err := b.CreateQueue(ctx, "dlq", nil, nil); err != nil {
				t.Fatal(err)
			}
			attrs := map[string]string{model.AttrRedrivePolicy: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":3}`}
			return func() error {
					_, err := b.CreateQueue(ctx, "q", attrs, nil)
					return err
				}, func(t *testing.T, b *broker.Broker) {
					if _, err := b.GetQueue(ctx, "q"); err != nil {
						t.Fatalf("after the crash: %v; want the acknowledged queue", err)
					}
				}
		}},
		{"RepeatedDelete", func(t *testing.T, b *broker.Broker) (func() error, func(*testing.T, *broker.Broker)) {
			ctx := context.Background()
			if _, err := b.CreateQueue(ctx, "q", nil, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Send(ctx, "q", []model.SendEntry{{Body: "x"}}); err != nil {
				t.Fatal(err)
			}
			vis, wait := time.Hour, time.Duration(0)
			ds, err := b.Receive(ctx, model.ReceiveRequest{Queue: "q", Visibility: &vis, WaitTime: &wait})
			if err != nil || len(ds) != 1 {
				t.Fatalf("receive: %v %v", ds, err)
			}
			return func() error {
					errs, err := b.Delete(ctx, "q", []model.DeleteEntry{{ID: "d", Receipt: ds[0].Receipt}})
					if err == nil {
						err = errs[0]
					}
					return err
				}, func(t *testing.T, b *broker.Broker) {
					info, err := b.GetQueue(ctx, "q")
					if err != nil || info.Stats != (model.QueueStats{}) {
						t.Fatalf("after the crash: %+v, %v; want the acknowledged delete kept", info.Stats, err)
					}
				}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mem := vfs.NewCrashableMem()
			g := &gateFS{FS: mem}
			clock := clocktest.NewFakeClock(t0)
			b, err := Open(Config{Dir: "/data", FS: g, Options: storage.Options{Clock: clock, Logger: testLogger(t)}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			defer g.open()
			opts := storage.Options{Clock: clock}
			op, check := c.setup(t, front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer}))

			g.arm()
			first := make(chan error, 1)
			go func() { first <- op() }() // applied, its sync held back
			<-g.entered
			second := make(chan error, 1)
			go func() { second <- op() }() // the same change again
			answered := false
			eventually(t, "the second call to answer or wait for a sync", func() bool {
				select {
				case err := <-second:
					if err != nil {
						t.Fatalf("second call: %v", err)
					}
					answered = true
					return true
				default:
					return syncWaiters() >= 2
				}
			})
			if answered {
				// Answered while the change it reports is not durable: crash now.
				crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
				g.open()
				<-first
				_ = b.Close()
				b2, err := Open(Config{Dir: "/data", FS: crashed, Options: storage.Options{Clock: clock, Logger: testLogger(t)}})
				if err != nil {
					t.Fatal(err)
				}
				defer b2.Close()
				check(t, front(t, b2, broker.Config{Logger: opts.Logger, Observer: opts.Observer}))
				t.Fatal("the second call answered before the change it reports was durable")
			}
			g.open()
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			if err := <-second; err != nil {
				t.Fatal(err)
			}
		})
	}
}
