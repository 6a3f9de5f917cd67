package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testutil"
)

// TestStreamCrashKill9 is TestCrashKill9 over the stream API: producers
// pipeline sends on Publish streams (a send counts once its confirm came),
// consumers ack on Consume streams, and the broker is kill -9ed under that
// load and restarted on its data. Every confirmed send must be delivered,
// nothing whose ack was answered may come back.
// SLUICE_STREAM_CRASH_CYCLES sets the number of kills (default 2; 10
// under SLUICE_SCALE=full).
func TestStreamCrashKill9(t *testing.T) {
	cycles := testutil.Scale(t, "SLUICE_STREAM_CRASH_CYCLES", 2, 10, 1)
	dir := t.TempDir()
	ctx := ctxT(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	led := &crashLedger{acked: map[string]bool{}, deleted: map[string]bool{}, tried: map[string]bool{}, received: map[string]int{}}
	var queueURL string
	for cycle := range cycles {
		p := startBroker(t, dir)
		out, err := sqsClient(p.URL).CreateQueue(ctx, &sqs.CreateQueueInput{
			QueueName: aws.String("crash"), Attributes: map[string]string{"VisibilityTimeout": "5"}})
		if err != nil {
			t.Fatalf("cycle %d: create queue: %v", cycle, err)
		}
		queueURL = *out.QueueUrl
		c, err := stream.Dial(p.URL, stream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var sends atomic.Int64
		for w := range 2 {
			wg.Go(func() { streamProducer(runCtx, c, fmt.Sprintf("c%dw%d", cycle, w), led, &sends) })
		}
		for range 2 {
			wg.Go(func() { streamConsumer(runCtx, t, c, led) })
		}
		testutil.Eventually(t, 30*time.Second, "first confirmed sends", func() bool { return sends.Load() > 200 })
		time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond) // the random kill moment, not a wait for a condition
		p.kill()
		stop()
		wg.Wait()
		_ = c.Close()
		led.mu.Lock()
		t.Logf("cycle %d: killed after %d confirmed sends in total, %d acks", cycle, len(led.acked), len(led.deleted))
		led.mu.Unlock()
	}
	p := startBroker(t, dir)
	drainLedger(t, ctx, sqsClient(p.URL), queueURL, led, cycles)
}

// streamProducer pipelines sends of 1 to 5 messages, up to 16 waiting for
// their confirms, until ctx ends or the stream does.
func streamProducer(ctx context.Context, c *stream.Client, prefix string, led *crashLedger, sends *atomic.Int64) {
	pub, err := c.Publisher(ctx)
	if err != nil {
		return
	}
	defer pub.Close(context.Background())
	type pending struct {
		ids []string
		f   *stream.Confirm
	}
	window := make(chan pending, 16)
	var dead atomic.Bool // a confirm failed with the stream's error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range window {
			res, err := p.f.Wait(context.Background())
			if err != nil {
				// The broker died (the outcome is unknown), or refused the
				// send.
				dead.Store(dead.Load() || !isSendError(err))
				continue
			}
			led.mu.Lock()
			for i, r := range res {
				if r.Err == nil {
					led.acked[p.ids[i]] = true
				}
			}
			led.mu.Unlock()
			sends.Add(int64(len(res)))
		}
	}()
	for i := 0; ctx.Err() == nil && !dead.Load(); i++ {
		n := 1 + i%5
		ids := make([]string, n)
		msgs := make([]*streampb.Envelope, n)
		for j := range n {
			ids[j] = fmt.Sprintf("%s-%d.%d", prefix, i, j)
			msgs[j] = &streampb.Envelope{Body: crashBody(ids[j])}
		}
		window <- pending{ids, pub.PublishAsync("crash", msgs...)}
	}
	close(window)
	<-done
}

// isSendError reports whether err refused one send only (the stream lives).
func isSendError(err error) bool {
	_, ok := err.(*stream.Error)
	return ok
}

// streamConsumer acks what its stream delivers, with 8 handlers, until ctx
// ends or the stream does.
func streamConsumer(ctx context.Context, t *testing.T, c *stream.Client, led *crashLedger) {
	con, err := c.Consume(ctx, stream.ConsumeOptions{Queue: "crash", Credit: 32, ClientName: "crash-consumer"})
	if err != nil {
		return
	}
	defer con.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				m, err := con.Receive(ctx)
				if err != nil {
					return
				}
				id, err := checkBody(m.GetBody())
				if err != nil {
					t.Error(err)
					continue
				}
				led.mu.Lock()
				if led.deleted[id] {
					t.Errorf("message %s delivered again after its ack was answered", id)
				}
				led.received[id]++
				led.tried[id] = true
				led.mu.Unlock()
				if err := con.Ack(ctx, m.GetReceipt()); err != nil {
					if isSendError(err) {
						continue // the lease ended: the message comes back
					}
					return
				}
				led.mu.Lock()
				led.deleted[id] = true
				led.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// The helper process of TestStreamConsumerKilled: it consumes the queue
// named by SLUICE_STREAM_HELPER_QUEUE at SLUICE_STREAM_HELPER_URL, prints
// "holding N" for each message it takes and never settles any.
func TestStreamHelperProcess(t *testing.T) {
	url := os.Getenv("SLUICE_STREAM_HELPER_URL")
	if url == "" {
		t.Skip("the helper process of TestStreamConsumerKilled (run by it)")
	}
	c, err := stream.Dial(url, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	con, err := c.Consume(ctx, stream.ConsumeOptions{Queue: os.Getenv("SLUICE_STREAM_HELPER_QUEUE"), Credit: 10, ClientName: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; ; n++ {
		if _, err := con.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("holding %d\n", n)
	}
}

// TestStreamConsumerKilled: a consumer killed with its messages held (kill
// -9: the kernel closes its connection) gives them back at once, each as a
// failed attempt with the reason "consumer disconnected"; none is lost.
func TestStreamConsumerKilled(t *testing.T) {
	t.Parallel()
	p := startBroker(t, t.TempDir())
	ctx := ctxT(t)
	sq := sqsClient(p.URL)
	out, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("held"), Attributes: map[string]string{"VisibilityTimeout": "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Dial(p.URL, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pub, err := c.Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		if _, err := pub.Publish(ctx, "held", &streampb.Envelope{Body: "m" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SLUICE_STREAM_HELPER_URL="+p.URL, "SLUICE_STREAM_HELPER_QUEUE=held")
	var stdout testutil.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	testutil.Eventually(t, 30*time.Second, "the helper holds 10 messages", func() bool {
		return strings.Contains(stdout.String(), "holding 10\n")
	})
	attrs := func() map[string]string {
		a, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		return a.Attributes
	}
	if a := attrs(); a["ApproximateNumberOfMessagesNotVisible"] != "10" || a["ApproximateNumberOfMessages"] != "15" {
		t.Fatalf("before the kill: %v", a)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	testutil.Eventually(t, 30*time.Second, "the held messages are back", func() bool {
		a := attrs()
		return a["ApproximateNumberOfMessagesNotVisible"] == "0" && a["ApproximateNumberOfMessages"] == "25"
	})
	// Each came back as a failed attempt: the 10 the helper held carry the
	// reason.
	con, err := c.Consume(ctx, stream.ConsumeOptions{Queue: "held", Credit: 25})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	failed := 0
	for range 25 {
		m, err := con.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.GetFailureReason() == "consumer disconnected" && m.GetAttempts() == 2 {
			failed++
		}
		if err := con.Ack(ctx, m.GetReceipt()); err != nil {
			t.Fatal(err)
		}
	}
	if failed != 10 {
		t.Fatalf("%d messages came back as failures of the killed consumer, want 10", failed)
	}
}
