package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// deadlineTracer gives every statement and batch of the pool a deadline of
// d (Config.AnswerTimeout) from when it is sent, through pgx's tracer
// hooks, whose returned context the statement runs under: past it pgx sets
// the connection's deadline, the read fails at once, and the connection is
// dropped from the pool. Without it a PostgreSQL that accepts a statement
// and never answers (a partition behind a proxy or a NAT that keeps the
// connection open) holds the request, and its pool connection, for ever:
// the server's statement_timeout cannot fire on a statement it never got,
// and TCP keepalives see a live peer. The caller's own deadline, when
// sooner, still applies. inner, when not nil, is told every statement as
// before (Config.QueryTracer).
type deadlineTracer struct {
	inner pgx.QueryTracer
	d     time.Duration
}

// cancelKey holds, in a traced statement's context, the cancel of the
// deadline the tracer gave it.
type cancelKey struct{}

func (t deadlineTracer) start(ctx context.Context) context.Context {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	return context.WithValue(ctx, cancelKey{}, cancel)
}

func (deadlineTracer) end(ctx context.Context) {
	if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

func (t deadlineTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	ctx = t.start(ctx)
	if t.inner != nil {
		ctx = t.inner.TraceQueryStart(ctx, conn, data)
	}
	return ctx
}

func (t deadlineTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if t.inner != nil {
		t.inner.TraceQueryEnd(ctx, conn, data)
	}
	t.end(ctx)
}

func (t deadlineTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	ctx = t.start(ctx)
	if bt, ok := t.inner.(pgx.BatchTracer); ok {
		ctx = bt.TraceBatchStart(ctx, conn, data)
	}
	return ctx
}

func (t deadlineTracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	if bt, ok := t.inner.(pgx.BatchTracer); ok {
		bt.TraceBatchQuery(ctx, conn, data)
	}
}

func (t deadlineTracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	if bt, ok := t.inner.(pgx.BatchTracer); ok {
		bt.TraceBatchEnd(ctx, conn, data)
	}
	t.end(ctx)
}
