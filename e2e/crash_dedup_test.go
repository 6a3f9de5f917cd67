package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	sclient "github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testutil"
)

// dedupLedger is what the producers of TestCrashKill9Dedup were told,
// across every broker lifetime, per queue and dedup id.
type dedupLedger struct {
	mu sync.Mutex
	// answered is the message id the first successful send of an id was
	// answered with; every later send of it must get the same.
	answered map[string]string
	// unknown are ids whose send got no answer (the broker died): stored
	// or not; the next send of it tells.
	unknown map[string]bool
	// mismatches counts answers that differ from answered.
	mismatches []string
}

// note records the answer msgID to a send of key (queue/id).
func (l *dedupLedger) note(key, msgID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.unknown, key)
	if first, ok := l.answered[key]; ok {
		if first != msgID {
			l.mismatches = append(l.mismatches, fmt.Sprintf("%s: answered %s, first answered %s", key, msgID, first))
		}
		return
	}
	l.answered[key] = msgID
}

func (l *dedupLedger) lost(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.answered[key]; !ok {
		l.unknown[key] = true
	}
}

// keys returns every id sent to queue so far, answered or not.
func (l *dedupLedger) keys(queue string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.answered {
		if q, id := splitKey(k); q == queue {
			out = append(out, id)
		}
	}
	for k := range l.unknown {
		if q, id := splitKey(k); q == queue {
			out = append(out, id)
		}
	}
	return out
}

func splitKey(k string) (queue, id string) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}

// dedupQueues are the queues of TestCrashKill9Dedup: one in window mode
// (an hour, so that every window stays open for the whole test), one with
// DeduplicationUntil=settled (its messages are never received, so they
// hold their ids).
var dedupQueues = map[string]map[string]string{
	"pay":  {"DeduplicationWindowSeconds": "3600"},
	"jobs": {"DeduplicationUntil": "settled"},
}

// TestCrashKill9Dedup: producers send messages with dedup ids to standard
// queues, and send ids again (a producer's retry), while the real binary is
// killed with kill -9 at a random moment and restarted on the same data
// directory. After every restart each id sent so far is sent again. Every
// send of an id must be answered with the same message id as its first
// answered send, and at the end each queue holds exactly one message per id
// that was ever answered (and at most one for an id whose only send got no
// answer): no duplicate is stored across a crash. SLUICE_CRASH_CYCLES sets
// the number of kills (default 3; 20 under SLUICE_SCALE=full).
func TestCrashKill9Dedup(t *testing.T) {
	cycles := testutil.Scale(t, "SLUICE_CRASH_CYCLES", 3, 20, 1)
	dir := t.TempDir()
	ctx := ctxT(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	led := &dedupLedger{answered: map[string]string{}, unknown: map[string]bool{}}

	urls := map[string]string{}
	start := func() (*brokerProc, *sqs.Client) {
		p := startBroker(t, dir)
		c := sqsClient(p.URL)
		for name, attrs := range dedupQueues {
			out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
			if err != nil {
				t.Fatalf("create queue %s: %v", name, err)
			}
			urls[name] = *out.QueueUrl
		}
		// Every id sent so far, again: the windows (and the settled ids)
		// survived the kill.
		for name := range dedupQueues {
			resendAll(ctx, t, c, urls[name], name, led)
		}
		return p, c
	}
	for cycle := range cycles {
		p, c := start()
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var sends atomic.Int64
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				queue := []string{"pay", "jobs"}[w%2]
				dedupProducer(runCtx, c, urls[queue], queue, fmt.Sprintf("c%dw%d", cycle, w), led, &sends)
			}()
		}
		testutil.Eventually(t, 30*time.Second, "first sends", func() bool { return sends.Load() > 20 })
		time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond) // the random kill moment, not a wait for a condition
		p.kill()
		stop()
		wg.Wait()
		led.mu.Lock()
		t.Logf("cycle %d: killed after %d answered ids in total, %d without an answer", cycle, len(led.answered), len(led.unknown))
		led.mu.Unlock()
	}

	p, c := start()
	led.mu.Lock()
	for _, m := range led.mismatches {
		t.Error(m)
	}
	if len(led.unknown) > 0 {
		t.Fatalf("%d ids still without an answer after the final resend", len(led.unknown))
	}
	led.mu.Unlock()
	for name := range dedupQueues {
		drainDedup(ctx, t, c, p.URL, urls[name], name, led)
	}
}

// dedupProducer sends new ids to queue, one message or a batch of five at
// a time, and every third round sends again an id it was answered for.
func dedupProducer(ctx context.Context, c *sqs.Client, url, queue, prefix string, led *dedupLedger, sends *atomic.Int64) {
	var mine []string
	for i := 0; ctx.Err() == nil; i++ {
		if i%3 == 2 && len(mine) > 0 {
			id := mine[i%len(mine)]
			out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(crashBody(id)), MessageDeduplicationId: aws.String(id)})
			if err != nil {
				return
			}
			led.note(queue+"/"+id, *out.MessageId)
			continue
		}
		if i%2 == 0 {
			id := fmt.Sprintf("%s-%d", prefix, i)
			out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(crashBody(id)), MessageDeduplicationId: aws.String(id)})
			if err != nil {
				led.lost(queue + "/" + id)
				return
			}
			led.note(queue+"/"+id, *out.MessageId)
			mine = append(mine, id)
			sends.Add(1)
			continue
		}
		var entries []types.SendMessageBatchRequestEntry
		ids := map[string]string{}
		for j := range 5 {
			id := fmt.Sprintf("%s-%d.%d", prefix, i, j)
			ids[strconv.Itoa(j)] = id
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(crashBody(id)), MessageDeduplicationId: aws.String(id)})
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			for _, id := range ids {
				led.lost(queue + "/" + id)
			}
			return
		}
		for _, s := range out.Successful {
			led.note(queue+"/"+ids[*s.Id], *s.MessageId)
			mine = append(mine, ids[*s.Id])
		}
		sends.Add(int64(len(out.Successful)))
	}
}

// resendAll sends every id of queue in the ledger again, in batches of 10,
// and records the answers (which note compares with the first ones).
func resendAll(ctx context.Context, t *testing.T, c *sqs.Client, url, queue string, led *dedupLedger) {
	t.Helper()
	ids := led.keys(queue)
	for len(ids) > 0 {
		n := min(10, len(ids))
		var entries []types.SendMessageBatchRequestEntry
		for j, id := range ids[:n] {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(crashBody(id)), MessageDeduplicationId: aws.String(id)})
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("resend to %s after a restart: %v %+v", queue, err, out)
		}
		for _, s := range out.Successful {
			j, _ := strconv.Atoi(*s.Id)
			led.note(queue+"/"+ids[j], *s.MessageId)
		}
		ids = ids[n:]
	}
}

// drainDedup receives every message of queue and checks that it holds
// exactly one message per answered id, the one each send was answered with.
// It logs the status of a missing message (from the broker at base): one
// leased by the drain yet never seen means an answer lost on the way.
func drainDedup(ctx context.Context, t *testing.T, c *sqs.Client, base, url, queue string, led *dedupLedger) {
	t.Helper()
	seen := map[string]string{}
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			VisibilityTimeout: 600, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("drain %s: %v", queue, err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			id, err := checkBody(*m.Body)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[id]; dup {
				t.Errorf("%s holds two messages with dedup id %s: %s and %s", queue, id, other, *m.MessageId)
			}
			seen[id] = *m.MessageId
		}
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	var missing []string
	defer func() {
		if len(missing) == 0 {
			return
		}
		nc, err := sclient.New(base)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		for _, id := range missing {
			st, err := nc.MessageStatus(ctx, queue, id)
			t.Logf("%s: status of missing message %s: state %q, %d receive(s), lease ends %v (err %v)", queue, id, st.State, st.ReceiveCount, st.LeaseEndsAt, err)
		}
	}()
	want := 0
	for k, msgID := range led.answered {
		q, id := splitKey(k)
		if q != queue {
			continue
		}
		want++
		if got, ok := seen[id]; !ok {
			t.Errorf("%s: the message of answered id %s (%s) is missing", queue, id, msgID)
			missing = append(missing, msgID)
		} else if got != msgID {
			t.Errorf("%s: id %s was answered %s, but the queue holds %s", queue, id, msgID, got)
		}
	}
	if len(seen) != want {
		t.Errorf("%s holds %d messages for %d answered ids", queue, len(seen), want)
	}
	t.Logf("%s: %d ids, one message each", queue, want)
}
