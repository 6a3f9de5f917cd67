package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/internal/testutil"
)

// rssBytes is the resident set of process pid (/proc/PID/status VmRSS).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// timed runs f and fails t when it errs or takes longer than bound.
func timed(t *testing.T, what string, bound time.Duration, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	err := f()
	took := time.Since(start)
	if err != nil {
		t.Errorf("%s: %v", what, err)
	} else if took > bound {
		t.Errorf("%s took %v, want under %v", what, took.Round(time.Millisecond), bound)
	}
	return took
}

// TestSerialOverload runs the broker in its own process under overload:
// 10,000 concurrent long polls (the server's cap on waiting receives), one
// more refused with 403 RequestThrottled, a send that wakes exactly one of
// them, all of them disconnecting mid-request, then a backlog of 10,000
// messages (SLUICE_OVERLOAD_BACKLOG; SLUICE_SCALE=full, or the older
// SLUICE_OVERLOAD_SCALE=full: 1,000,000). Throughout, health,
// sends and receives are answered within a bound, and the broker's RSS
// stays bounded and comes back near its idle size.
func TestSerialOverload(t *testing.T) {
	serialOnly(t)
	const polls = 10_000 // apicommon.DefaultMaxWaitingReceives
	backlog := testutil.Scale(t, "SLUICE_OVERLOAD_BACKLOG", 10_000, 1_000_000, 1000)
	if os.Getenv("SLUICE_OVERLOAD_SCALE") == "full" { // the older spelling of SLUICE_SCALE=full
		backlog = 1_000_000
	}
	// Each poll is a connection at both ends: raise the soft limit on
	// file descriptors to the hard one (the broker inherits it).
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur < polls+2000 {
		t.Skipf("RLIMIT_NOFILE is %d: %d long polls need more", lim.Cur, polls)
	}
	p := startBroker(t, t.TempDir(), "--log-level", "warn")
	pid := p.cmd.Process.Pid
	ctx := ctxT(t)
	qpath := urlPath(t, mustQueue(t, ctx, sqsClient(p.URL), "overload", nil))
	qc := newQueryClient(p.URL)
	idle := rssBytes(t, pid)
	probes := func(phase string) {
		timed(t, phase+": GET /healthz", 2*time.Second, func() error {
			resp, err := http.Get(p.URL + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			return err
		})
		timed(t, phase+": send", 2*time.Second, func() error {
			_, err := qc.Send(ctx, qpath, []wireEntry{{Body: "probe"}})
			return err
		})
	}

	// 10,000 long polls, each re-issued when it ends, on connections of
	// their own.
	tr := &http.Transport{MaxIdleConnsPerHost: polls + 100, DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	pollCtx, stopPolls := context.WithCancel(ctx)
	var got, issued atomic.Int64
	var wg sync.WaitGroup
	pc := &queryClient{base: p.URL, hc: &http.Client{Transport: tr}}
	for i := 0; i < polls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				issued.Add(1)
				ms, err := pc.Receive(pollCtx, qpath, 1, 20)
				if err != nil {
					var qe *queryError
					if errors.As(err, &qe) || pollCtx.Err() == nil {
						time.Sleep(100 * time.Millisecond) // refused (the cap while polls are re-issued): back off
					}
					continue
				}
				for _, m := range ms {
					got.Add(1)
					_ = pc.Delete(pollCtx, qpath, m.Receipt)
				}
			}
		}()
	}
	// The cap is the probe: once every slot holds a poll, one more receive
	// is refused with 403 RequestThrottled.
	start := time.Now()
	testutil.Eventually(t, 90*time.Second, "the waiting-receive cap to refuse one more poll", func() bool {
		_, err := qc.Receive(ctx, qpath, 1, 1)
		var qe *queryError
		return errors.As(err, &qe) && qe.Status == 403 && qe.Code == "RequestThrottled"
	})
	waiting := rssBytes(t, pid)
	t.Logf("%d long polls waiting after %v (%d issued); broker RSS %s (idle %s)", polls, time.Since(start).Round(time.Millisecond), issued.Load(), mib(waiting), mib(idle))
	probes("10,000 polls waiting")
	// The probe's own send woke one poll; one more send wakes exactly one more.
	testutil.Eventually(t, 10*time.Second, "the probe's message taken by a poll", func() bool { return got.Load() == 1 })
	if _, err := qc.Send(ctx, qpath, []wireEntry{{Body: "wake"}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a send to wake a poll", func() bool { return got.Load() >= 2 })
	if n := got.Load(); n != 2 {
		t.Errorf("two sends woke %d polls, want 2", n)
	}
	// Every poll disconnects mid-request.
	stopPolls()
	wg.Wait()
	tr.CloseIdleConnections()
	testutil.Eventually(t, 30*time.Second, "the broker to take a long poll again after 10,000 disconnects", func() bool {
		_, err := qc.Receive(ctx, qpath, 1, 1)
		return err == nil
	})
	afterPolls := rssBytes(t, pid)

	// The backlog.
	start = time.Now()
	var sent atomic.Int64
	var sendErr atomic.Value
	var swg sync.WaitGroup
	for w := 0; w < 8; w++ {
		swg.Add(1)
		go func() {
			defer swg.Done()
			c := newQueryClient(p.URL)
			body := strings.Repeat("b", 200)
			for sent.Load() < int64(backlog) && ctx.Err() == nil {
				var es []wireEntry
				for j := 0; j < 10; j++ {
					es = append(es, wireEntry{Body: body})
				}
				if _, err := c.Send(ctx, qpath, es); err != nil {
					sendErr.Store(err)
					return
				}
				sent.Add(10)
			}
		}()
	}
	swg.Wait()
	if err, _ := sendErr.Load().(error); err != nil {
		t.Fatalf("backlog send: %v", err)
	}
	t.Logf("backlog of %d messages sent in %v", sent.Load(), time.Since(start).Round(time.Millisecond))
	probes("backlog")
	timed(t, "backlog: receive", 2*time.Second, func() error {
		ms, err := qc.Receive(ctx, qpath, 10, 0)
		if err == nil && len(ms) == 0 {
			err = errors.New("no message from a full queue")
		}
		return err
	})
	withBacklog := rssBytes(t, pid)
	// After the load (the backlog purged): RSS within a bound of idle. The
	// bound allows for the store's memtable and block cache, which keep
	// their size, and the runtime's heap goal.
	if _, err := sqsClient(p.URL).PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(p.URL + qpath)}); err != nil {
		t.Fatal(err)
	}
	bound := idle + 64<<20 + 96<<20 // the block cache (embedded.DefaultConfig) and 96 MiB
	var after int64
	deadline := time.Now().Add(45 * time.Second) // sluice serve frees memory every 20 s (cmd/sluice/memory.go)
	for after = rssBytes(t, pid); after > bound && time.Now().Before(deadline); after = rssBytes(t, pid) {
		time.Sleep(time.Second) // the runtime's scavenger returns memory over time: sample it
	}
	t.Logf("figures: broker RSS idle %s, 10,000 polls waiting %s, after they disconnected %s, with %d backlog %s, after load and a purge %s (bound %s)",
		mib(idle), mib(waiting), mib(afterPolls), backlog, mib(withBacklog), mib(after), mib(bound))
	if after > bound {
		t.Errorf("broker RSS %s after load, want under %s", mib(after), mib(bound))
	}
}
