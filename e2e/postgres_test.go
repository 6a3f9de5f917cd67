package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/pgtest"
	"github.com/sluicemq/sluice/internal/testutil"
)

// pgDatabase creates a fresh database for one test and returns its URL
// (pgtest.Database: skipped with the reason when PostgreSQL is unreachable,
// unless SLUICE_REQUIRE contains "postgres").
func pgDatabase(t *testing.T) string { return pgtest.Database(t) }

// delivery is one receive of one message, seen by a consumer. start is when
// the receive request began: the lease, taken after it, ends no earlier than
// start + the visibility timeout.
type delivery struct {
	body        string
	start, seen time.Time
}

// brokerSet is the running brokers; consumers and producers pick a broker by
// index and get the client of its current process.
type brokerSet struct {
	mu      sync.Mutex
	procs   []*brokerProc
	clients []*sqs.Client
}

func (s *brokerSet) client(i int) *sqs.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[i%len(s.clients)]
}

// TestPostgresMultiBroker runs three brokers on one PostgreSQL, producers and
// consumers spread across them, kills one with SIGKILL halfway and restarts
// it, and checks: every acknowledged message is received; no message is
// received twice while a lease on it is live; FIFO groups keep their order.
// SLUICE_E2E_PG_MESSAGES sets the standard-queue message count (default
// 10,000; 100,000 under SLUICE_SCALE=full), SLUICE_E2E_PG_FIFO_PER_GROUP
// the FIFO messages per group (100; 200).
func TestPostgresMultiBroker(t *testing.T) {
	url := pgDatabase(t)
	total := testutil.Scale(t, "SLUICE_E2E_PG_MESSAGES", 10_000, 100_000, 1)
	// A lease of 10 s is long enough to recognise (a receive is deleted at
	// once) and short enough that the leases the killed broker held come
	// back soon.
	const vis = 10 // seconds
	set := &brokerSet{}
	for i := 0; i < 3; i++ {
		p := startBroker(t, t.TempDir(), "--store", url)
		set.procs = append(set.procs, p)
		set.clients = append(set.clients, sqsClient(p.URL))
	}
	ctx := ctxT(t)
	c0 := set.client(0)
	qurl := mustQueue(t, ctx, c0, "mb", map[string]string{"VisibilityTimeout": strconv.Itoa(vis)})
	furl := mustQueue(t, ctx, c0, "mb.fifo", map[string]string{"FifoQueue": "true", "VisibilityTimeout": strconv.Itoa(vis)})

	var (
		mu         sync.Mutex
		acked      = map[string]bool{}       // bodies whose send succeeded
		deliveries = map[string][]delivery{} // by message id
		received   = map[string]bool{}       // bodies received at least once
		groupSeen  = map[string][]int{}      // FIFO: indexes delivered per group, in order
		killed     atomic.Bool               // the kill happened
		done       = make(chan struct{})     // all acknowledged messages received
		receivedN  atomic.Int64              // distinct bodies received
		sendsDone  sync.WaitGroup
		consumers  sync.WaitGroup
		sendErrs   atomic.Int64
		killAt     = int64(total / 2)
		fifoGroups = 6
		fifoPer    = testutil.Scale(t, "SLUICE_E2E_PG_FIFO_PER_GROUP", 100, 200, 1)
	)
	start := time.Now()
	// Producers: one per broker on the standard queue, one per FIFO group.
	// A failed send (the broker was killed) is retried on the next broker;
	// it may have been stored anyway, so bodies, not message ids, are the
	// unit of "acknowledged".
	send := func(i int, queue string, entries []types.SendMessageBatchRequestEntry) {
		for attempt := 0; ; attempt++ {
			out, err := set.client(i+attempt).SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &queue, Entries: entries})
			if err == nil && len(out.Failed) == 0 {
				mu.Lock()
				for _, e := range entries {
					acked[*e.MessageBody] = true
				}
				mu.Unlock()
				return
			}
			sendErrs.Add(1)
			if ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // backoff before the retry, not a wait for a condition
		}
	}
	for p := 0; p < 3; p++ {
		sendsDone.Add(1)
		go func() {
			defer sendsDone.Done()
			for j := p * 10; j < total; j += 30 {
				var entries []types.SendMessageBatchRequestEntry
				for k := j; k < min(j+10, total); k++ {
					entries = append(entries, types.SendMessageBatchRequestEntry{
						Id: aws.String(fmt.Sprint("e", k-j)), MessageBody: aws.String(fmt.Sprint("s-", k))})
				}
				send(p, qurl, entries)
			}
		}()
	}
	for g := 0; g < fifoGroups; g++ {
		sendsDone.Add(1)
		go func() {
			defer sendsDone.Done()
			group := fmt.Sprint("g", g)
			for j := 0; j < fifoPer; j++ {
				body := fmt.Sprintf("f-%s-%d", group, j)
				send(g, furl, []types.SendMessageBatchRequestEntry{{Id: aws.String("e"),
					MessageBody: aws.String(body), MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(body)}})
			}
		}()
	}
	// Consumers: two per broker and queue.
	consume := func(i int, queue string) {
		defer consumers.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			rs := time.Now()
			out, err := set.client(i).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queue,
				MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				time.Sleep(50 * time.Millisecond) // the broker is down: backoff
				continue
			}
			seen := time.Now()
			var del []types.DeleteMessageBatchRequestEntry
			mu.Lock()
			for k, m := range out.Messages {
				body := *m.Body
				deliveries[*m.MessageId] = append(deliveries[*m.MessageId], delivery{body, rs, seen})
				if !received[body] {
					received[body] = true
					receivedN.Add(1)
				}
				if strings.HasPrefix(body, "f-") {
					parts := strings.Split(body, "-")
					idx, _ := strconv.Atoi(parts[2])
					groupSeen[parts[1]] = append(groupSeen[parts[1]], idx)
				}
				del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("d", k)), ReceiptHandle: m.ReceiptHandle})
			}
			mu.Unlock()
			if len(del) > 0 {
				_, _ = set.client(i).DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &queue, Entries: del})
			}
		}
	}
	for i := 0; i < 6; i++ {
		consumers.Add(2)
		go consume(i, qurl)
		go consume(i, furl)
	}
	// Halfway: kill -9 broker 1 and restart it on the same store.
	testutil.Eventually(t, 10*time.Minute, "half of the messages received", func() bool { return receivedN.Load() >= killAt })
	set.procs[1].kill()
	killed.Store(true)
	t.Logf("killed broker 1 after %d messages received (%v)", receivedN.Load(), time.Since(start).Round(time.Millisecond))
	np := startBroker(t, t.TempDir(), "--store", url)
	set.mu.Lock()
	set.procs[1], set.clients[1] = np, sqsClient(np.URL)
	set.mu.Unlock()

	sendsDone.Wait()
	want := total + fifoGroups*fifoPer
	testutil.Eventually(t, 10*time.Minute, "every acknowledged message received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for b := range acked {
			if !received[b] {
				return false
			}
		}
		return true
	})
	close(done)
	consumers.Wait()
	elapsed := time.Since(start)

	mu.Lock()
	defer mu.Unlock()
	if len(acked) != want {
		t.Fatalf("%d distinct bodies acknowledged, want %d", len(acked), want)
	}
	redelivered, violations := 0, 0
	for id, ds := range deliveries {
		sort.Slice(ds, func(i, j int) bool { return ds[i].seen.Before(ds[j].seen) })
		for k := 1; k < len(ds); k++ {
			redelivered++
			// Wall-clock readings (Round(0) drops the monotonic one): a
			// lease's deadline is a wall-clock instant (PostgreSQL's now()),
			// so a step of the machine's clock moves it, and a CI run once
			// saw a redelivery 16 ms past the deadline by the wall clock
			// but before it by the monotonic clock.
			if leaseEnd := ds[k-1].start.Round(0).Add(vis * time.Second); ds[k].seen.Round(0).Before(leaseEnd) {
				violations++
				if violations <= 5 {
					t.Errorf("message %s (%s) delivered at %v while the lease of its delivery at %v (ending no earlier than %v) was live",
						id, ds[k].body, ds[k].seen.Format(time.StampMilli), ds[k-1].seen.Format(time.StampMilli), leaseEnd.Format(time.StampMilli))
				}
			}
		}
	}
	for g, idxs := range groupSeen {
		top := -1
		for _, i := range idxs {
			if i > top+1 {
				t.Errorf("FIFO group %s: message %d delivered before %d", g, i, top+1)
				break
			}
			top = max(top, i)
		}
		if top != fifoPer-1 {
			t.Errorf("FIFO group %s: delivered up to %d, want %d", g, top, fifoPer-1)
		}
	}
	t.Logf("multi-broker: %d standard + %d FIFO messages through 3 brokers in %v (%.0f msg/s); 1 kill -9; %d redeliveries (after a lease ended); %d send retries",
		total, fifoGroups*fifoPer, elapsed.Round(time.Millisecond), float64(want)/elapsed.Seconds(), redelivered, sendErrs.Load())
	if violations > 0 {
		t.Fatalf("%d deliveries while a lease was live", violations)
	}
}

func mustQueue(t *testing.T, ctx context.Context, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return *out.QueueUrl
}

// measureWake long-polls on broker a, sends through broker b once the poll
// is waiting, and returns how long after the send's answer the poll
// returned with the message, for n rounds.
func measureWake(t *testing.T, a, b *sqs.Client, queueA, queueB string, n int) []time.Duration {
	t.Helper()
	ctx := ctxT(t)
	var out []time.Duration
	for i := 0; i < n; i++ {
		got := make(chan error, 1)
		var returned time.Time
		go func() {
			r, err := a.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueA, WaitTimeSeconds: 10})
			returned = time.Now()
			if err == nil && len(r.Messages) != 1 {
				err = errors.New("the long poll returned no message")
			}
			if err == nil {
				_, err = a.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueA, ReceiptHandle: r.Messages[0].ReceiptHandle})
			}
			got <- err
		}()
		// The poll must be waiting before the send: give its request time
		// to reach the broker (this is the measured scenario, not a wait
		// for a condition).
		time.Sleep(300 * time.Millisecond)
		if _, err := b.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueB, MessageBody: aws.String("wake")}); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		out = append(out, returned.Sub(sent))
	}
	return out
}

// TestSerialPostgresWakeLatency: a long poll on one broker wakes soon after a
// send through another (LISTEN/NOTIFY). The figure is printed; the bound
// asserted is generous (the aim is 200 ms). Serial tier only (SLUICE_SERIAL=1).
func TestSerialPostgresWakeLatency(t *testing.T) {
	if os.Getenv("SLUICE_SERIAL") != "1" {
		t.Skip("timing-sensitive: runs in the serial tier (SLUICE_SERIAL=1)")
	}
	url := pgDatabase(t)
	pa := startBroker(t, t.TempDir(), "--store", url)
	pb := startBroker(t, t.TempDir(), "--store", url)
	a, b := sqsClient(pa.URL), sqsClient(pb.URL)
	ctx := ctxT(t)
	qa := mustQueue(t, ctx, a, "wake", nil)
	qb := mustQueue(t, ctx, b, "wake", nil)
	lat := measureWake(t, a, b, qa, qb, 10)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("cross-broker wake latency over %d rounds: median %v, max %v (aim 200ms)", len(lat), lat[len(lat)/2], lat[len(lat)-1])
	if med := lat[len(lat)/2]; med > time.Second {
		t.Fatalf("median cross-broker wake latency %v, want well under 1s (aim 200ms)", med)
	}
}
