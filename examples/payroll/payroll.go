// Command payroll is the outage story: a payroll run of many payments that
// survives a crash of the worker halfway and a restart of the broker, and
// pays every employee exactly once.
//
// Both halves are exactly once where it matters, with Sluice's PostgreSQL
// backend and the application's tables in one database:
//
//   - enqueue writes each batch of due payments (table payroll_due) and
//     sends their messages in the same transaction (client/pgtx): a payment
//     is queued if and only if it is due.
//   - work pays (table payments) through the idempotency store's InTx
//     (worker/idempotency/pgstore): the message's key is recorded in the
//     transaction of the payment, so a redelivered message (its worker was
//     killed after the commit and before the ack, or its ack was lost while
//     the broker was down) finds its key and is acked without paying twice.
//
// By hand, with a broker on PostgreSQL (database payroll, created first):
//
//	createdb -h 127.0.0.1 -U postgres payroll
//	go run ./cmd/sluice serve --store postgres://postgres@127.0.0.1:5432/payroll
//	go run ./examples/payroll enqueue -db postgres://postgres@127.0.0.1:5432/payroll -n 200000
//	go run ./examples/payroll work -db postgres://postgres@127.0.0.1:5432/payroll -n 200000
//
// Kill the worker (kill -9) whenever you like and start it again: it says
// where it resumes, and it exits when all n are paid.
package main

import (
	"context"
	"fmt"
	"os"
)

// The defaults the two commands share.
const (
	// Queue is the queue of payments.
	Queue = "payroll-payments"
	// Run names the payroll run; it prefixes the idempotency keys.
	Run = "payroll-2026-11"
)

// schema creates the application's tables. payments has no unique key on
// employee on purpose: the exactly-once comes from the idempotency key, and
// a duplicate payment would show as a second row.
const schema = `
CREATE TABLE IF NOT EXISTS payroll_due (
	employee integer PRIMARY KEY,
	cents    bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS payments (
	id         bigserial PRIMARY KEY,
	employee   integer NOT NULL,
	cents      bigint NOT NULL,
	worker_pid integer NOT NULL,
	paid_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS payments_employee ON payments (employee);
`

// Payment is a message: pay one employee.
type Payment struct {
	Employee int   `json:"employee"`
	Cents    int64 `json:"cents"`
}

// Key is a payment's idempotency key, derived from the work itself: the same
// on every copy of the message.
func Key(employee int) string { return fmt.Sprintf("%s/employee-%d", Run, employee) }

// cents is what employee is paid: a fixed, checkable amount.
func cents(employee int) int64 { return 300000 + int64(employee%1000)*100 }

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "enqueue":
		err = enqueueMain(context.Background(), os.Args[2:])
	case "work":
		err = workMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "payroll:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: payroll enqueue|work [flags] (payroll enqueue -h, payroll work -h)")
	os.Exit(2)
}
