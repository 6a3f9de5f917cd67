package broker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
)

// The front's methods beyond SQS: consumer controls, browsing, deletes by id,
// pause and resume, and stats. The native API calls them; SQS clients reach
// what ChangeMessageVisibility expresses through ChangeVisibility.

// ChangeLeases applies consumer controls (extend, nack, snooze, release,
// dead-letter now) to leased messages and answers one error (or nil) per
// entry, as ChangeVisibility does (a stale receipt: ErrInvalidParameterValue;
// a lease that ended: ErrMessageNotInflight). A dead-letter-now on a queue
// without a RedrivePolicy fails its entry with ErrConflict.
func (b *Broker) ChangeLeases(ctx context.Context, queue string, entries []model.LeaseEntry) ([]error, error) {
	if err := model.ValidateBatch(entries, func(e model.LeaseEntry) string { return e.ID }); err != nil {
		return nil, err
	}
	ref, err := b.resolve(ctx, model.ActionChangeMessageVisibility, queue)
	if err != nil {
		return nil, err
	}
	var cfg *model.QueueConfig
	config := func() (*model.QueueConfig, error) {
		if cfg == nil {
			q, err := b.backend.GetQueue(ctx, ref)
			if err != nil {
				return nil, err
			}
			cfg = &q.Config
		}
		return cfg, nil
	}
	errs := make([]error, len(entries))
	var changes []model.VisibilityChange
	var at []int
	for i, e := range entries {
		if err := validateLeaseEntry(&e); err != nil {
			errs[i] = err
			continue
		}
		if e.Kind == model.DeadLetterNow {
			c, err := config()
			if err != nil {
				return nil, err
			}
			if c.Redrive == nil {
				errs[i] = model.Errorf(model.ErrConflict, "Queue %s has no RedrivePolicy: there is no dead-letter queue to move the message to.", queue)
				continue
			}
		}
		r, err := b.receipts.Decode(e.Receipt)
		if err != nil {
			errs[i] = err
			continue
		}
		changes = append(changes, model.VisibilityChange{Receipt: r, Kind: e.Kind, Timeout: e.Timeout, Delay: e.Delay, Reason: e.Reason})
		at = append(at, i)
	}
	outcomes, err := b.backend.ChangeVisibility(ctx, ref, changes)
	if err != nil {
		return nil, err
	}
	b.count(ref.String(), model.CountNacked, applied(outcomes, func(j int) bool { return changes[j].Kind == model.Nack }))
	b.streams.changed(changes, outcomes, b.clock.Now())
	for j, o := range outcomes {
		errs[at[j]] = LeaseError(o, entries[at[j]].Receipt, true)
	}
	return errs, nil
}

// validateLeaseEntry checks an entry's ranges and cuts its reason to
// MaxReasonBytes.
func validateLeaseEntry(e *model.LeaseEntry) error {
	switch e.Kind {
	case model.ChangeTimeout, model.Snooze:
		if err := model.ValidateVisibility(e.Timeout); err != nil {
			return err
		}
	case model.Nack:
		if e.Delay != nil {
			if err := model.ValidateVisibility(*e.Delay); err != nil {
				return err
			}
		}
	case model.DeadLetterNow:
	default:
		return model.InvalidParameterError(e.Kind, "Kind", "unknown lease change.")
	}
	if !model.ValidBodyChars(e.Reason) {
		return model.Errorf(model.ErrInvalidParameterValue, "The failure reason contains invalid characters. %s", model.ValidCharacters)
	}
	e.Reason = model.CutReason(e.Reason)
	return nil
}

// Browse returns a page of a queue's messages without leasing them
// (BrowseRequest; Limit 0 means 20).
func (b *Broker) Browse(ctx context.Context, queue string, req model.BrowseRequest) (model.BrowsePage, error) {
	if req.Limit == 0 {
		req.Limit = 20
	}
	if req.Limit < 1 || req.Limit > model.MaxBrowse {
		return model.BrowsePage{}, model.InvalidParameterError(req.Limit, "limit", "must be between 1 and 100.")
	}
	ref, err := b.resolve(ctx, model.ActionBrowse, queue)
	if err != nil {
		return model.BrowsePage{}, err
	}
	return b.backend.Browse(ctx, ref, req)
}

// MaxDeleteByID is the most message ids one DeleteMessages call takes.
const MaxDeleteByID = 100

// DeleteMessages deletes messages by id whatever their state (a dead letter
// that will never be replayed, a message that must not run) and reports
// which were there. Every call is logged (the audit line).
func (b *Broker) DeleteMessages(ctx context.Context, queue string, ids []string) ([]bool, error) {
	if len(ids) == 0 || len(ids) > MaxDeleteByID {
		return nil, model.InvalidParameterError(len(ids), "ids", "give 1 to 100 message ids.")
	}
	ref, err := b.resolve(ctx, model.ActionDeleteMessages, queue)
	if err != nil {
		return nil, err
	}
	found, err := b.backend.DeleteMessages(ctx, ref, ids)
	if err != nil {
		return nil, err
	}
	deleted := map[string]bool{} // a repeated id counts once
	var deletedIDs []string      // what was deleted, for the audit line
	for i, f := range found {
		if f && !deleted[strings.ToLower(ids[i])] {
			deleted[strings.ToLower(ids[i])] = true
			deletedIDs = append(deletedIDs, ids[i])
		}
	}
	n := len(deleted)
	b.audit(ctx, "delete_messages", ref.String(), slog.Int("asked", len(ids)), slog.Int("deleted", n),
		slog.String("deleted_ids", strings.Join(deletedIDs, ",")))
	return found, nil
}

// SetPaused pauses (true) or resumes (false) a queue's deliveries: the
// Paused attribute.
func (b *Broker) SetPaused(ctx context.Context, queue string, paused bool) error {
	v := "false"
	if paused {
		v = "true"
	}
	return b.SetQueueAttributes(ctx, queue, map[string]string{model.AttrPaused: v})
}

// Stats is a queue's live view: its counts, oldest message, dead letters and
// refused sends.
type Stats struct {
	model.QueueStats
	// DeadLetters is the number of messages in the queue's dead-letter queue
	// (-1 when it has none, or it is gone).
	DeadLetters int64
	// Refused counts the sends this broker refused since it started, by
	// reason (DepthError.Reason).
	Refused map[string]int64
}

// Stats returns a queue's stats.
func (b *Broker) Stats(ctx context.Context, queue string) (model.QueueInfo, Stats, error) {
	ref, err := b.resolve(ctx, model.ActionGetQueueAttributes, queue)
	if err != nil {
		return model.QueueInfo{}, Stats{}, err
	}
	q, err := b.backend.GetQueue(ctx, ref)
	if err != nil {
		return model.QueueInfo{}, Stats{}, err
	}
	s := Stats{QueueStats: q.Stats, DeadLetters: -1, Refused: b.refusals.get(ref.String())}
	if r := q.Config.Redrive; r != nil {
		if d, err := b.backend.GetQueue(ctx, model.QueueRef{Account: ref.Account, Name: r.DeadLetterQueue}); err == nil {
			s.DeadLetters = d.Stats.Depth()
		} else if !errors.Is(err, model.ErrQueueDoesNotExist) {
			return model.QueueInfo{}, Stats{}, err
		}
	}
	return q, s, nil
}

// Ready reports whether the broker can serve: its store has not failed (a
// fail-stop after a write or sync error) and answers (Diagnostics.Ping).
// /readyz asks it.
func (b *Broker) Ready(ctx context.Context) error {
	select {
	case <-b.backend.Failed():
		return errors.New("the store failed (a write or sync error): restart the broker to recover from its log")
	default:
	}
	return b.backend.Ping(ctx)
}

// Failed is closed when the store fail-stops after a write or sync error:
// every call is refused from then on, and the process should restart to
// recover from its log (sluice serve exits with status 1).
func (b *Broker) Failed() <-chan struct{} { return b.backend.Failed() }

// Syncs counts the store's log syncs since it opened; ok is false for a
// store without a log of its own (PostgreSQL).
func (b *Broker) Syncs() (n uint64, ok bool) { return b.backend.Syncs() }

// PoolStats are the store's connection pool figures, for metrics; ok is
// false for a store without a pool (the embedded store).
func (b *Broker) PoolStats() (s model.PoolStats, ok bool) { return b.backend.PoolStats() }

// AllStats returns every queue of the caller's account with its counts, in
// name order, in one read of the store. The counts are as approximate as
// GetQueue's.
func (b *Broker) AllStats(ctx context.Context) ([]model.QueueInfo, error) {
	return b.backend.ListQueueStats(ctx, b.refIn(b.CallerAccount(ctx), "").Account)
}

// refusals counts refused sends per queue and reason.
type refusals struct {
	mu sync.Mutex
	m  map[string]map[string]int64
}

func (r *refusals) add(queue, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[string]int64{}
	}
	if r.m[queue] == nil {
		r.m[queue] = map[string]int64{}
	}
	r.m[queue][reason]++
}

func (r *refusals) get(queue string) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int64{}
	for k, v := range r.m[queue] {
		out[k] = v
	}
	return out
}

func (r *refusals) forget(queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, queue)
}

// StoreSize reads how much room the store takes and has left (for the
// native API's overview); ok is false for a store that does not tell
// (storage.Sizer).
func (b *Broker) StoreSize(ctx context.Context) (s model.StoreSize, ok bool, err error) {
	sz, ok := b.backend.(storage.Sizer)
	if !ok {
		return model.StoreSize{}, false, nil
	}
	s, err = sz.StoreSize(ctx)
	return s, true, err
}
