package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// Broker is the front every API and service talks to (the SQS protocols,
// the native HTTP API and through it the CLI, the dashboard and the worker
// library; the webhook dispatcher, metrics, the live sampler). It validates
// and normalizes requests, applies every rule that does not need the
// store's atomicity, owns the error texts, and hands its storage.Backend
// typed, validated input. Safe for concurrent use.
//
// The methods take queue attributes as the SQS attribute strings
// (model.QueueConfig's parsers are the one home of their names and ranges)
// and answer *model.Error values wrapping model's sentinels.
type Broker struct {
	backend   storage.Backend
	cfg       Config
	log       *slog.Logger
	clock     model.Clock         // the backend's (Backend.Clock)
	refusals  refusals            // sends refused by backpressure, per queue and reason
	receivers receivers           // who received from each queue lately (receivers.go)
	receipts  *model.ReceiptCodec // the backend's (Backend.Receipts)
	streams   streams             // the open consumer streams (consumers.go)
	id        string              // names this broker in the store's consumer records
}

// New returns the front over backend, which it owns from then on (Close
// closes it); zero fields of cfg take their defaults (DefaultConfig). The
// front uses the backend's clock (Backend.Clock).
func New(backend storage.Backend, cfg Config) (*Broker, error) {
	if backend == nil {
		return nil, errNilBackend
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	receipts := backend.Receipts()
	if receipts == nil {
		return nil, errNoReceiptCodec
	}
	clock := backend.Clock()
	if clock == nil {
		clock = model.RealClock{}
	}
	return &Broker{backend: backend, cfg: cfg, log: cfg.Logger, clock: clock, receipts: receipts, id: brokerID()}, nil
}

// Clock returns the clock the front and its backend share (Backend.Clock),
// for an API that turns an instant into a delay or an age.
func (b *Broker) Clock() model.Clock { return b.clock }

// Close ends the consumer streams (releasing what they hold), then closes
// the backend: it stops the background duties, syncs and releases the
// store. Idempotent.
func (b *Broker) Close() error {
	b.streams.closeAll()
	return b.backend.Close()
}

// CreateQueue creates a queue with the given SQS attributes and tags, or
// returns the existing queue when every given attribute equals the existing
// value (ErrQueueExists otherwise). Names follow ValidateQueueName.
func (b *Broker) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (model.Queue, error) {
	if err := model.ValidateQueueName(name); err != nil {
		return model.Queue{}, err
	}
	cfg, err := model.ParseAttributes(name, attrs)
	if err != nil {
		return model.Queue{}, err
	}
	if err := model.ValidateTags(name, tags); err != nil {
		return model.Queue{}, err
	}
	if err := b.checkWebhook(cfg.DeadLetterWebhook); err != nil {
		return model.Queue{}, err
	}
	ref, err := b.resolve(ctx, model.ActionCreateQueue, name)
	if err != nil {
		return model.Queue{}, err
	}
	if err := webhookAccount(ref, cfg.DeadLetterWebhook); err != nil {
		return model.Queue{}, err
	}
	checked := false
	if cfg.Redrive != nil {
		// An existing queue is compared, not checked: its own policy was
		// checked when it was set, and a repeated CreateQueue must answer
		// the queue even if its dead-letter queue is gone since. A new
		// queue's target must pass checkRedrive.
		_, err := b.backend.GetQueue(ctx, ref)
		switch {
		case errors.Is(err, model.ErrQueueDoesNotExist):
			if err := b.checkRedrive(ctx, ref, cfg, attrs[model.AttrRedrivePolicy]); err != nil {
				return model.Queue{}, err
			}
			checked = true
		case err != nil:
			return model.Queue{}, err
		}
	}
	// Even for a queue that exists, the backend answers: it waits until the
	// change that created the queue is durable.
	q, created, err := b.backend.CreateQueue(ctx, storage.QueueSpec{QueueRef: ref, Config: cfg, Tags: tags})
	switch {
	case err != nil:
		return model.Queue{}, err
	case created && cfg.Redrive != nil && !checked:
		// The queue was deleted after GetQueue found it: this call created
		// it, with a policy not checked yet. Check it now; a refusal
		// deletes the queue again, which nobody was told of.
		if err := b.checkRedrive(ctx, ref, cfg, attrs[model.AttrRedrivePolicy]); err != nil {
			if derr := b.backend.DeleteQueue(ctx, ref); derr != nil {
				b.log.Error("a queue created with a refused RedrivePolicy could not be deleted", "queue", name, "err", derr)
			}
			return model.Queue{}, err
		}
	case !created:
		return b.existing(q, attrs)
	}
	return q, nil
}

// existing answers a CreateQueue of a queue that exists: the queue, when
// every given attribute has its value (after parsing, so "30" and " 30"
// match), ErrQueueExists otherwise.
func (b *Broker) existing(q model.Queue, attrs map[string]string) (model.Queue, error) {
	if attr := q.Config.ConflictingAttribute(q.Name, attrs); attr != "" {
		return model.Queue{}, model.Errorf(model.ErrQueueExists,
			"A queue already exists with the same name and a different value for attribute %s", attr)
	}
	return q, nil
}

// checkRedrive checks a RedrivePolicy against its target: not the queue
// itself, in the source's account (an ARN naming another account is
// refused, as AWS refuses it), the target exists, has the same type (FIFO
// or standard), and its RedriveAllowPolicy lets source use it. raw is the
// attribute as given, for the message. (A target deleted later is the
// move's concern: a message whose dead-letter queue is gone stays where it
// is.)
func (b *Broker) checkRedrive(ctx context.Context, src model.QueueRef, cfg model.QueueConfig, raw string) error {
	source := src.Name
	if cfg.Redrive == nil {
		return nil
	}
	bad := func(reason string) error {
		return model.Errorf(model.ErrInvalidParameterValue, "Value %s for parameter RedrivePolicy is invalid. Reason: %s", raw, reason)
	}
	if cfg.Redrive.DeadLetterQueue == source {
		return bad("A queue can't be its own dead-letter queue.")
	}
	if a := arnAccount(cfg.Redrive.DeadLetterTargetARN); a != b.accountOf(src) {
		return bad("Dead-letter queue must be in the same account as the source queue.")
	}
	dlq, err := b.backend.GetQueue(ctx, model.QueueRef{Account: src.Account, Name: cfg.Redrive.DeadLetterQueue})
	switch {
	case errors.Is(err, model.ErrQueueDoesNotExist):
		return bad("Dead letter target does not exist.")
	case err != nil:
		return err
	case dlq.Config.Fifo != cfg.Fifo:
		return bad("Dead-letter queue must be of the same type as the source queue (FIFO or standard).")
	case !dlq.Config.AllowsSource(source):
		return bad("Dead letter target's RedriveAllowPolicy does not allow this queue as a source.")
	}
	return nil
}

// GetQueue returns a queue and its approximate counts (for
// GetQueueAttributes; GetQueueFor names another reading action).
func (b *Broker) GetQueue(ctx context.Context, name string) (model.QueueInfo, error) {
	return b.GetQueueFor(ctx, model.ActionGetQueueAttributes, name)
}

// GetQueueFor is GetQueue for an API action that reads a queue: act is
// ActionGetQueueAttributes, ActionGetQueueURL, ActionListQueueTags or
// ActionListDeadLetterSourceQueues (the access rule tells them apart).
func (b *Broker) GetQueueFor(ctx context.Context, act model.Action, name string) (model.QueueInfo, error) {
	switch act {
	case model.ActionGetQueueAttributes, model.ActionGetQueueURL, model.ActionListQueueTags, model.ActionListDeadLetterSourceQueues:
	default:
		return model.QueueInfo{}, fmt.Errorf("broker: GetQueueFor: %s is not an action that reads a queue", act)
	}
	ref, err := b.resolve(ctx, act, name)
	if err != nil {
		return model.QueueInfo{}, err
	}
	return b.backend.GetQueue(ctx, ref)
}

// ListQueues returns the caller's account's queues whose names start with
// prefix and sort after `after`, in name order, at most limit of them
// (limit <= 0: all). (ListQueueSources lists another account's.)
func (b *Broker) ListQueues(ctx context.Context, prefix, after string, limit int) ([]model.Queue, error) {
	return b.backend.ListQueues(ctx, b.refIn(b.CallerAccount(ctx), "").Account, prefix, after, limit)
}

// DeadLetterSources returns the queues whose RedrivePolicy names queue
// name as their dead-letter queue (the queue itself left out), in name
// order after `after`; the caller needs ListDeadLetterSourceQueues on it.
// Every queue of its account is looked at: a scan, but of queue records
// only.
func (b *Broker) DeadLetterSources(ctx context.Context, name, after string) ([]model.Queue, error) {
	ref, err := b.resolve(ctx, model.ActionListDeadLetterSourceQueues, name)
	if err != nil {
		return nil, err
	}
	if _, err := b.backend.GetQueue(ctx, ref); err != nil {
		return nil, err
	}
	qs, err := b.backend.ListQueues(ctx, ref.Account, "", after, 0)
	if err != nil {
		return nil, err
	}
	out := qs[:0]
	for _, q := range qs {
		if r := q.Config.Redrive; r != nil && r.DeadLetterQueue == name && q.Name != name {
			out = append(out, q)
		}
	}
	return out, nil
}

// SetQueueAttributes changes the given attributes (ApplyAttributes rules; a
// RedrivePolicy is checked as CreateQueue checks it).
func (b *Broker) SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	if attrs == nil {
		attrs = map[string]string{} // a change that changes nothing still moves LastModifiedTimestamp
	}
	if raw := attrs[model.AttrDeadLetterWebhook]; raw != "" {
		// The URL's form is ApplyAttributes' to refuse; its host is the
		// operator's.
		if _, err := model.ParseWebhook(raw); err != nil {
			return err
		}
		if err := b.checkWebhook(raw); err != nil {
			return err
		}
	}
	ref, err := b.resolve(ctx, model.ActionSetQueueAttributes, name)
	if err != nil {
		return err
	}
	if err := webhookAccount(ref, attrs[model.AttrDeadLetterWebhook]); err != nil {
		return err
	}
	if raw, ok := attrs[model.AttrRedrivePolicy]; ok {
		q, err := b.backend.GetQueue(ctx, ref)
		if err != nil {
			return err
		}
		cfg, err := model.ApplyAttributes(q.Config, attrs)
		if err != nil {
			return err
		}
		// FifoQueue cannot change, so the target's type is checked against
		// a settled value even if the queue changes meanwhile.
		if err := b.checkRedrive(ctx, ref, cfg, raw); err != nil {
			return err
		}
	}
	return b.backend.UpdateQueue(ctx, ref, model.QueueChange{Attributes: attrs})
}

// DeleteQueue deletes a queue: waiting receives end with ErrQueueDoesNotExist,
// its receipts stop working, and its messages are reclaimed in the background.
func (b *Broker) DeleteQueue(ctx context.Context, name string) error {
	ref, err := b.resolve(ctx, model.ActionDeleteQueue, name)
	if err != nil {
		return err
	}
	if err := b.backend.DeleteQueue(ctx, ref); err != nil {
		return err
	}
	b.streams.endQueue(ref)
	b.refusals.forget(ref.String())
	b.receivers.forget(ref.String())
	b.audit(ctx, "delete_queue", ref.String())
	return nil
}

// PurgeQueue deletes every message of the queue (ready, delayed and in
// flight). With Config.StrictPurge a second purge within 60 s fails with
// ErrPurgeInProgress.
func (b *Broker) PurgeQueue(ctx context.Context, name string) error {
	var minInterval time.Duration
	if b.cfg.StrictPurge {
		minInterval = plan.PurgeInterval
	}
	ref, err := b.resolve(ctx, model.ActionPurgeQueue, name)
	if err != nil {
		return err
	}
	if err := b.backend.PurgeQueue(ctx, ref, minInterval); err != nil {
		return err
	}
	b.audit(ctx, "purge_queue", ref.String())
	return nil
}

// Send stores messages: 1..10 entries with distinct ids, or one entry with
// no id (a plain SendMessage). Per-entry failures are in the results.
func (b *Broker) Send(ctx context.Context, queue string, entries []model.SendEntry) ([]model.SendResult, error) {
	if err := model.ValidateSendBatch(entries); err != nil {
		return nil, err
	}
	ref, err := b.resolve(ctx, model.ActionSendMessage, queue)
	if err != nil {
		return nil, err
	}
	// The Sluice options are parsed here, once; the backend's planner
	// checks them against the queue (plan.CheckOptions). The caller's
	// entries are left as they were.
	entries = slices.Clone(entries)
	for i := range entries {
		entries[i].Options = model.ParseMessageOptions(entries[i].Attributes)
	}
	res, err := b.backend.Send(ctx, ref, entries)
	var full *model.DepthError
	if errors.As(err, &full) {
		b.refusals.add(ref.String(), full.Reason())
		if b.cfg.Observer != nil {
			b.cfg.Observer.Refused(ref.String(), full.Reason())
		}
	}
	if err == nil && b.cfg.Observer != nil {
		n := 0
		for _, r := range res {
			if r.Err == nil {
				n++
			}
		}
		b.count(ref.String(), model.CountSent, n)
	}
	return res, err
}

// Receive leases up to req.MaxMessages messages, waiting up to the wait time
// for a first one (Backend.Receive).
func (b *Broker) Receive(ctx context.Context, req model.ReceiveRequest) ([]model.Delivery, error) {
	ref, err := b.resolve(ctx, model.ActionReceiveMessage, req.Queue)
	if err != nil {
		return nil, err
	}
	req.InFlightCap, req.Account = int64(b.cfg.MaxInFlight), ref.Account
	ds, err := b.backend.Receive(ctx, req)
	b.count(ref.String(), model.CountReceived, len(ds))
	if err == nil {
		b.receivers.seen(ctx, ref.String(), len(ds), b.clock.Now())
	}
	return ds, err
}

// Delete deletes leased messages and answers one error (or nil) per entry. A
// stale but well-formed receipt (the message was since deleted or leased
// again) succeeds without effect.
func (b *Broker) Delete(ctx context.Context, queue string, entries []model.DeleteEntry) ([]error, error) {
	if err := model.ValidateBatch(entries, func(e model.DeleteEntry) string { return e.ID }); err != nil {
		return nil, err
	}
	ref, err := b.resolve(ctx, model.ActionDeleteMessage, queue)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(entries))
	var receipts []model.Receipt
	var results []*string // nil unless an entry has a result
	var at []int          // index in entries of each receipt
	for i, e := range entries {
		if e.Result != nil && len(*e.Result) > model.MaxResultBytes {
			errs[i] = model.Errorf(model.ErrInvalidParameterValue, "The result is %d bytes long; an ack's result is at most %d bytes (64 KiB): keep a larger result elsewhere and give its key.", len(*e.Result), model.MaxResultBytes)
			continue
		}
		if e.Result != nil && !model.ValidBodyChars(*e.Result) {
			// As a body's: PostgreSQL's text holds no NUL, and a refused
			// statement would fail the deletes combined with this one.
			errs[i] = model.Errorf(model.ErrInvalidParameterValue, "The result contains invalid characters. %s", model.ValidCharacters)
			continue
		}
		r, err := b.receipts.Decode(e.Receipt)
		if err != nil {
			errs[i] = err
			continue
		}
		if e.Result != nil && results == nil {
			results = make([]*string, len(receipts), len(entries))
		}
		if results != nil {
			results = append(results, e.Result)
		}
		receipts = append(receipts, r)
		at = append(at, i)
	}
	outcomes, err := b.backend.Delete(ctx, ref, receipts, results)
	if err != nil {
		return nil, err
	}
	var ended []model.Receipt
	for j, o := range outcomes {
		errs[at[j]] = LeaseError(o, entries[at[j]].Receipt, false)
		if o != model.LeaseOtherQueue {
			ended = append(ended, receipts[j])
		}
	}
	b.streams.settledElsewhere(ended, true)
	b.count(ref.String(), model.CountDeleted, applied(outcomes, nil))
	return errs, nil
}

// ChangeVisibility sets leases' remaining time, counted from now (0..12 h; 0
// is a nack: the message is visible at once, or after its queue's retry
// policy's backoff, or dead-lettered when it used its last attempt; see
// plan.LeaseChange), and answers one error (or nil) per entry: a stale
// receipt fails with ErrInvalidParameterValue, a lease that ended (or any
// receipt of an at-most-once queue) with ErrMessageNotInflight.
func (b *Broker) ChangeVisibility(ctx context.Context, queue string, entries []model.VisibilityEntry) ([]error, error) {
	if err := model.ValidateBatch(entries, func(e model.VisibilityEntry) string { return e.ID }); err != nil {
		return nil, err
	}
	ref, err := b.resolve(ctx, model.ActionChangeMessageVisibility, queue)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(entries))
	var changes []model.VisibilityChange
	var at []int
	for i, e := range entries {
		if err := model.ValidateVisibility(e.Timeout); err != nil {
			errs[i] = err
			continue
		}
		r, err := b.receipts.Decode(e.Receipt)
		if err != nil {
			errs[i] = err
			continue
		}
		changes = append(changes, model.VisibilityChange{Receipt: r, Timeout: e.Timeout})
		at = append(at, i)
	}
	outcomes, err := b.backend.ChangeVisibility(ctx, ref, changes)
	if err != nil {
		return nil, err
	}
	b.count(ref.String(), model.CountNacked, applied(outcomes, func(j int) bool { return changes[j].Timeout == 0 }))
	b.streams.changed(changes, outcomes, b.clock.Now())
	for j, o := range outcomes {
		errs[at[j]] = LeaseError(o, entries[at[j]].Receipt, true)
	}
	return errs, nil
}

// applied counts the outcomes that are LeaseApplied (and whose change is
// one that pick, when not nil, selects by index).
func applied(outcomes []model.LeaseOutcome, pick func(j int) bool) int {
	n := 0
	for j, o := range outcomes {
		if o == model.LeaseApplied && (pick == nil || pick(j)) {
			n++
		}
	}
	return n
}

// TagQueue adds tags to the queue, replacing the values of keys it already
// has; the merged set must pass ValidateTags. Tags are not attributes:
// LastModifiedTimestamp stays.
func (b *Broker) TagQueue(ctx context.Context, name string, tags map[string]string) error {
	ref, err := b.resolve(ctx, model.ActionTagQueue, name)
	if err != nil {
		return err
	}
	if tags == nil {
		tags = map[string]string{}
	}
	return b.backend.UpdateQueue(ctx, ref, model.QueueChange{AddTags: tags})
}

// UntagQueue removes the tags with the given keys; unknown keys are ignored.
func (b *Broker) UntagQueue(ctx context.Context, name string, keys []string) error {
	ref, err := b.resolve(ctx, model.ActionUntagQueue, name)
	if err != nil {
		return err
	}
	if keys == nil {
		keys = []string{}
	}
	return b.backend.UpdateQueue(ctx, ref, model.QueueChange{RemoveTags: keys})
}

// AddPermission adds p as a statement of the queue's Policy attribute
// (AddPolicyStatement). The Policy is an attribute: LastModifiedTimestamp moves.
func (b *Broker) AddPermission(ctx context.Context, name string, p model.Permission) error {
	if err := model.ValidatePermission(p); err != nil {
		return err
	}
	ref, err := b.resolve(ctx, model.ActionAddPermission, name)
	if err != nil {
		return err
	}
	return b.backend.UpdateQueue(ctx, ref, model.QueueChange{AddPermission: &p})
}

// RemovePermission removes the statement whose Sid is label.
func (b *Broker) RemovePermission(ctx context.Context, name, label string) error {
	if err := model.ValidateLabel(label); err != nil {
		return err
	}
	ref, err := b.resolve(ctx, model.ActionRemovePermission, name)
	if err != nil {
		return err
	}
	return b.backend.UpdateQueue(ctx, ref, model.QueueChange{RemovePermission: label})
}

// LeaseError is the answer to one Delete (visibility == false) or
// ChangeVisibility receipt whose backend outcome is o; handle is the receipt
// handle as the client sent it.
func LeaseError(o model.LeaseOutcome, handle string, visibility bool) error {
	switch o {
	case model.LeaseOtherQueue:
		return model.ReceiptInvalidError(handle)
	case model.LeaseStale:
		if visibility {
			return model.Errorf(model.ErrInvalidParameterValue,
				"Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", handle)
		}
		return nil // a stale delete succeeds without effect, as in SQS
	case model.LeaseEnded:
		if visibility {
			return model.Errorf(model.ErrMessageNotInflight, "The message referred to is not in flight.")
		}
		return model.ReceiptExpiredError(handle)
	}
	return nil
}
