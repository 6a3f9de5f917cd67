package native

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/api/native/wire"
	"github.com/sluicemq/sluice/broker/model"
)

// The message routes: send (single and batch), receive, browse, delete by
// id.

func (h *Handler) sendMessage(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.Envelope
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	e, err := toSendEntry("", &in, h.broker.Clock().Now())
	if err != nil {
		return nil, err
	}
	rs, err := h.broker.Send(c.ctx, c.queue, []model.SendEntry{e})
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("the broker answered %d results for 1 send", len(rs))
	}
	if rs[0].Err != nil {
		return nil, rs[0].Err
	}
	c.status = http.StatusCreated
	return &wire.Sent{ID: rs[0].MessageID, SequenceNumber: rs[0].SequenceNumber}, nil
}

// entryIDs checks a batch's ids: all given, or none (the entries are then
// named by their index, which the answer does not echo).
func entryIDs(field string, ids []string) ([]string, bool, error) {
	given := 0
	for _, id := range ids {
		if id != "" {
			given++
		}
	}
	switch given {
	case len(ids):
		return ids, true, nil
	case 0:
		out := make([]string, len(ids))
		for i := range out {
			out[i] = strconv.Itoa(i)
		}
		return out, false, nil
	}
	return nil, false, errorf(errBadRequest, "Give every entry of %s an id, or none.", field)
}

// entryResult is the result of entry i with error err (nil: ok).
func entryResult(id string, echo bool, err error) wire.BatchResult {
	r := wire.BatchResult{OK: err == nil}
	if echo {
		r.ID = id
	}
	if err != nil {
		b, _ := errorOf(err)
		r.Error = &b
	}
	return r
}

func (h *Handler) sendBatch(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.SendBatchRequest
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	if len(in.Messages) == 0 {
		return nil, errorf(model.ErrEmptyBatch, "Field messages must hold 1 to %d messages.", model.MaxBatchEntries)
	}
	raw := make([]string, len(in.Messages))
	for i, m := range in.Messages {
		raw[i] = m.ID
	}
	ids, echo, err := entryIDs("messages", raw)
	if err != nil {
		return nil, err
	}
	now := h.broker.Clock().Now()
	entries := make([]model.SendEntry, len(in.Messages))
	for i := range in.Messages {
		if entries[i], err = toSendEntry(fmt.Sprintf("messages[%d]", i), &in.Messages[i].Envelope, now); err != nil {
			return nil, err
		}
		entries[i].ID = ids[i]
	}
	rs, err := h.broker.Send(c.ctx, c.queue, entries)
	if err != nil {
		return nil, err
	}
	if len(rs) != len(entries) {
		return nil, fmt.Errorf("the broker answered %d results for %d sends", len(rs), len(entries))
	}
	out := &wire.BatchResults{Results: make([]wire.BatchResult, len(rs))}
	for i, r := range rs {
		out.Results[i] = entryResult(ids[i], echo, r.Err)
		if r.Err == nil {
			out.Results[i].MessageID, out.Results[i].SequenceNumber = r.MessageID, r.SequenceNumber
		}
	}
	return out, nil
}

// seconds checks an optional duration field in whole seconds, lo..hi.
func seconds(field string, v *int64, lo, hi time.Duration) (*time.Duration, error) {
	if v == nil {
		return nil, nil
	}
	if *v < int64(lo/time.Second) || *v > int64(hi/time.Second) {
		return nil, errorf(model.ErrInvalidParameterValue, "Field %s must be from %d to %d, not %d.", field, int64(lo/time.Second), int64(hi/time.Second), *v)
	}
	d := time.Duration(*v) * time.Second
	return &d, nil
}

func (h *Handler) receive(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.ReceiveRequest
	if err := h.decode(c, &in, true); err != nil {
		return nil, err
	}
	req := model.ReceiveRequest{Queue: c.queue, MaxMessages: 1}
	if in.Max != nil {
		if *in.Max < 1 || *in.Max > model.MaxReceiveMessages {
			return nil, errorf(model.ErrInvalidParameterValue, "Field max must be from 1 to %d, not %d.", model.MaxReceiveMessages, *in.Max)
		}
		req.MaxMessages = *in.Max
	}
	var err error
	if req.WaitTime, err = seconds("waitSeconds", in.WaitSeconds, 0, model.MaxWaitTime); err != nil {
		return nil, err
	}
	if req.Visibility, err = seconds("visibilitySeconds", in.VisibilitySeconds, 0, model.MaxVisibilityTimeout); err != nil {
		return nil, err
	}
	out := &wire.Messages{Messages: []wire.Message{}}
	ds, err := h.cfg.Gate.Receive(c.ctx, h.broker, req, func(n int) error {
		return errorf(model.ErrThrottled, "Too many receives are waiting (%d); retry later, or receive with waitSeconds 0.", n)
	})
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return out, nil
	}
	redrive, err := h.redriveOf(c, c.queue)
	if err != nil && !errors.Is(err, model.ErrQueueDoesNotExist) {
		return nil, err
	}
	for i := range ds {
		m := toMessage(&ds[i].Message, redrive)
		m.Receipt = ds[i].Receipt
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

// browseQuery reads a browse's query parameters.
func browseQuery(c *call) (model.BrowseRequest, error) {
	q, err := queryOf(c.r, "limit", "cursor", "order", "attribute", "value", "reason")
	if err != nil {
		return model.BrowseRequest{}, err
	}
	limit, err := q.int("limit", 1, model.MaxBrowse, 20)
	if err != nil {
		return model.BrowseRequest{}, err
	}
	req := model.BrowseRequest{Limit: limit, After: q.get("cursor"), Filter: model.BrowseFilter{
		Attribute: q.get("attribute"), Value: q.get("value"), Reason: q.get("reason"),
	}}
	switch q.get("order") {
	case "", "oldest":
	case "newest":
		req.Newest = true
	default:
		return model.BrowseRequest{}, errorf(model.ErrInvalidParameterValue, "Query parameter order must be oldest or newest, not %q.", q.get("order"))
	}
	if req.Filter.Value != "" && req.Filter.Attribute == "" {
		return model.BrowseRequest{}, errorf(errBadRequest, "Query parameter value needs attribute: the attribute whose value it is.")
	}
	return req, nil
}

// browse answers a page of queue name's messages; keep, when not nil,
// drops the messages it refuses (the page may then be short, and still
// have a next page, as a filtered Browse's may).
func (h *Handler) browse(c *call, name string, req model.BrowseRequest, keep func(*model.Message) bool) (*wire.BrowsePage, error) {
	page, err := h.broker.Browse(c.ctx, name, req)
	if err != nil {
		return nil, err
	}
	redrive, err := h.redriveOf(c, name)
	if err != nil {
		return nil, err
	}
	out := &wire.BrowsePage{Queue: name, Messages: []wire.Message{}, Next: page.Next}
	for i := range page.Messages {
		bm := &page.Messages[i]
		if keep != nil && !keep(&bm.Message) {
			continue
		}
		m := toMessage(&bm.Message, redrive)
		m.State = string(bm.State)
		if !bm.VisibleAt.IsZero() {
			t := bm.VisibleAt.UTC()
			m.VisibleAt = &t
		}
		out.Messages = append(out.Messages, m)
	}
	return out, nil
}

func (h *Handler) browseMessages(c *call) (any, error) {
	req, err := browseQuery(c)
	if err != nil {
		return nil, err
	}
	return h.browse(c, c.queue, req, nil)
}

func (h *Handler) deleteMessage(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	id := c.r.PathValue("id")
	found, err := h.broker.DeleteMessages(c.ctx, c.queue, []string{id})
	if err != nil {
		return nil, err
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("the broker answered %d results for 1 delete", len(found))
	}
	if !found[0] {
		return nil, errorf(errMessageNotFound, "Queue %s holds no message %s.", c.queue, id)
	}
	return nil, nil
}

// messageStatus answers a message's status by id (Broker.MessageStatus).
func (h *Handler) messageStatus(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	id := c.r.PathValue("id")
	st, found, err := h.broker.MessageStatus(c.ctx, c.queue, id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errorf(errMessageNotFound, "Queue %s knows no message %s: it never held it, or it was deleted (the queue keeps a record of a deleted message only with its CompletedRetentionSeconds attribute, for that long).", c.queue, id)
	}
	return statusWire(st), nil
}

// statusWire is st as the wire shows it.
func statusWire(st model.MessageStatus) *wire.MessageStatus {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	var failures []wire.Failure
	for _, f := range st.Failures {
		failures = append(failures, wire.Failure{Reason: f.Reason, At: f.At.UTC()})
	}
	return &wire.MessageStatus{ID: st.ID, Queue: st.Queue, State: string(st.State), Attempts: st.Attempts,
		ReceiveCount: st.ReceiveCount, VisibleAt: at(st.VisibleAt), LeaseEndsAt: at(st.LeaseEndsAt),
		DeadLetterQueue: st.DeadLetterQueue, DeadLetterSource: st.DeadLetterSource, Reason: st.Reason,
		Failures: failures, FailureCount: st.FailureCount,
		CompletedAt: at(st.CompletedAt), Result: st.Result, ExpiredAt: at(st.ExpiredAt), ReplayedAs: st.ReplayedAs}
}

func (h *Handler) deleteMessages(c *call) (any, error) {
	return h.deleteByID(c, c.queue)
}

// deleteByID deletes the messages of queue name whose ids the body lists.
func (h *Handler) deleteByID(c *call, name string) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in wire.IDs
	if err := h.decode(c, &in, false); err != nil {
		return nil, err
	}
	found, err := h.broker.DeleteMessages(c.ctx, name, in.IDs)
	if err != nil {
		return nil, err
	}
	if len(found) != len(in.IDs) {
		return nil, fmt.Errorf("the broker answered %d results for %d deletes", len(found), len(in.IDs))
	}
	out := &wire.BatchResults{Results: make([]wire.BatchResult, len(found))}
	for i, f := range found {
		out.Results[i] = wire.BatchResult{ID: in.IDs[i], OK: true, Deleted: &f}
	}
	return out, nil
}
