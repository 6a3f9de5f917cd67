package worker

import "context"

// Handler handles one message. Returning nil acks it; an error nacks it with
// the error's text as the reason (the queue's retry policy decides when it
// comes back), except the control errors: DeadLetterNow, Snooze and
// RetryAfter. A panic is recovered and treated as an error. ctx is cancelled
// when the pool shuts down past its grace, or when the lease is lost
// (context.Cause is then ErrLeaseLost); it carries the message's trace
// context (TraceParent).
type Handler interface {
	HandleMessage(ctx context.Context, m *Message) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, m *Message) error

// HandleMessage calls f(ctx, m).
func (f HandlerFunc) HandleMessage(ctx context.Context, m *Message) error { return f(ctx, m) }

// Middleware wraps a handler, as net/http middleware does.
type Middleware func(Handler) Handler

type traceKey struct{}

// WithTraceParent returns ctx carrying a W3C traceparent.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceparent)
}

// TraceParent returns the W3C traceparent ctx carries ("" if none): a
// handler's context carries its message's.
func TraceParent(ctx context.Context) string {
	s, _ := ctx.Value(traceKey{}).(string)
	return s
}
