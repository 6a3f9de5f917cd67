// Package otelworker traces message handling with OpenTelemetry: the
// producer's span travels in the message as a W3C traceparent (the native
// API's traceContext field, the traceparent message attribute on SQS), and
// the consumer's handler runs in a span that continues that trace.
//
// Consumer side, as worker middleware:
//
//	h := otelworker.Middleware()(worker.HandlerFunc(sendEmail))
//
// Producer side, with the client:
//
//	ctx, span := tracer.Start(ctx, "signup")
//	c.Send(ctx, "emails", client.Message{Body: b, TraceContext: otelworker.TraceParent(ctx)})
//
// The package is apart from worker so that a worker without tracing does
// not link the OpenTelemetry API.
package otelworker

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicemq/sluice/worker"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/sluicemq/sluice/worker/otelworker"

// Option configures Middleware.
type Option func(*config)

type config struct {
	tp     trace.TracerProvider
	system string
}

// WithTracerProvider sets the provider of the tracer. Default: the global
// one (otel.GetTracerProvider), read when Middleware is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithSystem sets the messaging.system attribute. Default "sluice"; a
// worker over Amazon SQS (worker/sqssource) may say "aws_sqs".
func WithSystem(system string) Option {
	return func(c *config) { c.system = system }
}

// traceContext is the W3C Trace Context propagator (traceparent only: the
// message carries no tracestate).
var traceContext = propagation.TraceContext{}

// Middleware runs each handler call in a consumer span named "process
// <queue>", whose parent is the span the message was sent from (its
// traceparent), when it has one; a message without one starts a new trace.
// The span records the message id, queue, delivery count and body size; a
// handler error (or panic, which the middleware re-raises for the pool to
// recover) sets the span's status to Error with the error's text.
func Middleware(opts ...Option) worker.Middleware {
	c := config{system: "sluice"}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	tracer := c.tp.Tracer(ScopeName)
	return func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, m *worker.Message) (err error) {
			if tp := m.TraceContext; tp != "" {
				ctx = traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
			}
			ctx, span := tracer.Start(ctx, "process "+m.Queue,
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					attribute.String("messaging.system", c.system),
					semconv.MessagingOperationTypeProcess,
					semconv.MessagingDestinationName(m.Queue),
					semconv.MessagingMessageID(m.ID),
					semconv.MessagingMessageBodySize(len(m.Body)),
					attribute.Int("messaging.message.delivery_count", m.ReceiveCount),
				))
			defer span.End()
			defer func() {
				if p := recover(); p != nil {
					span.SetStatus(codes.Error, "panic")
					span.SetAttributes(attribute.String("exception.message", panicText(p)))
					panic(p)
				}
				if err != nil {
					span.RecordError(err)
					span.SetStatus(codes.Error, err.Error())
				}
			}()
			return next.HandleMessage(ctx, m)
		})
	}
}

// TraceParent returns the W3C traceparent of ctx's span, for a message's
// TraceContext (client.Message.TraceContext, or a traceparent attribute
// through an SQS client); "" when ctx has no valid span.
func TraceParent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier["traceparent"]
}

func panicText(p any) string { return fmt.Sprint(p) }
