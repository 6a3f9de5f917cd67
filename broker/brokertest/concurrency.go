package brokertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

var concurrencyTests = []testCase{
	{"ExactlyOnceWithoutExpiry", testConcurrentExactlyOnce},
	{"WaitersShareSends", testConcurrentWaiters},
}

// testConcurrentExactlyOnce: senders and receivers/deleters run at once;
// with leases that never expire (the clock stands still) every message is
// delivered exactly once, and long polls are woken by sends.
func testConcurrentExactlyOnce(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	const senders, perSender, receivers = 4, 100, 4
	const total = senders * perSender
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()

	var (
		mu      sync.Mutex
		seen    = map[string]int{}
		deleted int
		done    = make(chan struct{})
		errc    = make(chan error, senders+receivers)
		wg      sync.WaitGroup
	)
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perSender; {
				n := min(1+(i+j)%10, perSender-j)
				entries := make([]model.SendEntry, n)
				for k := range entries {
					entries[k] = model.SendEntry{ID: fmt.Sprint("e", k), Body: fmt.Sprintf("s%d-%d", i, j+k)}
				}
				res, err := e.b.Send(ctx, "q", entries)
				if err == nil {
					for _, r := range res {
						if r.Err != nil {
							err = r.Err
						}
					}
				}
				if err != nil {
					errc <- fmt.Errorf("sender %d: %w", i, err)
					return
				}
				j += n
			}
		}()
	}
	for i := 0; i < receivers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ds, err := e.b.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, WaitTime: dur(model.MaxWaitTime)})
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errc <- fmt.Errorf("receiver %d: %w", i, err)
					return
				}
				if len(ds) == 0 {
					continue
				}
				entries := make([]model.DeleteEntry, len(ds))
				mu.Lock()
				for k, d := range ds {
					seen[d.Body]++
					entries[k] = model.DeleteEntry{ID: fmt.Sprint("d", k), Receipt: d.Receipt}
				}
				mu.Unlock()
				errs, err := e.b.Delete(ctx, "q", entries)
				if err == nil {
					for _, x := range errs {
						if x != nil {
							err = x
						}
					}
				}
				if err != nil {
					errc <- fmt.Errorf("receiver %d delete: %w", i, err)
					return
				}
				mu.Lock()
				deleted += len(ds)
				if deleted == total {
					close(done)
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	select {
	case <-done:
	case err := <-errc:
		cancel()
		wg.Wait()
		t.Fatal(err)
	case <-time.After(4 * realTimeout):
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("only %d of %d messages received and deleted after %v (a lost long-poll wakeup?)", deleted, total, 4*realTimeout)
	}
	cancel()
	wg.Wait()
	t.Logf("%d messages sent, received and deleted by %d+%d goroutines in %v", total, senders, receivers, time.Since(start))
	if len(seen) != total {
		t.Fatalf("%d distinct messages received, want %d", len(seen), total)
	}
	for body, n := range seen {
		if n != 1 {
			t.Fatalf("message %s delivered %d times with leases that never expired", body, n)
		}
	}
	e.wantStats("q", 0, 0, 0)
}

// testConcurrentWaiters: several long polls waiting on one queue share the
// messages sent one by one: each wakes a waiter, and each message goes to
// exactly one of them.
func testConcurrentWaiters(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	const waiters = 5
	chs := make([]<-chan recvResult, waiters)
	for i := range chs {
		chs[i] = e.goWaitReq(e.ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 1, WaitTime: dur(model.MaxWaitTime)})
	}
	for i := 0; i < waiters; i++ {
		e.sendBody("q", fmt.Sprint("m", i))
	}
	got := map[string]bool{}
	for i, ch := range chs {
		r := e.await(ch, realTimeout, fmt.Sprintf("waiter %d", i))
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		for _, d := range r.ds {
			if got[d.Body] {
				t.Fatalf("message %s delivered to two waiters", d.Body)
			}
			got[d.Body] = true
		}
	}
	if len(got) != waiters {
		t.Fatalf("waiters received %d distinct messages, want %d", len(got), waiters)
	}
	e.wantStats("q", 0, waiters, 0)
}
