package postgres

import (
	"context"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestCompiledNamedMatchesPgx: a statement whose named arguments were
// rewritten once gives the statement and positional arguments that pgx's
// NamedArgs gives on each call.
func TestCompiledNamedMatchesPgx(t *testing.T) {
	t.Parallel()
	values := map[string]any{}
	for i, n := range claimArgs {
		values[n] = int64(1000 + i)
	}
	for name, q := range map[string]namedQuery{"standard": claimStandardSQL, "at-most-once": claimAtMostOnceSQL, "fifo": claimFifoSQL} {
		var raw string
		switch name {
		case "standard":
			raw = claimSQL(false, false)
		case "at-most-once":
			raw = claimSQL(false, true)
		default:
			raw = claimSQL(true, false)
		}
		wantSQL, wantArgs, err := pgx.NamedArgs(values).RewriteQuery(context.Background(), nil, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.sql != wantSQL {
			t.Errorf("%s: compiled statement differs from pgx's rewriting", name)
		}
		if len(q.names) < 10 {
			t.Errorf("%s: %d positional arguments, want the claim's named ones", name, len(q.names))
		}
		if got := q.args(values); !reflect.DeepEqual(got, wantArgs) {
			t.Errorf("%s: arguments %v, pgx gives %v", name, got, wantArgs)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("compileNamed accepted a statement with an unknown argument")
		}
	}()
	compileNamed("SELECT @a, @b", []string{"a"})
}
