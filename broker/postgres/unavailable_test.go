package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicemq/sluice/broker/model"
)

// Connection failures become model.ErrUnavailable (a 503 on the wire);
// statement errors and a client that went away do not.
func TestUnavailableMapsConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true}, // admin_shutdown
		{&pgconn.PgError{Code: "08006"}, true}, // connection_failure
		{fmt.Errorf("postgres: send: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "23505"}, false}, // unique_violation
		{context.Canceled, false},
		{errors.New("postgres: decode: bad row"), false},
	} {
		err := tc.err
		unavailable(&err)
		if got := errors.Is(err, model.ErrUnavailable); got != tc.want {
			t.Errorf("%v: unavailable %v, want %v", tc.err, got, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: the cause is lost: %v", tc.err, err)
		}
	}
	// A database that refuses connections, through the real pool.
	cfg := DefaultConfig()
	cfg.URL = "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
	_, err := Open(context.Background(), cfg)
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if !unreachable(err) {
		t.Errorf("a refused connection is not unreachable: %v", err)
	}
}
