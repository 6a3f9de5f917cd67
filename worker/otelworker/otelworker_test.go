package otelworker_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker"
	"github.com/sluicemq/sluice/worker/otelworker"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// tracer is an SDK tracer provider whose spans land in an in-memory exporter.
func tracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// run runs a pool over src with h until n messages were handled.
func run(t *testing.T, src worker.Source, h worker.Handler, n int) {
	t.Helper()
	done := make(chan struct{}, n)
	cfg := worker.DefaultConfig()
	cfg.Source = src
	cfg.Handler = h
	cfg.Logger = testutil.Logger(t)
	cfg.Hooks.OnHandled = func(*worker.Message, time.Duration) { done <- struct{}{} }
	cfg.Hooks.OnFailed = func(*worker.Message, error, time.Duration) { done <- struct{}{} }
	pool, err := worker.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pool.Run(context.Background()) }()
	deadline := time.After(20 * time.Second)
	for range n {
		select {
		case <-done:
		case <-deadline:
			t.Fatalf("fewer than %d messages handled in 20 s", n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-errc
}

// spanNamed returns the ended span of that name (fails if not exactly one).
func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1 (all: %v)", len(found), name, exp.GetSpans())
	}
	return found[0]
}

// TestNativeTraceContinues: a producer's span travels through the native
// API (client.Message.TraceContext) and the consumer's span is its child,
// with the messaging attributes; a handler error marks the span.
func TestNativeTraceContinues(t *testing.T) {
	t.Parallel()
	tp, exp := tracer(t)
	b := testbroker.Start(t, testbroker.Config{})
	c, err := client.New(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	if _, err := c.CreateQueue(ctx, "emails", nil); err != nil {
		t.Fatal(err)
	}
	pctx, producer := tp.Tracer("test").Start(ctx, "signup", trace.WithSpanKind(trace.SpanKindProducer))
	tpHeader := otelworker.TraceParent(pctx)
	if tpHeader == "" {
		t.Fatal("TraceParent of a recording span is empty")
	}
	sent, err := c.Send(pctx, "emails", client.Message{Body: "hi", TraceContext: tpHeader})
	if err != nil {
		t.Fatal(err)
	}
	producer.End()
	if _, err := c.Send(ctx, "emails", client.Message{Body: "fail"}); err != nil { // no trace: a new one
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	h := otelworker.Middleware(otelworker.WithTracerProvider(tp))(worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		sc := trace.SpanContextFromContext(ctx)
		mu.Lock()
		seen = append(seen, sc.TraceID().String())
		mu.Unlock()
		if string(m.Body) == "fail" {
			return worker.DeadLetterNow("no such mailbox") // settles it for good
		}
		return nil
	}))
	run(t, worker.NewSource(c, "emails"), h, 2)

	var ok, failed tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name != "process emails" {
			continue
		}
		if s.Parent.IsValid() {
			ok = s
		} else {
			failed = s
		}
	}
	p := spanNamed(t, exp, "signup")
	if ok.SpanContext.TraceID() != p.SpanContext.TraceID() || ok.Parent.SpanID() != p.SpanContext.SpanID() {
		t.Errorf("consumer span trace %s parent %s, want trace %s parent %s (the producer's span)",
			ok.SpanContext.TraceID(), ok.Parent.SpanID(), p.SpanContext.TraceID(), p.SpanContext.SpanID())
	}
	if !ok.Parent.IsRemote() || ok.SpanKind != trace.SpanKindConsumer {
		t.Errorf("consumer span: parent remote %v, kind %v; want a remote parent and kind consumer", ok.Parent.IsRemote(), ok.SpanKind)
	}
	attrs := map[string]string{}
	for _, a := range ok.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, v := range map[string]string{"messaging.system": "sluice", "messaging.destination.name": "emails",
		"messaging.message.id": sent.ID, "messaging.operation.type": "process", "messaging.message.delivery_count": "1"} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
	if ok.Status.Code != codes.Unset {
		t.Errorf("status of a handled message = %v, want unset", ok.Status)
	}
	if !failed.SpanContext.IsValid() || failed.Status.Code != codes.Error || failed.SpanContext.TraceID() == p.SpanContext.TraceID() {
		t.Errorf("span of the failing message without trace context: %+v; want a new trace with status Error", failed.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Errorf("handler saw %d span contexts, want 2", len(seen))
	}
}

// TestSQSTraceContinues: over the SQS API (worker/sqssource), a traceparent
// message attribute continues the trace; an AWSTraceHeader system
// attribute passes through untouched.
func TestSQSTraceContinues(t *testing.T) {
	t.Parallel()
	tp, exp := tracer(t)
	b := testbroker.Start(t, testbroker.Config{})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(b.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:  &http.Client{Transport: sqssource.Transport(tr), Timeout: 30 * time.Second}})
	ctx := context.Background()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("thumbs")})
	if err != nil {
		t.Fatal(err)
	}
	pctx, producer := tp.Tracer("test").Start(ctx, "upload")
	const xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if _, err := c.SendMessage(pctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("img-1"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"traceparent": {DataType: aws.String("String"), StringValue: aws.String(otelworker.TraceParent(pctx))}},
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(xray)}},
	}); err != nil {
		t.Fatal(err)
	}
	producer.End()
	// AWSTraceHeader comes back as it was sent.
	peek, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAWSTraceHeader}})
	if err != nil || len(peek.Messages) != 1 {
		t.Fatalf("ReceiveMessage = %v, %v", peek, err)
	}
	if got := peek.Messages[0].Attributes["AWSTraceHeader"]; got != xray {
		t.Errorf("AWSTraceHeader = %q, want %q untouched", got, xray)
	}
	// The SDK omits a zero VisibilityTimeout: release the peeked lease explicitly.
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q.QueueUrl,
		ReceiptHandle: peek.Messages[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	src, err := sqssource.New(c, *q.QueueUrl, sqssource.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := otelworker.Middleware(otelworker.WithTracerProvider(tp), otelworker.WithSystem("aws_sqs"))(
		worker.HandlerFunc(func(context.Context, *worker.Message) error { return nil }))
	run(t, src, h, 1)
	p, s := spanNamed(t, exp, "upload"), spanNamed(t, exp, "process thumbs")
	if s.Parent.SpanID() != p.SpanContext.SpanID() || s.SpanContext.TraceID() != p.SpanContext.TraceID() {
		t.Errorf("consumer span over SQS: trace %s parent %s, want the producer's %s %s",
			s.SpanContext.TraceID(), s.Parent.SpanID(), p.SpanContext.TraceID(), p.SpanContext.SpanID())
	}
}

// TestPanicMarksSpan: a panicking handler ends its span with status Error
// and the pool still recovers the panic.
func TestPanicMarksSpan(t *testing.T) {
	t.Parallel()
	tp, exp := tracer(t)
	h := otelworker.Middleware(otelworker.WithTracerProvider(tp))(worker.HandlerFunc(func(context.Context, *worker.Message) error {
		panic("boom")
	}))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the middleware swallowed the panic")
			}
		}()
		_ = h.HandleMessage(context.Background(), &worker.Message{ID: "m1", Queue: "q"})
	}()
	s := spanNamed(t, exp, "process q")
	if s.Status.Code != codes.Error || s.EndTime.IsZero() {
		t.Errorf("span of a panic: status %v, ended %v; want Error and ended", s.Status, !s.EndTime.IsZero())
	}
}
