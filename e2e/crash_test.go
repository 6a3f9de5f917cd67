package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/testutil"
)

// crashBody returns a self-checking body: the id, then a SHA-256 of it, padded.
func crashBody(id string) string {
	sum := sha256.Sum256([]byte(id))
	return id + " " + hex.EncodeToString(sum[:]) + " " + strings.Repeat("x", 200)
}

// checkBody returns the id of a body made by crashBody, or an error if it is corrupted.
func checkBody(b string) (string, error) {
	parts := strings.SplitN(b, " ", 3)
	if len(parts) != 3 || crashBody(parts[0]) != b {
		return "", fmt.Errorf("corrupted body %.80q", b)
	}
	return parts[0], nil
}

// crashLedger is what the clients were told, across all broker lifetimes.
type crashLedger struct {
	mu      sync.Mutex
	acked   map[string]bool // send returned success
	deleted map[string]bool // delete returned success
	// tried: a delete was sent; if the broker died before answering, the
	// delete may or may not have been applied, so the message may not return.
	tried    map[string]bool
	received map[string]int
}

// TestCrashKill9 sends and receives through the real binary with a real SQS
// client, kill -9s the broker at a random moment, restarts it on the same data
// directory, and repeats. At the end every message whose send succeeded must be
// delivered (uncorrupted), and no message whose delete succeeded may come back.
// SLUICE_CRASH_CYCLES sets the number of kills (default 4; 20 under
// SLUICE_SCALE=full).
func TestCrashKill9(t *testing.T) {
	cycles := testutil.Scale(t, "SLUICE_CRASH_CYCLES", 4, 20, 1)
	dir := t.TempDir()
	ctx := ctxT(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	led := &crashLedger{acked: map[string]bool{}, deleted: map[string]bool{}, tried: map[string]bool{}, received: map[string]int{}}

	var queueURL string
	for cycle := 0; cycle < cycles; cycle++ {
		p := startBroker(t, dir)
		c := sqsClient(p.URL)
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
			QueueName:  aws.String("crash"),
			Attributes: map[string]string{"VisibilityTimeout": "5"},
		})
		if err != nil {
			t.Fatalf("cycle %d: create queue: %v", cycle, err)
		}
		queueURL = *out.QueueUrl
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var sends atomic.Int64
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crashProducer(runCtx, c, queueURL, fmt.Sprintf("c%dw%d", cycle, w), led, &sends)
			}()
		}
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crashConsumer(runCtx, t, c, queueURL, led)
			}()
		}
		// Kill at a random moment once traffic is flowing.
		testutil.Eventually(t, 30*time.Second, "first sends", func() bool { return sends.Load() > 20 })
		time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond) // the random kill moment, not a wait for a condition
		p.kill()
		stop()
		wg.Wait()
		led.mu.Lock()
		t.Logf("cycle %d: killed after %d acked sends in total, %d deletes", cycle, len(led.acked), len(led.deleted))
		led.mu.Unlock()
	}

	// Final lifetime: drain everything and check the ledger.
	p := startBroker(t, dir)
	drainLedger(t, ctx, sqsClient(p.URL), queueURL, led, cycles)
}

// drainLedger receives and deletes every message of the queue on a broker
// started after the last kill, and checks the ledger: every message whose
// send succeeded is delivered (uncorrupted), none whose delete succeeded
// comes back.
func drainLedger(t *testing.T, ctx context.Context, c *sqs.Client, queueURL string, led *crashLedger, cycles int) {
	t.Helper()
	left := map[string]bool{}
	led.mu.Lock()
	for id := range led.acked {
		if !led.deleted[id] && !led.tried[id] {
			left[id] = true
		}
	}
	led.mu.Unlock()
	t.Logf("draining: %d acknowledged messages never handed to a delete", len(left))
	deadline := time.Now().Add(60 * time.Second)
	for len(left) > 0 && time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("drain receive: %v", err)
		}
		var entries []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			id, err := checkBody(*m.Body)
			if err != nil {
				t.Fatal(err)
			}
			if led.deleted[id] {
				t.Errorf("message %s came back after its delete succeeded", id)
			}
			delete(left, id)
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(entries) > 0 {
			if _, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries}); err != nil {
				t.Fatalf("drain delete: %v", err)
			}
		}
	}
	if len(left) > 0 {
		n := 0
		for id := range left {
			if n++; n > 10 {
				break
			}
			t.Errorf("acknowledged message %s was never delivered", id)
		}
		t.Fatalf("%d acknowledged messages lost", len(left))
	}
	// Nothing else may remain but messages whose send outcome was unknown.
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 6})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		id, err := checkBody(*m.Body)
		if err != nil {
			t.Fatal(err)
		}
		if led.deleted[id] {
			t.Errorf("message %s came back after its delete succeeded", id)
		}
	}
	led.mu.Lock()
	t.Logf("%d cycles: %d acked sends, %d acked deletes, all delivered, none resurrected", cycles, len(led.acked), len(led.deleted))
	led.mu.Unlock()
}

func crashProducer(ctx context.Context, c *sqs.Client, url, prefix string, led *crashLedger, sends *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		if i%2 == 0 {
			id := fmt.Sprintf("%s-%d", prefix, i)
			if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(crashBody(id))}); err != nil {
				return
			}
			led.mu.Lock()
			led.acked[id] = true
			led.mu.Unlock()
			sends.Add(1)
			continue
		}
		var entries []types.SendMessageBatchRequestEntry
		for j := 0; j < 5; j++ {
			id := fmt.Sprintf("%s-%d.%d", prefix, i, j)
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(crashBody(id))})
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return
		}
		led.mu.Lock()
		for _, s := range out.Successful {
			j, _ := strconv.Atoi(*s.Id)
			led.acked[fmt.Sprintf("%s-%d.%d", prefix, i, j)] = true
		}
		led.mu.Unlock()
		sends.Add(int64(len(out.Successful)))
	}
}

func crashConsumer(ctx context.Context, t *testing.T, c *sqs.Client, url string, led *crashLedger) {
	for ctx.Err() == nil {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			return
		}
		for _, m := range out.Messages {
			id, err := checkBody(*m.Body)
			if err != nil {
				t.Error(err)
				continue
			}
			led.mu.Lock()
			if led.deleted[id] {
				t.Errorf("message %s delivered again after its delete succeeded", id)
			}
			led.received[id]++
			led.tried[id] = true
			led.mu.Unlock()
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return
			}
			led.mu.Lock()
			led.deleted[id] = true
			led.mu.Unlock()
		}
	}
}
