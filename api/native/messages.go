package native

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The message routes: send (single and batch), receive, browse, delete by
// id.

// sent is the answer to a send, and a batch entry's result.
type sent struct {
	ID             string `json:"id"`
	SequenceNumber string `json:"sequenceNumber,omitempty"`
}

func (h *Handler) sendMessage(c *call) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in envelope
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
	return &sent{ID: rs[0].MessageID, SequenceNumber: rs[0].SequenceNumber}, nil
}

// sendBatchRequest is the body of POST /v1/queues/{queue}/messages/batch.
type sendBatchRequest struct {
	Messages []batchEntry `json:"messages"`
}

// batchResult is one entry's outcome in a batch answer, in request order:
// ok, or its error. Id echoes the entry's id when it had one.
type batchResult struct {
	ID string `json:"id,omitempty"`
	OK bool   `json:"ok"`
	// MessageID and SequenceNumber are a sent message's.
	MessageID      string `json:"messageId,omitempty"`
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	// Deleted is a delete by id's: whether the message was there.
	Deleted *bool      `json:"deleted,omitempty"`
	Error   *errorBody `json:"error,omitempty"`
}

// batchResults is a batch answer.
type batchResults struct {
	Results []batchResult `json:"results"`
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
func entryResult(id string, echo bool, err error) batchResult {
	r := batchResult{OK: err == nil}
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
	var in sendBatchRequest
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
		if entries[i], err = toSendEntry(fmt.Sprintf("messages[%d]", i), &in.Messages[i].envelope, now); err != nil {
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
	out := &batchResults{Results: make([]batchResult, len(rs))}
	for i, r := range rs {
		out.Results[i] = entryResult(ids[i], echo, r.Err)
		if r.Err == nil {
			out.Results[i].MessageID, out.Results[i].SequenceNumber = r.MessageID, r.SequenceNumber
		}
	}
	return out, nil
}

// receiveRequest is the body of POST /v1/queues/{queue}/receive.
type receiveRequest struct {
	// Max is 1..10 (default 1).
	Max *int `json:"max"`
	// WaitSeconds is 0..20 (default: the queue's ReceiveMessageWaitTimeSeconds).
	WaitSeconds *int64 `json:"waitSeconds"`
	// VisibilitySeconds is 0..43200 (default: the queue's VisibilityTimeout).
	VisibilitySeconds *int64 `json:"visibilitySeconds"`
}

// messages is a receive's answer.
type messages struct {
	Messages []message `json:"messages"`
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
	var in receiveRequest
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
	out := &messages{Messages: []message{}}
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

// browsed is a page of browsed messages; Next, when set, is the cursor= of
// the next page.
type browsed struct {
	// Queue is the queue browsed (the dead-letter queue, for dead letters).
	Queue    string    `json:"queue"`
	Messages []message `json:"messages"`
	Next     string    `json:"next,omitempty"`
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
func (h *Handler) browse(c *call, name string, req model.BrowseRequest, keep func(*model.Message) bool) (*browsed, error) {
	page, err := h.broker.Browse(c.ctx, name, req)
	if err != nil {
		return nil, err
	}
	redrive, err := h.redriveOf(c, name)
	if err != nil {
		return nil, err
	}
	out := &browsed{Queue: name, Messages: []message{}, Next: page.Next}
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

// idsRequest is the body of a delete by ids.
type idsRequest struct {
	IDs []string `json:"ids"`
}

func (h *Handler) deleteMessages(c *call) (any, error) {
	return h.deleteByID(c, c.queue)
}

// deleteByID deletes the messages of queue name whose ids the body lists.
func (h *Handler) deleteByID(c *call, name string) (any, error) {
	if _, err := queryOf(c.r); err != nil {
		return nil, err
	}
	var in idsRequest
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
	out := &batchResults{Results: make([]batchResult, len(found))}
	for i, f := range found {
		out.Results[i] = batchResult{ID: in.IDs[i], OK: true, Deleted: &f}
	}
	return out, nil
}
