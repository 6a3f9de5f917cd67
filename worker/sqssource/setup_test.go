package sqssource_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/sqssource"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is one Sluice broker for one test: the real server on 127.0.0.1:0
// over the embedded backend in t.TempDir(), and an aws-sdk-go-v2 client of
// its SQS API. With a fake clock (setup's fake), leases, delays and
// visibility changes are exact and instant: the test advances time.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *clocktest.FakeClock // nil on the wall clock
	c     *sqs.Client
	url   string
}

func setup(t *testing.T, fake bool) *env {
	t.Helper()
	var clock *clocktest.FakeClock
	cfg := testbroker.Config{Logger: testutil.Logger(t)}
	if fake {
		clock = clocktest.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		cfg.Clock = clock
	}
	url := testbroker.Start(t, cfg).URL
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	// The client as the package doc says to build it for Sluice: options
	// set directly, the HTTP client on sqs.Options.
	c := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:   &http.Client{Transport: sqssource.Transport(tr), Timeout: 30 * time.Second},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, ctx: ctx, clock: clock, c: c, url: url}
}

// queue creates a queue and returns its URL.
func (e *env) queue(name string, attrs map[string]string) string {
	e.t.Helper()
	out, err := e.c.CreateQueue(e.ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		e.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return *out.QueueUrl
}

// arn is a queue's QueueArn.
func (e *env) arn(url string) string {
	e.t.Helper()
	return e.attr(url, types.QueueAttributeNameQueueArn)
}

func (e *env) attr(url string, name types.QueueAttributeName) string {
	e.t.Helper()
	out, err := e.c.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{name}})
	if err != nil {
		e.t.Fatalf("GetQueueAttributes %s: %v", name, err)
	}
	return out.Attributes[string(name)]
}

// withDLQ creates name and its dead-letter queue name+"-dlq" (name's base
// +"-dlq.fifo" for a FIFO queue), redriving after maxReceive receives, and
// returns both URLs.
func (e *env) withDLQ(name string, fifo bool, maxReceive int) (src, dlq string) {
	e.t.Helper()
	attrs := map[string]string{}
	dlqName := name + "-dlq"
	if fifo {
		attrs["FifoQueue"] = "true"
		dlqName = name + "-dlq.fifo"
		name += ".fifo"
	}
	dlq = e.queue(dlqName, attrs)
	attrs["RedrivePolicy"] = `{"deadLetterTargetArn":"` + e.arn(dlq) + `","maxReceiveCount":"` + strconv.Itoa(maxReceive) + `"}`
	return e.queue(name, attrs), dlq
}

// send sends body with attrs (and a FIFO group and dedup id when group is
// set) and returns the message id.
func (e *env) send(url, body string, attrs map[string]types.MessageAttributeValue, group string) string {
	e.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageAttributes: attrs}
	if group != "" {
		in.MessageGroupId, in.MessageDeduplicationId = &group, aws.String("dedup-"+body)
	}
	out, err := e.c.SendMessage(e.ctx, in)
	if err != nil {
		e.t.Fatalf("SendMessage: %v", err)
	}
	return *out.MessageId
}

// rawReceive receives up to 10 messages of url with the SDK, every attribute.
func (e *env) rawReceive(url string) []types.Message {
	e.t.Helper()
	out, err := e.c.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		e.t.Fatalf("ReceiveMessage: %v", err)
	}
	return out.Messages
}

func (e *env) source(url string, cfg sqssource.Config) *sqssource.Source {
	e.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testutil.Logger(e.t)
	}
	s, err := sqssource.New(e.c, url, cfg)
	if err != nil {
		e.t.Fatalf("sqssource.New: %v", err)
	}
	return s
}

// receive asks src for up to 10 messages leased for lease, without waiting
// (the fake clock would not move a long poll's timer).
func (e *env) receive(src *sqssource.Source, lease time.Duration) []*worker.Message {
	e.t.Helper()
	msgs, err := src.Receive(e.ctx, worker.ReceiveRequest{Max: 10, Lease: lease})
	if err != nil {
		e.t.Fatalf("Receive: %v", err)
	}
	return msgs
}

func (e *env) receiveOne(src *sqssource.Source, lease time.Duration) *worker.Message {
	e.t.Helper()
	msgs := e.receive(src, lease)
	if len(msgs) != 1 {
		e.t.Fatalf("Receive: %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

func (e *env) receiveNone(src *sqssource.Source, when string) {
	e.t.Helper()
	if msgs := e.receive(src, time.Minute); len(msgs) != 0 {
		e.t.Fatalf("%s: received %d messages (first %q, receive count %d), want none", when, len(msgs), msgs[0].Body, msgs[0].ReceiveCount)
	}
}

// invisibleFor checks that src's one message stays invisible for exactly d
// from now: none at d-1ms, it at d (the fake clock).
func (e *env) invisibleFor(src *sqssource.Source, d time.Duration) *worker.Message {
	e.t.Helper()
	e.receiveNone(src, "at once")
	e.clock.Advance(d - time.Millisecond)
	e.receiveNone(src, (d-time.Millisecond).String()+" later")
	e.clock.Advance(time.Millisecond)
	return e.receiveOne(src, time.Minute)
}

func (e *env) settle(src *sqssource.Source, m *worker.Message, o worker.Outcome) {
	e.t.Helper()
	if err := src.Settle(e.ctx, m, o); err != nil {
		e.t.Fatalf("Settle(%+v): %v", o, err)
	}
}

func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, worker.ErrLeaseLost) {
		t.Fatalf("%s: %v, want an error matching worker.ErrLeaseLost", what, err)
	}
}

// constRand is a jitter source that always draws r, counting its calls.
func constRand(r float64, calls *atomic.Int64) func() float64 {
	return func() float64 {
		if calls != nil {
			calls.Add(1)
		}
		return r
	}
}

func str(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func num(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(v)}
}
