package broker

import (
	"context"
	"errors"
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// The access rule: which account's queue a request names, and whether the
// caller may act on it. Every front method that names a queue resolves it
// here (Broker.resolve), so the rule and its error texts live once.
//
//   - The caller's account is Caller.Account when the server authenticated
//     the request (Caller.Authenticated), else the broker's own account
//     (Config.AccountID): without authentication everything acts as the
//     broker's own account, as before accounts came.
//   - The owner is the account the request names (WithQueueOwner: a queue
//     URL's account segment, GetQueueUrl's QueueOwnerAWSAccountId, a move
//     task's ARN); none names the caller's own account.
//   - A caller acts freely on its own account's queues. The broker's own
//     account stores its queues under QueueRef.Account ""; every other
//     account is a separate namespace, QueueRef{Account: id}, so the same
//     name in two accounts is two queues.
//   - On another account's queue an authenticated caller may do only what
//     the queue's Policy grants its account (PolicyAllows: statements of
//     AddPermission's shape), and only the actions AWS lets another account
//     have (CrossAccountAction); the rest (SetQueueAttributes, DeleteQueue,
//     AddPermission, RemovePermission, tags, move tasks, and Sluice's own
//     controls) are the owner's. A refusal is AccessDeniedError, or for
//     GetQueueUrl QueueDoesNotExist, as AWS answers: a queue another account
//     may not touch and a queue that does not exist look the same.
//   - An unauthenticated request naming another account names no queue here
//     (OtherAccountError), as before accounts came.
//
// The own-account path reads nothing from the store; only a cross-account
// request reads the queue's Policy first (one GetQueue). A grant is checked
// when the request starts: a RemovePermission racing a request in flight
// does not stop it.

type ownerKey struct{}

// WithQueueOwner returns ctx naming account as the owner of the queue the
// request names: the account segment of its queue URL or ARN, or GetQueueUrl's
// QueueOwnerAWSAccountId. "" (or no call) names the caller's own account. An
// API sets it; the front decides what it allows (Broker.resolve).
func WithQueueOwner(ctx context.Context, account string) context.Context {
	if account == "" {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, account)
}

// QueueOwnerFrom returns the owner account ctx names ("" for none).
func QueueOwnerFrom(ctx context.Context) string {
	a, _ := ctx.Value(ownerKey{}).(string)
	return a
}

// AccountID returns the broker's own account id (Config.AccountID): the
// account in its queue URLs and ARNs, the one whose queues are stored under
// QueueRef.Account "", and the one unauthenticated requests act as.
func (b *Broker) AccountID() string { return b.cfg.AccountID }

// CallerAccount returns the account ctx's caller acts as: its Account when
// authenticated, else the broker's own.
func (b *Broker) CallerAccount(ctx context.Context) string {
	if c := CallerFrom(ctx); c.Authenticated {
		return c.Account
	}
	return b.AccountID()
}

// OwnAccountOnly returns nil when ctx's caller acts as the broker's own
// account (CallerAccount: unauthenticated, or a key of that account), else
// an ErrAccessDenied error naming what, the broker-wide thing refused. What
// spans every account's queues or only the broker's own (a backup of the
// whole store, the dashboard's live statistics) is that account's only.
func (b *Broker) OwnAccountOnly(ctx context.Context, what string) error {
	if mine, own := b.CallerAccount(ctx), b.AccountID(); mine != own {
		return model.Errorf(model.ErrAccessDenied, "Only the broker's own account (%s) may %s; the request's key is of account %s.", own, what, mine)
	}
	return nil
}

// OwnerAccount returns the account id that owns q (q.Account "" is the
// broker's own account), for queue URLs and ARNs.
func (b *Broker) OwnerAccount(q model.Queue) string {
	if q.Account == "" {
		return b.AccountID()
	}
	return q.Account
}

// refIn names queue name of account (the broker's own account is "").
func (b *Broker) refIn(account, name string) model.QueueRef {
	if account == b.AccountID() {
		return model.QueueRef{Name: name}
	}
	return model.QueueRef{Account: account, Name: name}
}

// resolve is the access rule (see the top of this file): the queue that
// name means for ctx's caller and owner, or why the caller may not act on
// it with act.
//
// A name no queue can have (CreateQueue refuses it first, with
// ValidateQueueName's error) does not exist, here, for every call that names a queue: no backend sees it
// (PostgreSQL refuses a NUL byte or invalid UTF-8 in a query, which made
// such a name a 500 instead of the embedded store's "does not exist").
func (b *Broker) resolve(ctx context.Context, act model.Action, name string) (model.QueueRef, error) {
	if model.ValidateQueueName(name) != nil {
		return model.QueueRef{}, model.QueueNotFoundError()
	}
	c := CallerFrom(ctx)
	mine := b.AccountID()
	if c.Authenticated {
		mine = c.Account
	}
	owner := QueueOwnerFrom(ctx)
	if owner == "" || owner == mine {
		return b.refIn(mine, name), nil
	}
	if !c.Authenticated {
		return model.QueueRef{}, OtherAccountError(owner, b.AccountID())
	}
	deny := func() error {
		if act == model.ActionGetQueueURL {
			return model.Errorf(model.ErrQueueDoesNotExist, "The specified queue does not exist or you do not have access to it.")
		}
		return AccessDeniedError(owner, name, act)
	}
	if !model.CrossAccountAction(act) {
		return model.QueueRef{}, deny()
	}
	ref := b.refIn(owner, name)
	q, err := b.backend.GetQueue(ctx, ref)
	switch {
	case errors.Is(err, model.ErrQueueDoesNotExist):
		return model.QueueRef{}, deny()
	case err != nil:
		return model.QueueRef{}, err
	case !model.PolicyAllows(q.Config.Policy, mine, act):
		return model.QueueRef{}, deny()
	}
	return ref, nil
}

// accountOf returns the account id that owns ref.
func (b *Broker) accountOf(ref model.QueueRef) string {
	if ref.Account == "" {
		return b.AccountID()
	}
	return ref.Account
}

// arnAccount returns the account segment of an ARN ("" when it has none).
func arnAccount(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 {
		return ""
	}
	return parts[4]
}

// webhookAccount refuses a DeadLetterWebhook (raw, "" for none) on a queue
// of another account than the broker's own: the webhook dispatcher and its
// outbox know queues by name in the broker's own account only, so another
// account's events would reach the wrong queue's webhook.
func webhookAccount(ref model.QueueRef, raw string) error {
	if raw == "" || ref.Account == "" {
		return nil
	}
	return model.Errorf(model.ErrInvalidAttributeValue, "Invalid value for the parameter DeadLetterWebhook. Reason: dead-letter webhooks are served for the broker's own account's queues only, not for account %s.", ref.Account)
}

// OtherAccountError is the error for a queue URL, request path or
// QueueOwnerAWSAccountId naming account, when the broker serves only the
// account served: no queue of another account exists here.
func OtherAccountError(account, served string) error {
	return model.Errorf(model.ErrQueueDoesNotExist, "The specified queue does not exist: it would belong to account %s, and this broker serves account %s only.", account, served)
}

// AccessDeniedError is the error for a caller that may not take action act
// on queue name of account owner (the access rule, access.go).
func AccessDeniedError(owner, name string, act model.Action) error {
	return model.Errorf(model.ErrAccessDenied, "Access to the queue %s of account %s is denied: its policy grants your account no %s.", name, owner, act)
}
