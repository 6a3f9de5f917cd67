package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker/model"
)

// unreachable reports whether err says the database could not be reached or
// went away mid-request (refused or reset connections, a server shutting
// down or restarting, a connection closed under a statement), as opposed to
// an error of the statement itself. A cancelled context is not: the client
// went away.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-57P03: the server is
		// shutting down, crashed, or cannot accept connections yet.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.SafeToRetry(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx reports a connection it closed after an I/O error as "conn closed".
	return strings.Contains(err.Error(), "conn closed")
}

// unavailable turns *err into model.UnavailableError when the database was
// unreachable: the one place where this backend's connection failures
// become the broker's retryable "unavailable" (503) instead of an internal
// failure. Every method of the Backend seam defers it.
//
// A statement that ran out of its answer deadline (deadline.go) while the
// caller's ctx is still live is unreachable too: the database did not
// answer. A caller whose own ctx ended (a client gone, a deadline of its
// own) gets its error as it is.
func unavailable(ctx context.Context, err *error) {
	if *err == nil || errors.Is(*err, model.ErrUnavailable) {
		return
	}
	if unreachable(*err) || ctx.Err() == nil && timedOut(*err) {
		*err = model.UnavailableError(*err)
	}
}

// timedOut reports whether err is a deadline's: the context's, or the
// connection's read or write deadline that pgx sets when it passes.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		pgconn.Timeout(err)
}
