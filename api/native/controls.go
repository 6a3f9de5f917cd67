package native

import (
	"fmt"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker/model"
)

// The consumer controls on a leased message, each single ({"receipt": ...})
// or batch ({"entries": [{"id", "receipt", ...}]}): ack (Broker.Delete),
// nack, extend, snooze, release and dead-letter now (Broker.ChangeLeases).
// A single control answers 204, or the entry's error; a batch answers each
// entry's result in order.

// control is one consumer control: its name and what it does.
type control struct {
	name string
	// takes are the fields besides receipt it takes; required those it
	// needs.
	takes, required []string
	// kind is the lease change (ack: none; it deletes).
	kind model.LeaseChangeKind
	ack  bool
}

var (
	ackControl     = control{name: "ack", takes: []string{"result"}, ack: true}
	nackControl    = control{name: "nack", takes: []string{"reason", "delaySeconds"}, kind: model.Nack}
	extendControl  = control{name: "extend", takes: []string{"visibilitySeconds"}, required: []string{"visibilitySeconds"}, kind: model.ChangeTimeout}
	snoozeControl  = control{name: "snooze", takes: []string{"delaySeconds"}, required: []string{"delaySeconds"}, kind: model.Snooze}
	releaseControl = control{name: "release", kind: model.Snooze}
	deadLetterCtl  = control{name: "dead-letter", takes: []string{"reason"}, kind: model.DeadLetterNow}
)

func (h *Handler) ack(c *call) (any, error)           { return h.control(c, ackControl) }
func (h *Handler) nack(c *call) (any, error)          { return h.control(c, nackControl) }
func (h *Handler) extend(c *call) (any, error)        { return h.control(c, extendControl) }
func (h *Handler) snooze(c *call) (any, error)        { return h.control(c, snoozeControl) }
func (h *Handler) release(c *call) (any, error)       { return h.control(c, releaseControl) }
func (h *Handler) deadLetterNow(c *call) (any, error) { return h.control(c, deadLetterCtl) }

// check refuses the fields the control does not take, and requires the ones
// it needs; at names the entry in errors.
func (ct control) check(at string, f *wire.ControlFields) error {
	if f.Receipt == "" {
		return errorf(model.ErrMissingParameter, "Field %sreceipt is required.", at)
	}
	given := map[string]bool{"reason": f.Reason != nil, "delaySeconds": f.DelaySeconds != nil, "visibilitySeconds": f.VisibilitySeconds != nil,
		"result": f.Result != nil}
	for name, set := range given {
		if set && !contains(ct.takes, name) {
			return errorf(errUnknownField, "Unknown field %s%s: %s takes %s.", at, name, ct.name, ct.fieldsText())
		}
	}
	for _, name := range ct.required {
		if !given[name] {
			return errorf(model.ErrMissingParameter, "Field %s%s is required.", at, name)
		}
	}
	return nil
}

func (ct control) fieldsText() string {
	s := "receipt"
	for _, f := range ct.takes {
		s += ", " + f
	}
	return s
}

// leaseEntry converts one control's fields.
func (ct control) leaseEntry(at, id string, f *wire.ControlFields) (model.LeaseEntry, error) {
	e := model.LeaseEntry{ID: id, Receipt: f.Receipt, Kind: ct.kind}
	if f.Reason != nil {
		e.Reason = *f.Reason
	}
	switch ct.name {
	case "nack":
		d, err := seconds(at+"delaySeconds", f.DelaySeconds, 0, model.MaxVisibilityTimeout)
		if err != nil {
			return e, err
		}
		e.Delay = d
	case "extend":
		// Extending to 0 would be a nack without a reason: nack says so.
		d, err := seconds(at+"visibilitySeconds", f.VisibilitySeconds, time.Second, model.MaxVisibilityTimeout)
		if err != nil {
			return e, err
		}
		e.Timeout = *d
	case "snooze":
		d, err := seconds(at+"delaySeconds", f.DelaySeconds, 0, model.MaxVisibilityTimeout)
		if err != nil {
			return e, err
		}
		e.Timeout = *d
	}
	return e, nil
}

func (h *Handler) control(c *call, ct control) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.ControlRequest
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	var fields wire.ControlFields // a single control's fields (zero when none are given)
	if in.ControlFields != nil {
		fields = *in.ControlFields
	}
	single := in.Entries == nil
	if single {
		in.Entries = []wire.ControlEntry{{ControlFields: fields}}
	} else if fields != (wire.ControlFields{}) {
		return nil, errorf(errBadRequest, "Give either one control's fields (receipt, ...) or entries, not both.")
	}
	if len(in.Entries) == 0 {
		return nil, errorf(model.ErrEmptyBatch, "Field entries must hold 1 to %d entries.", model.MaxBatchEntries)
	}
	raw := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		raw[i] = e.ID
	}
	ids, echo, err := entryIDs("entries", raw)
	if err != nil {
		return nil, err
	}
	if single {
		ids[0] = "" // a plain call: the broker takes an entry with an id as a batch
	}
	// A batch's malformed entry fails the request (naming it), as a
	// malformed body does; a well-formed entry the broker refuses fails
	// only itself.
	at := func(i int) string {
		if single {
			return ""
		}
		return fmt.Sprintf("entries[%d].", i)
	}
	for i := range in.Entries {
		if err := ct.check(at(i), &in.Entries[i].ControlFields); err != nil {
			return nil, err
		}
	}
	var errs []error
	if ct.ack {
		entries := make([]model.DeleteEntry, len(in.Entries))
		for i, e := range in.Entries {
			entries[i] = model.DeleteEntry{ID: ids[i], Receipt: e.Receipt, Result: e.Result}
		}
		errs, err = h.broker.Delete(c.ctx, c.queue, entries)
	} else {
		entries := make([]model.LeaseEntry, len(in.Entries))
		for i := range in.Entries {
			if entries[i], err = ct.leaseEntry(at(i), ids[i], &in.Entries[i].ControlFields); err != nil {
				return nil, err
			}
		}
		errs, err = h.broker.ChangeLeases(c.ctx, c.queue, entries)
	}
	if err != nil {
		return nil, err
	}
	if len(errs) != len(in.Entries) {
		return nil, fmt.Errorf("the broker answered %d results for %d entries", len(errs), len(in.Entries))
	}
	if single {
		return nil, errs[0]
	}
	out := &wire.BatchResults{Results: make([]wire.BatchResult, len(errs))}
	for i, e := range errs {
		out.Results[i] = entryResult(ids[i], echo, e)
	}
	return out, nil
}
