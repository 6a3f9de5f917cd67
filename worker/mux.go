package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// JSON returns a Handler that decodes each message's body as JSON into a T
// and calls fn with it. A body that does not decode can never succeed, so
// it is not retried: the handler returns DeadLetterNow with the decode
// error as the reason (the message lands in the dead-letter queue at once,
// where it can be inspected, fixed and replayed). Unknown fields are
// ignored, so that producers may add fields before consumers know them.
func JSON[T any](fn func(ctx context.Context, m *Message, v T) error) Handler {
	return HandlerFunc(func(ctx context.Context, m *Message) error {
		var v T
		if err := json.Unmarshal(m.Body, &v); err != nil {
			return DeadLetterNow(fmt.Sprintf("the body does not decode as JSON into %T: %v", v, err))
		}
		return fn(ctx, m, v)
	})
}

// Chain returns h wrapped in mw, the first outermost: Chain(h, a, b)
// handles a message through a, then b, then h.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Timeout is a middleware that gives each handler at most d: its context
// ends d after the start (context.DeadlineExceeded). A handler that returns
// the context's error then nacks the message as any error does.
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, m *Message) error {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next.HandleMessage(ctx, m)
		})
	}
}

// Mux routes each message to the handler registered for the value of its
// message-type attribute (a String attribute, named at NewMux), as
// http.ServeMux routes on a path; it is itself a Handler.
// Register the routes before the pool runs (Handle is safe to call
// concurrently with routing all the same).
//
// A message whose type has no route goes to the NotFound handler. The
// default one fails the message (a nack, whose reason names the type), so
// that it is retried under the queue's retry policy and reaches the
// dead-letter queue only after its attempts: during a rolling deploy that
// adds a type, old workers give the new type's messages back and new
// workers handle them, instead of the first old worker dead-lettering
// them. Set NotFound to DeadLetterNow (or to a handler that acks) to
// choose otherwise.
type Mux struct {
	attr string

	mu       sync.RWMutex
	routes   map[string]Handler
	mw       []Middleware
	notFound Handler
}

// NewMux returns a Mux routing on the message attribute attr (for example
// "type"). A message without the attribute has type "": register "" for
// it, or let NotFound take it.
func NewMux(attr string) *Mux {
	return &Mux{attr: attr, routes: map[string]Handler{}}
}

// Handle registers h for messages whose type attribute is typ. Registering
// a type twice, or a nil handler, panics (a programming error, as in
// http.ServeMux).
func (x *Mux) Handle(typ string, h Handler) {
	if h == nil {
		panic("worker: Mux.Handle: nil handler for type " + typ)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, dup := x.routes[typ]; dup {
		panic("worker: Mux.Handle: type " + typ + " registered twice")
	}
	x.routes[typ] = h
}

// HandleFunc registers fn for messages whose type attribute is typ.
func (x *Mux) HandleFunc(typ string, fn func(ctx context.Context, m *Message) error) {
	x.Handle(typ, HandlerFunc(fn))
}

// Use appends middleware that wraps every route, NotFound included, in the
// order given (the first outermost).
func (x *Mux) Use(mw ...Middleware) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.mw = append(x.mw, mw...)
}

// NotFound sets the handler for messages whose type has no route (nil: the
// default, which nacks).
func (x *Mux) NotFound(h Handler) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.notFound = h
}

// HandleMessage implements Handler: it handles m with its type's handler,
// through the middleware. A Mux is the pool's Config.Handler.
func (x *Mux) HandleMessage(ctx context.Context, m *Message) error {
	typ := m.Attributes[x.attr].Value
	x.mu.RLock()
	h, ok := x.routes[typ]
	if !ok {
		h = x.notFound
		if h == nil {
			h = x.defaultNotFound()
		}
	}
	h = Chain(h, x.mw...)
	x.mu.RUnlock()
	return h.HandleMessage(ctx, m)
}

func (x *Mux) defaultNotFound() Handler {
	return HandlerFunc(func(ctx context.Context, m *Message) error {
		return fmt.Errorf("worker: no handler for message type %q (attribute %q): retried, as a newer worker may know it", m.Attributes[x.attr].Value, x.attr)
	})
}
