// Package pgtest gives tests a PostgreSQL database or schema of their own,
// and is the one place that knows where the test server is. A test that
// needs PostgreSQL calls Database or Schema: it skips, with the reason, when
// the server is unreachable, unless SLUICE_REQUIRE contains "postgres", and
// then it fails. The server is SLUICE_TEST_POSTGRES's, by default the local
// one (127.0.0.1:5432, user postgres, trust auth; docs/postgres.md says how
// to start one).
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicemq/sluice/internal/testutil"
)

// AdminURL is the URL of the server's maintenance database, where Database
// creates and drops the test databases: SLUICE_TEST_POSTGRES, else the local
// server's "postgres" database.
func AdminURL() string {
	if u := os.Getenv("SLUICE_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// URL is the database in which Schema makes the tests' schemas:
// SLUICE_TEST_POSTGRES, else the local server's "test" database (which
// .ci/run creates).
func URL() string {
	if u := os.Getenv("SLUICE_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var (
	reachMu sync.Mutex
	reached = map[string]error{} // by URL: nil once a connection worked
)

// Require returns url after checking, once per test process, that it
// answers; a test whose server does not skips with the reason (or fails,
// when SLUICE_REQUIRE names postgres).
func Require(t testing.TB, url string) string {
	t.Helper()
	reachMu.Lock()
	err, done := reached[url]
	if !done {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var conn *pgx.Conn
		conn, err = pgx.Connect(ctx, url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		reached[url] = err
	}
	reachMu.Unlock()
	if err != nil {
		testutil.Missing(t, "postgres", "PostgreSQL is not reachable at "+url+
			" (set SLUICE_TEST_POSTGRES, or start it: see docs/postgres.md): "+err.Error())
	}
	return url
}

// Database creates a database for this test alone and returns its URL; it is
// dropped (with its connections) when the test ends. The test skips when
// PostgreSQL is unreachable, unless SLUICE_REQUIRE contains "postgres".
func Database(t testing.TB) string {
	t.Helper()
	admin := Require(t, AdminURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", admin, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sluice_t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("SLUICE_TEST_POSTGRES %q: %v", admin, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Schema returns URL and the name of a schema unique to the test and to
// this test process ("t_<owner>_<hash of the test's name>", Owner: two test
// runs at once, as scripts/under-load.sh makes, never share one, even on
// two machines sharing the server), which does not exist yet; it is dropped
// when the test ends (after what the test registered later, such as the
// backends it opens, is closed). The schemas that test processes which no
// longer run left behind are dropped first (SweepSchemas).
func Schema(t testing.TB) (dbURL, schema string) {
	t.Helper()
	dbURL = Require(t, URL())
	sum := sha256.Sum256([]byte(t.Name()))
	schema = "t_" + Owner(t, dbURL) + "_" + hex.EncodeToString(sum[:10])
	drop := func() { DropSchema(t, dbURL, schema) }
	drop()
	t.Cleanup(drop)
	return dbURL, schema
}

// owner is this test process's token: 8 random hex digits.
var owner = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

var (
	ownerMu   sync.Mutex
	ownerConn = map[string]*pgx.Conn{} // by database URL: the connection holding the owner's lock
)

// ownerLock is the SQL of the session advisory lock named by an owner token.
const ownerLock = "hashtext('sluice-test:' || $1)"

// Owner returns this test process's token, which the names of its schemas
// carry ("t_<owner>_…" by Schema, "tp_<owner>_…" by a package's pool of
// schemas), after making sure that the process holds, on a connection to
// dbURL kept open for its whole life, the session advisory lock named by
// it: SweepSchemas drops only the schemas of an owner whose lock is free,
// that is whose process is gone, wherever it ran. It also sweeps, once.
func Owner(t testing.TB, dbURL string) string {
	t.Helper()
	ownerMu.Lock()
	if ownerConn[dbURL] == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn, err := pgx.Connect(ctx, dbURL)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_advisory_lock("+ownerLock+")", owner)
		}
		cancel()
		if err != nil {
			ownerMu.Unlock()
			t.Fatalf("take the test process's lock on %s: %v", dbURL, err)
		}
		ownerConn[dbURL] = conn // closed when the process ends
	}
	ownerMu.Unlock()
	SweepSchemas(dbURL)
	return owner
}

var sweepOnce sync.Once

// SweepSchemas drops, once per test process, the schemas of the database at
// dbURL that test processes which no longer run left behind (killed before
// their cleanups ran): those named "t_<owner>_…" or "tp_<owner>_…" whose
// owner's advisory lock (Owner) nobody holds.
func SweepSchemas(dbURL string) {
	sweepOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname ~ '^tp?_[0-9a-f]{8}_'`)
		if err != nil {
			return
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return
		}
		byOwner := map[string][]string{}
		for _, n := range names {
			_, rest, _ := strings.Cut(n, "_")
			o, _, _ := strings.Cut(rest, "_")
			if o != owner {
				byOwner[o] = append(byOwner[o], n)
			}
		}
		for o, schemas := range byOwner {
			var free bool
			if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock("+ownerLock+")", o).Scan(&free); err != nil || !free {
				continue // its process runs (or the server cannot say): keep them
			}
			for _, n := range schemas {
				_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{n}.Sanitize()+" CASCADE")
			}
			_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock("+ownerLock+")", o)
		}
	})
}

// DropSchema drops schema (and everything in it) from the database at
// dbURL, logging a failure.
func DropSchema(t testing.TB, dbURL, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Logf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Logf("drop schema %s: %v", schema, err)
	}
}
