// Package pgtest gives tests a PostgreSQL database of their own. A test that
// needs PostgreSQL calls Database: it skips, with the reason, when the server
// is unreachable, unless SLUICE_REQUIRE contains "postgres", and then it
// fails. The server is SLUICE_TEST_POSTGRES's, by default the local one
// (postgres://postgres@127.0.0.1:5432/postgres, trust auth; docs/postgres.md
// says how to start one).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// Database creates a database for this test alone and returns its URL; it is
// dropped (with its connections) when the test ends. The test skips when
// PostgreSQL is unreachable, unless SLUICE_REQUIRE contains "postgres".
func Database(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := AdminURL()
	conn, err := pgx.Connect(ctx, admin)
	if err == nil {
		err = conn.Ping(ctx)
	}
	if err != nil {
		msg := "PostgreSQL is not reachable at " + admin + " (set SLUICE_TEST_POSTGRES, or start it: see docs/postgres.md): " + err.Error()
		if strings.Contains(os.Getenv("SLUICE_REQUIRE"), "postgres") {
			t.Fatal(msg)
		}
		t.Skip(msg)
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
