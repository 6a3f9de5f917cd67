package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/model"
)

// The access rule (access.go), over the embedded backend: who may take
// which action on which account's queue.

const (
	acctA = "111111111111" // owns queue "q"
	acctB = "222222222222" // granted SendMessage on A's "q"
	acctC = "333333333333" // granted "*" on A's "q"
	acctD = "444444444444" // granted nothing
)

// as returns ctx for an authenticated caller of account, naming owner's
// queue (owner "": the caller's own).
func as(account, owner string) context.Context {
	ctx := context.Background()
	if account != "" {
		ctx = broker.WithCaller(ctx, broker.Caller{Authenticated: true, Account: account, AccessKey: "AK" + account})
	}
	return broker.WithQueueOwner(ctx, owner)
}

func accessFront(t *testing.T) *broker.Broker {
	t.Helper()
	be, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(be, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestAccessRule(t *testing.T) {
	t.Parallel()
	b := accessFront(t)
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.CreateQueue(as(acctA, ""), "q", nil, nil)
	mustDo(err)
	_, err = b.CreateQueue(as(acctA, ""), "dlq", nil, nil)
	mustDo(err)
	_, err = b.CreateQueue(context.Background(), "q0", nil, nil) // the broker's own account
	mustDo(err)
	mustDo(b.AddPermission(as(acctA, ""), "q", model.Permission{Label: "b-send", AccountIDs: []string{acctB}, Actions: []string{"SendMessage"}, Resource: "arn"}))
	mustDo(b.AddPermission(as(acctA, ""), "q", model.Permission{Label: "c-all", AccountIDs: []string{acctC}, Actions: []string{"*"}, Resource: "arn"}))

	zero := time.Duration(0)
	ops := map[model.Action]func(ctx context.Context, q string) error{
		model.ActionSendMessage: func(ctx context.Context, q string) error {
			_, err := b.Send(ctx, q, []model.SendEntry{{Body: "x"}})
			return err
		},
		model.ActionReceiveMessage: func(ctx context.Context, q string) error {
			_, err := b.Receive(ctx, model.ReceiveRequest{Queue: q, WaitTime: &zero})
			return err
		},
		model.ActionGetQueueAttributes: func(ctx context.Context, q string) error {
			_, err := b.GetQueue(ctx, q)
			return err
		},
		model.ActionGetQueueURL: func(ctx context.Context, q string) error {
			_, err := b.GetQueueFor(ctx, model.ActionGetQueueURL, q)
			return err
		},
		model.ActionListQueueTags: func(ctx context.Context, q string) error {
			_, err := b.GetQueueFor(ctx, model.ActionListQueueTags, q)
			return err
		},
		model.ActionListDeadLetterSourceQueues: func(ctx context.Context, q string) error {
			_, err := b.DeadLetterSources(ctx, q, "")
			return err
		},
		model.ActionPurgeQueue: func(ctx context.Context, q string) error { return b.PurgeQueue(ctx, q) },
		model.ActionSetQueueAttributes: func(ctx context.Context, q string) error {
			return b.SetQueueAttributes(ctx, q, map[string]string{model.AttrVisibilityTimeout: "31"})
		},
		model.ActionDeleteQueue: func(ctx context.Context, q string) error { return b.DeleteQueue(ctx, q) },
		model.ActionTagQueue: func(ctx context.Context, q string) error {
			return b.TagQueue(ctx, q, map[string]string{"k": "v"})
		},
		model.ActionUntagQueue: func(ctx context.Context, q string) error { return b.UntagQueue(ctx, q, []string{"k"}) },
		model.ActionAddPermission: func(ctx context.Context, q string) error {
			return b.AddPermission(ctx, q, model.Permission{Label: "x", AccountIDs: []string{acctD}, Actions: []string{"*"}, Resource: "arn"})
		},
		model.ActionRemovePermission: func(ctx context.Context, q string) error { return b.RemovePermission(ctx, q, "b-send") },
		model.ActionStartMoveTask: func(ctx context.Context, q string) error {
			_, err := b.StartMoveTask(ctx, model.MoveTaskRequest{Source: q})
			return err
		},
		model.ActionListMoveTasks: func(ctx context.Context, q string) error {
			_, err := b.ListMoveTasks(ctx, q, 1)
			return err
		},
		model.ActionBrowse: func(ctx context.Context, q string) error {
			_, err := b.Browse(ctx, q, model.BrowseRequest{})
			return err
		},
		model.ActionDeleteMessages: func(ctx context.Context, q string) error {
			_, err := b.DeleteMessages(ctx, q, []string{"00000000-0000-0000-0000-000000000000"})
			return err
		},
	}
	var (
		denied = model.ErrAccessDenied
		gone   = model.ErrQueueDoesNotExist
	)
	ownerOnly := []model.Action{model.ActionSetQueueAttributes, model.ActionDeleteQueue, model.ActionTagQueue,
		model.ActionUntagQueue, model.ActionAddPermission, model.ActionRemovePermission, model.ActionStartMoveTask,
		model.ActionListMoveTasks, model.ActionListQueueTags, model.ActionBrowse, model.ActionDeleteMessages}
	type tc struct {
		name          string
		caller, owner string // caller "" is unauthenticated
		queue         string
		act           model.Action
		want          error // nil: allowed
	}
	cases := []tc{
		// A caller acts on its own account's queues, named or not.
		{"A sends to its own q", acctA, "", "q", model.ActionSendMessage, nil},
		{"A names itself", acctA, acctA, "q", model.ActionSetQueueAttributes, nil},
		{"A lists its tags", acctA, "", "q", model.ActionListQueueTags, nil},
		// Accounts are namespaces: A has no q0, the broker's own account has no q.
		{"A has no q0", acctA, "", "q0", model.ActionGetQueueAttributes, gone},
		{"own account has no q", "", "", "q", model.ActionGetQueueAttributes, gone},
		{"unauthenticated acts as the own account", "", "", "q0", model.ActionSendMessage, nil},
		{"unauthenticated names the own account", "", broker.DefaultAccountID, "q0", model.ActionSendMessage, nil},
		{"the own account's key acts on its queues", broker.DefaultAccountID, "", "q0", model.ActionSendMessage, nil},
		// Unauthenticated requests never reach another account.
		{"unauthenticated names A", "", acctA, "q", model.ActionSendMessage, gone},
		// B: SendMessage only.
		{"B sends", acctB, acctA, "q", model.ActionSendMessage, nil},
		{"B receives", acctB, acctA, "q", model.ActionReceiveMessage, denied},
		{"B reads attributes", acctB, acctA, "q", model.ActionGetQueueAttributes, denied},
		{"B asks the URL", acctB, acctA, "q", model.ActionGetQueueURL, gone},
		{"B purges", acctB, acctA, "q", model.ActionPurgeQueue, denied},
		{"B sends to a queue A does not have", acctB, acctA, "nope", model.ActionSendMessage, denied},
		{"B without naming A sends to its own (missing) q", acctB, "", "q", model.ActionSendMessage, gone},
		// C: "*", which covers every action another account may have.
		{"C sends", acctC, acctA, "q", model.ActionSendMessage, nil},
		{"C receives", acctC, acctA, "q", model.ActionReceiveMessage, nil},
		{"C reads attributes", acctC, acctA, "q", model.ActionGetQueueAttributes, nil},
		{"C asks the URL", acctC, acctA, "q", model.ActionGetQueueURL, nil},
		{"C lists dead-letter sources", acctC, acctA, "dlq", model.ActionListDeadLetterSourceQueues, denied},
		{"C purges", acctC, acctA, "q", model.ActionPurgeQueue, nil},
		// D: nothing.
		{"D sends", acctD, acctA, "q", model.ActionSendMessage, denied},
		{"D asks the URL", acctD, acctA, "q", model.ActionGetQueueURL, gone},
	}
	for _, act := range ownerOnly {
		cases = append(cases, tc{"C (granted *) takes owner-only " + string(act), acctC, acctA, "q", act, denied})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ops[c.act](as(c.caller, c.owner), c.queue)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("%s: %v, want allowed", c.act, err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("%s: %v, want %v", c.act, err, c.want)
			}
		})
	}
	// The grants were to A's "q" only: "dlq" (no policy) refuses C.
	if _, err := b.Send(as(acctC, acctA), "dlq", []model.SendEntry{{Body: "x"}}); !errors.Is(err, denied) {
		t.Fatalf("C sends to A's dlq (no policy): %v", err)
	}
	// RemovePermission revokes.
	mustDo(b.RemovePermission(as(acctA, ""), "q", "b-send"))
	if err := ops[model.ActionSendMessage](as(acctB, acctA), "q"); !errors.Is(err, denied) {
		t.Fatalf("B sends after RemovePermission: %v", err)
	}
	// ListQueues lists the caller's account only.
	for account, want := range map[string][]string{acctA: {"dlq", "q"}, "": {"q0"}, acctB: nil} {
		qs, err := b.ListQueues(as(account, ""), "", "", 0)
		mustDo(err)
		var names []string
		for _, q := range qs {
			names = append(names, q.Name)
			if got := b.OwnerAccount(q); account != "" && got != account {
				t.Errorf("ListQueues for %s: %s is owned by %s", account, q.Name, got)
			}
		}
		if len(names) != len(want) || (len(want) > 0 && (names[0] != want[0] || names[len(names)-1] != want[len(want)-1])) {
			t.Errorf("ListQueues for %q = %v, want %v", account, names, want)
		}
	}
}

// TestAccessRuleRedriveSameAccount: a RedrivePolicy names a dead-letter
// queue of the source's own account (AWS's rule); the ARN's account says
// which.
func TestAccessRuleRedriveSameAccount(t *testing.T) {
	t.Parallel()
	b := accessFront(t)
	ctx := as(acctA, "")
	if _, err := b.CreateQueue(ctx, "dlq", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateQueue(context.Background(), "dlq", nil, nil); err != nil { // the own account's dlq
		t.Fatal(err)
	}
	policy := func(account string) map[string]string {
		return map[string]string{model.AttrRedrivePolicy: `{"deadLetterTargetArn":"` + model.ARN("us-east-1", account, "dlq") + `","maxReceiveCount":1}`}
	}
	if _, err := b.CreateQueue(ctx, "src", policy(broker.DefaultAccountID), nil); !errors.Is(err, model.ErrInvalidParameterValue) {
		t.Fatalf("A's queue with the own account's dlq: %v, want InvalidParameterValue", err)
	}
	if _, err := b.CreateQueue(ctx, "src", policy(acctA), nil); err != nil {
		t.Fatalf("A's queue with A's dlq: %v", err)
	}
	if _, err := b.CreateQueue(context.Background(), "src", policy(acctA), nil); !errors.Is(err, model.ErrInvalidParameterValue) {
		t.Fatalf("the own account's queue with A's dlq: %v, want InvalidParameterValue", err)
	}
	srcs, err := b.DeadLetterSources(ctx, "dlq", "")
	if err != nil || len(srcs) != 1 || srcs[0].Name != "src" || srcs[0].Account != acctA {
		t.Fatalf("A's dlq sources = %+v, %v", srcs, err)
	}
	if srcs, err := b.DeadLetterSources(context.Background(), "dlq", ""); err != nil || len(srcs) != 0 {
		t.Fatalf("the own account's dlq sources = %+v, %v", srcs, err)
	}
}

// TestConfigAccountID: the broker's account id is Config.AccountID (its one
// owner): the default, and another one, which unauthenticated callers act
// as.
func TestConfigAccountID(t *testing.T) {
	t.Parallel()
	b := accessFront(t)
	if b.AccountID() != broker.DefaultAccountID {
		t.Errorf("AccountID() = %q", b.AccountID())
	}
	be, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := broker.New(be, broker.Config{AccountID: acctA})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.AccountID() != acctA || other.CallerAccount(context.Background()) != acctA {
		t.Errorf("AccountID %q, CallerAccount %q; want %s", other.AccountID(), other.CallerAccount(context.Background()), acctA)
	}
}

// TestAccessRuleWebhookOwnAccountOnly: a DeadLetterWebhook is refused on
// another account's queue (its events would be looked up by name in the
// broker's own account).
func TestAccessRuleWebhookOwnAccountOnly(t *testing.T) {
	t.Parallel()
	be, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(be, broker.Config{WebhookHosts: anyHost{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	hook := map[string]string{model.AttrDeadLetterWebhook: "https://hooks.example.com/x"}
	if _, err := b.CreateQueue(as(acctA, ""), "q", hook, nil); !errors.Is(err, model.ErrInvalidAttributeValue) {
		t.Fatalf("A's CreateQueue with a webhook: %v", err)
	}
	if _, err := b.CreateQueue(as(acctA, ""), "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.SetQueueAttributes(as(acctA, ""), "q", hook); !errors.Is(err, model.ErrInvalidAttributeValue) {
		t.Fatalf("A's SetQueueAttributes with a webhook: %v", err)
	}
	if _, err := b.CreateQueue(context.Background(), "q", hook, nil); err != nil {
		t.Fatalf("the own account's queue with a webhook: %v", err)
	}
}

type anyHost struct{}

func (anyHost) Allowed(string) bool { return true }
