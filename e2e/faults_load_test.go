package e2e

// The mixed load of the fault tests: producers and consumers of both SQS
// protocols on a standard queue (with a dead-letter queue, maxReceiveCount 2)
// and a FIFO queue (several groups), sending single messages and batches,
// receiving, deleting, changing visibility (nacks and extensions), and
// leaving some messages undeleted so that they move to the dead-letter queue.
// Every request and answer goes into a faultcheck.Checker.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/faultcheck"
)

// faultVis is the visibility timeout of the fault tests' queues: short, so
// that expired leases, redeliveries and dead-letter moves happen within a
// cycle, and long enough for the lease rule to mean something.
const faultVis = 4 * time.Second

// fifoGroup is one FIFO group's producer state, kept across broker
// lifetimes: a send whose answer was lost is sent again (same dedup id)
// before the next message of the group.
type fifoGroup struct {
	name string
	next int
}

// faultLoad is the queues, the checker and the producers' state.
type faultLoad struct {
	chk             *faultcheck.Checker
	std, fifo, dlq  string // queue paths (/account/name)
	groups          []*fifoGroup
	seq             atomic.Int64 // standard keys
	sends, receives atomic.Int64 // acknowledged sends, messages received
	errs            atomic.Int64 // requests that failed
	seed            uint64
}

func newFaultLoad(seed uint64) *faultLoad {
	l := &faultLoad{chk: faultcheck.New(time.Second), seed: seed}
	for g := 0; g < 4; g++ {
		l.groups = append(l.groups, &fifoGroup{name: fmt.Sprint("g", g)})
	}
	return l
}

// createQueues creates (or finds again) the three queues through base.
func (l *faultLoad) createQueues(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	c := sqsClient(base)
	vis := fmt.Sprint(int(faultVis / time.Second))
	dlqURL := mustQueue(t, ctx, c, "fault-dlq", map[string]string{"VisibilityTimeout": vis})
	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlqURL, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	stdURL := mustQueue(t, ctx, c, "fault-std", map[string]string{"VisibilityTimeout": vis,
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, a.Attributes["QueueArn"])})
	fifoURL := mustQueue(t, ctx, c, "fault.fifo", map[string]string{"FifoQueue": "true", "VisibilityTimeout": vis})
	l.std, l.fifo, l.dlq = urlPath(t, stdURL), urlPath(t, fifoURL), urlPath(t, dlqURL)
}

func urlPath(t *testing.T, u string) string {
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Path
}

// endpoints gives worker i the client of a running broker, or nil while
// none is up. Workers call it before every request.
type endpoints func(i int, protocol string) wireClient

// run starts the workers and returns when ctx ends and all have stopped.
func (l *faultLoad) run(ctx context.Context, ep endpoints) {
	var wg sync.WaitGroup
	protos := []string{"json", "query"}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() { defer wg.Done(); l.stdProducer(ctx, ep, w, protos[w%2]) }()
	}
	for g, grp := range l.groups {
		wg.Add(1)
		go func() { defer wg.Done(); l.fifoProducer(ctx, ep, g, protos[g%2], grp) }()
	}
	for w := 0; w < 4; w++ {
		queue, fifo := l.std, false
		if w >= 2 {
			queue, fifo = l.fifo, true
		}
		wg.Add(1)
		go func() { defer wg.Done(); l.consumer(ctx, ep, w, protos[w%2], queue, fifo) }()
	}
	wg.Wait()
}

// maxBacklog bounds the messages sent and not yet received: producers
// wait past it, so that the final drain stays short.
const maxBacklog = 300

// throttled reports whether producers should wait for the consumers.
func (l *faultLoad) throttled() bool { return l.sends.Load()-l.receives.Load() > maxBacklog }

// pause backs off after a failed request (the broker is down or refusing).
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond): // backoff, not a wait for a condition
	}
}

// stdProducer sends to the standard queue, single messages and batches of
// 5 in turn. One key in 10 is a poison message ("p…") that no consumer
// deletes: it moves to the dead-letter queue after two receives.
func (l *faultLoad) stdProducer(ctx context.Context, ep endpoints, w int, proto string) {
	for i := 0; ctx.Err() == nil; i++ {
		if l.throttled() {
			pause(ctx)
			continue
		}
		n := 1
		if i%2 == 1 {
			n = 5
		}
		var keys []string
		var entries []wireEntry
		for j := 0; j < n; j++ {
			s := l.seq.Add(1)
			key := fmt.Sprintf("s%d", s)
			if s%10 == 0 {
				key = fmt.Sprintf("p%d", s)
			}
			l.chk.Sent(l.std, key, "", 0, false)
			keys = append(keys, key)
			entries = append(entries, wireEntry{Body: faultcheck.Body(key)})
		}
		c := ep(w, proto)
		if c == nil {
			pause(ctx)
			continue
		}
		ok, err := c.Send(ctx, l.std, entries)
		for j, k := range keys {
			if ok[j] {
				l.chk.Sent(l.std, k, "", 0, true)
				l.sends.Add(1)
			}
		}
		if err != nil {
			l.errs.Add(1)
			pause(ctx)
		}
	}
}

// fifoProducer sends the messages of one group one after another, each
// acknowledged before the next; a failed send is sent again with the same
// deduplication id.
func (l *faultLoad) fifoProducer(ctx context.Context, ep endpoints, w int, proto string, g *fifoGroup) {
	for ctx.Err() == nil {
		if l.throttled() {
			pause(ctx)
			continue
		}
		key := fmt.Sprintf("f-%s-%d", g.name, g.next)
		l.chk.Sent(l.fifo, key, g.name, g.next, false)
		c := ep(w, proto)
		if c == nil {
			pause(ctx)
			continue
		}
		ok, err := c.Send(ctx, l.fifo, []wireEntry{{Body: faultcheck.Body(key), Group: g.name, Dedup: key}})
		if err == nil && ok[0] {
			l.chk.Sent(l.fifo, key, g.name, g.next, true)
			l.sends.Add(1)
			g.next++
			continue
		}
		l.errs.Add(1)
		pause(ctx)
	}
}

// consumer receives from queue and, per message: deletes it (most), nacks
// it (visibility 0), extends its lease then deletes it, or leaves it to
// expire. Poison messages are always left.
func (l *faultLoad) consumer(ctx context.Context, ep endpoints, w int, proto, queue string, fifo bool) {
	rng := rand.New(rand.NewPCG(l.seed, uint64(w)))
	for ctx.Err() == nil {
		c := ep(w, proto)
		if c == nil {
			pause(ctx)
			continue
		}
		start := time.Now()
		ms, err := c.Receive(ctx, queue, 10, 1)
		answered := time.Now()
		if err != nil {
			l.errs.Add(1)
			pause(ctx)
			continue
		}
		l.receives.Add(int64(len(ms)))
		for _, m := range ms {
			d := l.chk.Received(queue+" ("+proto+")", m.ID, m.Body, false, start, answered, faultVis)
			if strings.HasPrefix(m.Body, "p") {
				continue
			}
			switch r := rng.IntN(100); {
			case r < 72:
				l.delete(ctx, c, queue, m.Receipt, d)
			case r < 82:
				l.changeVisibility(ctx, c, queue, m.Receipt, d, 0)
			case r < 90:
				if l.changeVisibility(ctx, c, queue, m.Receipt, d, int(faultVis/time.Second)+2) {
					l.delete(ctx, c, queue, m.Receipt, d)
				}
			default: // left to expire: redelivered, or dead-lettered at its second receive
			}
		}
	}
}

func (l *faultLoad) delete(ctx context.Context, c wireClient, queue, receipt string, d faultcheck.Delivery) {
	start := time.Now()
	err := c.Delete(ctx, queue, receipt)
	l.chk.Deleted(d, start, time.Now(), err == nil)
	if err != nil {
		l.errs.Add(1)
	}
}

func (l *faultLoad) changeVisibility(ctx context.Context, c wireClient, queue, receipt string, d faultcheck.Delivery, secs int) bool {
	start := time.Now()
	err := c.ChangeVisibility(ctx, queue, receipt, secs)
	// Any error is unknown, not "unchanged": aws-sdk-go-v2 retries a
	// request whose answer was lost, and the retry of an applied nack is
	// answered MessageNotInflight.
	l.chk.VisibilityChanged(d, start, time.Duration(secs)*time.Second, err == nil)
	if err != nil {
		l.errs.Add(1)
	}
	return err == nil
}

// drain receives and deletes everything left in the three queues through
// c (one goroutine per queue), until the checker has found every
// acknowledged message that was not deleted and no message has come for
// longer than a lease, or until timeout. It returns how many messages it
// took from the dead-letter queue.
//
// The queues must be read at once: the end condition is the whole
// checker's, so a loop over one queue after another spins on the first
// until the timeout and never reads the others (once taken for a FIFO queue
// that answered nothing: visible messages, none in flight, no delivery).
func (l *faultLoad) drain(t *testing.T, ctx context.Context, c wireClient, timeout time.Duration) int {
	t.Helper()
	l.chk.StartDrain()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastMsg atomic.Int64
	lastMsg.Store(time.Now().UnixNano())
	var dead atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, q := range []string{l.std, l.fifo, l.dlq} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if l.chk.Unresolved() == 0 && time.Since(time.Unix(0, lastMsg.Load())) > faultVis+time.Second {
					return
				}
				start := time.Now()
				ms, err := c.Receive(ctx, q, 10, 1)
				answered := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("drain: receive from %s: %w", q, err)
					}
					return
				}
				for _, m := range ms {
					lastMsg.Store(time.Now().UnixNano())
					if q == l.dlq {
						dead.Add(1)
					}
					d := l.chk.Received(q, m.ID, m.Body, q == l.dlq, start, answered, faultVis)
					start := time.Now()
					err := c.Delete(ctx, q, m.Receipt)
					l.chk.Deleted(d, start, time.Now(), err == nil)
					if err != nil {
						errs <- fmt.Errorf("drain: delete from %s: %w", q, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := l.chk.Unresolved(); n > 0 {
		t.Errorf("drain: %d acknowledged messages still unresolved after %v", n, timeout)
	}
	return int(dead.Load())
}

// dumpQueues logs the native API's view of the three queues (stats and the
// first messages), to explain a failed drain.
func (l *faultLoad) dumpQueues(t *testing.T, base string) {
	t.Helper()
	for _, q := range []string{l.std, l.fifo, l.dlq} {
		name := q[strings.LastIndex(q, "/")+1:]
		for _, path := range []string{"/v1/queues/" + name + "/stats", "/v1/queues/" + name + "/messages?limit=5"} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Logf("dump %s: %v", path, err)
				continue
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4000))
			resp.Body.Close()
			t.Logf("dump %s: %s", path, b)
		}
	}
}

// report fails t with the checker's violations (the first 20) and logs the figures.
func (l *faultLoad) report(t *testing.T, what string) {
	t.Helper()
	vs := l.chk.Check()
	for i, v := range vs {
		if i == 20 {
			t.Errorf("... and %d more", len(vs)-20)
			break
		}
		t.Error(v)
	}
	s := l.chk.Stats()
	t.Logf("%s: %d acked sends, %d receives (%d redeliveries), %d acked deletes (%d unanswered), %d visibility changes, %d dead-letter arrivals, %d failed requests; %d violations",
		what, s.SendsAcked, s.Receives, s.Redeliveries, s.DeletesAcked, s.DeletesUnknown, s.VisibilityChanges, s.DLQArrived, l.errs.Load(), len(vs))
}

// clientCache keeps one client per broker URL and protocol.
type clientCache struct {
	mu sync.Mutex
	m  map[string]wireClient
}

func (cc *clientCache) get(base, proto string) wireClient {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = map[string]wireClient{}
	}
	k := proto + " " + base
	if c, ok := cc.m[k]; ok {
		return c
	}
	var c wireClient = newQueryClient(base)
	if proto == "json" {
		c = newJSONClient(base)
	}
	cc.m[k] = c
	return c
}
