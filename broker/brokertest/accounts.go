package brokertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// Accounts through the front (the access rule, broker/access.go): each
// authenticated account is a namespace of its own, stored apart by the
// backend (AccountsKeepQueuesApart drives the seam), and another account's
// queue is reached only through the Policy statements AddPermission wrote.

var accountTests = []testCase{
	{"SameNameInTwoAccounts", testSameNameInTwoAccounts},
	{"RedriveStaysInAccount", testRedriveStaysInAccount},
	{"GrantsAreStored", testGrantsAreStored},
}

const (
	accountA = "111111111111"
	accountB = "222222222222"
)

// as runs f with e.ctx carrying an authenticated caller of account that
// names owner's queues ("" its own), then restores e.ctx.
func (e *env) as(account, owner string, f func()) {
	e.t.Helper()
	saved := e.ctx
	defer func() { e.ctx = saved }()
	e.ctx = broker.WithQueueOwner(broker.WithCaller(saved, broker.Caller{Authenticated: true, Account: account}), owner)
	f()
}

// testSameNameInTwoAccounts: "orders" of the broker's own account, of A and
// of B are three queues, with their own messages, leases, listings and
// deletes, across a restart.
func testSameNameInTwoAccounts(t *testing.T, s suite) {
	e := s.setup(t)
	ids := map[string]uint64{}
	for _, account := range []string{"", accountA, accountB} {
		create := func() {
			q := e.createQueue("orders", nil)
			if want := account; q.Account != want {
				t.Fatalf("CreateQueue as %q: Account %q", account, q.Account)
			}
			ids[account] = q.ID
		}
		if account == "" {
			create()
		} else {
			e.as(account, "", create)
		}
	}
	if ids[""] == ids[accountA] || ids[accountA] == ids[accountB] || ids[""] == ids[accountB] {
		t.Fatalf("one queue for two accounts: ids %v", ids)
	}
	e.sendBody("orders", "for the own account")
	var leased model.Delivery
	e.as(accountA, "", func() {
		e.sendBody("orders", "for A")
		leased = e.receiveOneFor("orders", time.Minute)
		if leased.Body != "for A" {
			t.Fatalf("A received %q", leased.Body)
		}
	})
	e.as(accountB, "", func() { e.receiveNone("orders") })
	e.wantStats("orders", 1, 0, 0)

	check := func() {
		t.Helper()
		e.as(accountA, "", func() { e.wantStats("orders", 0, 1, 0) })
		e.as(accountB, "", func() { e.wantStats("orders", 0, 0, 0) })
		e.wantStats("orders", 1, 0, 0)
		for _, account := range []string{"", accountA, accountB} {
			list := func() {
				qs, err := e.b.ListQueues(e.ctx, "", "", 0)
				if err != nil || len(qs) != 1 || qs[0].ID != ids[account] {
					t.Fatalf("ListQueues as %q = %+v, %v; want only its own orders", account, qs, err)
				}
			}
			if account == "" {
				list()
			} else {
				e.as(account, "", list)
			}
		}
	}
	check()
	if s.h.Reopen != nil {
		e.reopen() // the namespaces are stored
		check()
	}
	// A's lease works in A's queue only.
	e.as(accountA, "", func() { e.mustDelete("orders", leased.Receipt) })
	e.as(accountB, "", func() {
		if err := e.b.DeleteQueue(e.ctx, "orders"); err != nil {
			t.Fatal(err)
		}
	})
	e.wantStats("orders", 1, 0, 0)
	e.as(accountA, "", func() { e.wantStats("orders", 0, 0, 0) })
	e.as(accountB, "", func() {
		if _, err := e.b.GetQueue(e.ctx, "orders"); !errors.Is(err, model.ErrQueueDoesNotExist) {
			t.Fatalf("B's deleted queue: %v", err)
		}
	})
}

// testRedriveStaysInAccount: a dead letter moves to the dead-letter queue
// of its source's account, not to a queue of the same name elsewhere.
func testRedriveStaysInAccount(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("dlq", nil) // the broker's own account's
	e.as(accountA, "", func() {
		e.createQueue("dlq", nil)
		policy := `{"deadLetterTargetArn":"` + model.ARN(testRegion, accountA, "dlq") + `","maxReceiveCount":1}`
		e.createQueue("src", map[string]string{model.AttrRedrivePolicy: policy, model.AttrVisibilityTimeout: "10"})
		e.sendBody("src", "poison")
		e.receiveOne("src")
		e.advance(10 * time.Second)
		e.moveToDLQ("src", "dlq", 1)
		if d := e.receiveOne("dlq"); d.Body != "poison" || d.DeadLetterSource != "src" {
			t.Fatalf("A's dlq: %q from %q", d.Body, d.DeadLetterSource)
		}
	})
	e.wantStats("dlq", 0, 0, 0)
}

// testGrantsAreStored: B reaches A's queue through AddPermission's
// statement, which the backend stores (across a restart), and loses it with
// RemovePermission.
func testGrantsAreStored(t *testing.T, s suite) {
	e := s.setup(t)
	send := func() error {
		_, err := e.trySend("shared", model.SendEntry{Body: "from B"})
		return err
	}
	e.as(accountA, "", func() { e.createQueue("shared", nil) })
	e.as(accountB, accountA, func() { wantErr(t, "B sends before a grant", send(), model.ErrAccessDenied) })
	e.as(accountA, "", func() {
		if err := e.b.AddPermission(e.ctx, "shared", model.Permission{Label: "b", AccountIDs: []string{accountB},
			Actions: []string{"SendMessage"}, Resource: model.ARN(testRegion, accountA, "shared")}); err != nil {
			t.Fatal(err)
		}
	})
	if s.h.Reopen != nil {
		e.reopen()
	}
	e.as(accountB, accountA, func() {
		if err := send(); err != nil {
			t.Fatalf("B sends with a grant: %v", err)
		}
		ctx, cancel := context.WithTimeout(e.ctx, realTimeout)
		defer cancel()
		_, err := e.b.Receive(ctx, model.ReceiveRequest{Queue: "shared", WaitTime: dur(0)})
		wantErr(t, "B receives with a SendMessage grant", err, model.ErrAccessDenied)
	})
	e.as(accountA, "", func() {
		e.wantStats("shared", 1, 0, 0)
		if err := e.b.RemovePermission(e.ctx, "shared", "b"); err != nil {
			t.Fatal(err)
		}
	})
	e.as(accountB, accountA, func() { wantErr(t, "B sends after RemovePermission", send(), model.ErrAccessDenied) })
}
