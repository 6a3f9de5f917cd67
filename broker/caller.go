package broker

import (
	"context"
	"log/slog"
)

// Caller is who made a request, as the HTTP server saw it: the audit log
// names it. Without authentication AccessKey is what the request's
// signature claims (an SQS SDK's access key id), not a verified identity;
// when authentication is on, the server verifies the request first and sets
// Authenticated and Account, and the front uses Account to decide which
// account a queue name belongs to and whether the caller may act on another
// account's queue.
type Caller struct {
	// Addr is the peer's address (host:port).
	Addr string
	// AccessKey is the SigV4 access key id of a signed request ("" unsigned).
	AccessKey string
	// UserAgent is the request's User-Agent.
	UserAgent string
	// Authenticated is true when the server verified the request's
	// signature or token against a configured key (AccessKey is then that
	// key's id).
	Authenticated bool
	// Account is the account the verified key belongs to (12 digits), ""
	// when not Authenticated: the request then acts as the broker's own
	// account (QueueRef.Account "").
	Account string
}

type callerKey struct{}

// WithCaller returns ctx carrying c (the server sets it on every request).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller ctx carries (zero when none: a call made
// in-process).
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// audit writes one audit line, at info level, for a destructive or
// redriving operation that succeeded: what (action, queue and details),
// who (the Caller), and when (the record's time). The actions: purge_queue,
// delete_queue, replay (a move task out of a dead-letter queue, from either
// API), delete_messages (deletes by id, dead letters included).
func (b *Broker) audit(ctx context.Context, action, queue string, attrs ...slog.Attr) {
	c := CallerFrom(ctx)
	all := append([]slog.Attr{
		slog.String("audit", action), slog.String("queue", queue),
		slog.String("caller_addr", c.Addr), slog.String("caller_access_key", c.AccessKey), slog.String("caller_user_agent", c.UserAgent),
	}, attrs...)
	b.log.LogAttrs(ctx, slog.LevelInfo, "audit", all...)
}
