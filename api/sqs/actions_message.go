package sqs

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The message actions: SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch),
// ChangeMessageVisibility(Batch).

// seconds converts an optional integer parameter in seconds to a duration.
func seconds(n *number, param string) (*time.Duration, error) {
	v, ok, err := n.get(param)
	if err != nil || !ok {
		return nil, err
	}
	d := time.Duration(v) * time.Second
	return &d, nil
}

// batchParam names member param of a batch's entry i (0-based): the
// parameter an error names, built only for an error.
func batchParam(entry string, i int, param string) string {
	if entry == "" {
		return param
	}
	return entry + "." + strconv.Itoa(i+1) + "." + param
}

// toSendEntry converts SendMessage's input (entry "") or entry i of a
// SendMessageBatch (entry model.SendBatchEntry).
func (c *call) toSendEntry(e *sendEntry, entry string, i int) (model.SendEntry, error) {
	if e.MessageBody == nil {
		return model.SendEntry{}, missing(batchParam(entry, i, "MessageBody"))
	}
	delay, err := seconds(e.DelaySeconds, "DelaySeconds")
	if err != nil {
		return model.SendEntry{}, err
	}
	return model.SendEntry{
		ID:               e.Id,
		Body:             string(*e.MessageBody),
		Delay:            delay,
		Attributes:       toBroker(e.MessageAttributes),
		SystemAttributes: toBroker(e.MessageSystemAttributes),
		SenderID:         c.senderID,
		GroupID:          e.MessageGroupId,
		DedupID:          e.MessageDeduplicationId,
	}, nil
}

// sendOutput is what a send answers: the MD5s of what was sent (attribute MD5s
// omitted when there are none) and the new message id.
func sendOutput(e model.SendEntry, r model.SendResult) sendMessageOutput {
	return sendMessageOutput{
		MD5OfMessageBody:             MD5OfBody(e.Body),
		MD5OfMessageAttributes:       MD5OfAttributes(e.Attributes),
		MD5OfMessageSystemAttributes: MD5OfAttributes(e.SystemAttributes),
		MessageId:                    r.MessageID,
		SequenceNumber:               r.SequenceNumber,
	}
}

func (h *Handler) sendMessage(c *call, in *sendMessageInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	e, err := c.toSendEntry(&in.sendEntry, "", 0)
	if err != nil {
		return nil, err
	}
	e.ID = "" // a plain send, whatever Id the client added: the broker treats an entry with an id as a batch
	rs, err := h.broker.Send(c.ctx, name, []model.SendEntry{e})
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		return nil, internal(fmt.Errorf("backend returned %d results for 1 send", len(rs)))
	}
	if rs[0].Err != nil {
		return nil, rs[0].Err
	}
	out := sendOutput(e, rs[0])
	return &out, nil
}

// batchFailure is the Failed entry of a batch entry that failed with err.
func batchFailure(id string, err error) batchError {
	k := kindOf(normalize(err))
	return batchError{Id: id, SenderFault: k.status < 500, Code: k.code, Message: wireMessage(err, k)}
}

func (h *Handler) sendMessageBatch(c *call, in *sendMessageBatchInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if err := model.ValidateBatchIDs(model.SendBatchEntry, ids); err != nil {
		return nil, err
	}
	entries := make([]model.SendEntry, len(in.Entries))
	for i := range in.Entries {
		if entries[i], err = c.toSendEntry(&in.Entries[i], model.SendBatchEntry, i); err != nil {
			return nil, err
		}
	}
	rs, err := h.broker.Send(c.ctx, name, entries)
	if err != nil {
		return nil, err
	}
	if len(rs) != len(entries) {
		return nil, internal(fmt.Errorf("backend returned %d results for %d sends", len(rs), len(entries)))
	}
	out := &sendMessageBatchOutput{Successful: []sendBatchResultEntry{}, Failed: []batchError{}}
	for i, r := range rs {
		if r.Err != nil {
			out.Failed = append(out.Failed, batchFailure(entries[i].ID, r.Err))
			continue
		}
		out.Successful = append(out.Successful, sendBatchResultEntry{Id: entries[i].ID, sendMessageOutput: sendOutput(entries[i], r)})
	}
	return out, nil
}

// systemAttributeNames are the message system attributes ReceiveMessage can return.
var systemAttributeNames = []string{
	"SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
	"AWSTraceHeader", "DeadLetterQueueSourceArn", "MessageGroupId", "MessageDeduplicationId", "SequenceNumber",
}

// wantedSystemAttributes turns AttributeNames and MessageSystemAttributeNames
// into the set of system attributes to return. Unknown names are ignored, as SQS does.
func wantedSystemAttributes(lists ...[]string) map[string]bool {
	want := map[string]bool{}
	for _, l := range lists {
		for _, n := range l {
			if n == "All" {
				for _, s := range systemAttributeNames {
					want[s] = true
				}
				continue
			}
			want[n] = true
		}
	}
	return want
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func (h *Handler) toMessage(d model.Delivery, owner string, want map[string]bool, attrNames []string) message {
	m := message{MessageId: d.ID, ReceiptHandle: d.Receipt, MD5OfBody: MD5OfBody(d.Body), Body: d.Body}
	// Each value is formatted, and the map made, only when it is wanted.
	var sys map[string]string
	set := func(name, value string) {
		if value == "" {
			return
		}
		if sys == nil {
			sys = make(map[string]string, len(want))
		}
		sys[name] = value
	}
	if want["SenderId"] {
		set("SenderId", d.SenderID)
	}
	if want["SentTimestamp"] {
		set("SentTimestamp", millis(d.SentAt))
	}
	if want["ApproximateReceiveCount"] {
		set("ApproximateReceiveCount", strconv.Itoa(d.ReceiveCount))
	}
	if want["ApproximateFirstReceiveTimestamp"] && !d.FirstReceiveAt.IsZero() {
		set("ApproximateFirstReceiveTimestamp", millis(d.FirstReceiveAt))
	}
	if want["AWSTraceHeader"] {
		set("AWSTraceHeader", d.SystemAttributes["AWSTraceHeader"].StringValue)
	}
	if want["DeadLetterQueueSourceArn"] && d.DeadLetterSource != "" {
		set("DeadLetterQueueSourceArn", h.arn(owner, d.DeadLetterSource))
	}
	if want["MessageGroupId"] {
		set("MessageGroupId", d.GroupID)
	}
	if want["MessageDeduplicationId"] {
		set("MessageDeduplicationId", d.DedupID)
	}
	if want["SequenceNumber"] {
		set("SequenceNumber", d.SequenceNumber)
	}
	m.Attributes = sys
	// MD5OfMessageAttributes covers only the attributes returned.
	attrs := model.FilterAttributes(d.Attributes, attrNames)
	m.MessageAttributes = fromBroker(attrs)
	m.MD5OfMessageAttributes = MD5OfAttributes(attrs)
	return m
}

func (h *Handler) receiveMessage(c *call, in *receiveMessageInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	req := model.ReceiveRequest{Queue: name, AttemptID: in.ReceiveRequestAttemptId}
	max, ok, err := in.MaxNumberOfMessages.get("MaxNumberOfMessages")
	if err != nil {
		return nil, err
	}
	if ok && (max < 1 || max > model.MaxReceiveMessages) {
		return nil, invalidValue(max, "MaxNumberOfMessages", "Must be between 1 and 10, if provided.")
	}
	req.MaxMessages = int(max)
	if req.Visibility, err = seconds(in.VisibilityTimeout, "VisibilityTimeout"); err != nil {
		return nil, err
	}
	if req.WaitTime, err = seconds(in.WaitTimeSeconds, "WaitTimeSeconds"); err != nil {
		return nil, err
	}
	out := &receiveMessageOutput{}
	ds, err := h.cfg.Gate.Receive(c.ctx, h.broker, req, func(n int) error {
		return model.Errorf(model.ErrThrottled, "Too many receives are waiting (%d); retry later.", n)
	})
	if err != nil {
		return nil, err
	}
	want := wantedSystemAttributes(in.AttributeNames, in.MessageSystemAttributeNames)
	for _, d := range ds {
		out.Messages = append(out.Messages, h.toMessage(d, h.ownerOf(c), want, in.MessageAttributeNames))
	}
	return out, nil
}

// receiptOf is the ReceiptHandle of a single request (entry "") or of
// entry i of a batch.
func receiptOf(p *string, entry string, i int) (string, error) {
	if p == nil || *p == "" {
		return "", missing(batchParam(entry, i, "ReceiptHandle"))
	}
	return *p, nil
}

func (h *Handler) deleteMessage(c *call, in *deleteMessageInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	rh, err := receiptOf(in.ReceiptHandle, "", 0)
	if err != nil {
		return nil, err
	}
	errs, err := h.broker.Delete(c.ctx, name, []model.DeleteEntry{{Receipt: rh}})
	return nil, single(errs, err)
}

// single returns the error of a one-entry batch call.
func single(errs []error, err error) error {
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return internal(fmt.Errorf("backend returned %d results for 1 entry", len(errs)))
	}
	return errs[0]
}

func (h *Handler) deleteMessageBatch(c *call, in *deleteMessageBatchInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	entries := make([]model.DeleteEntry, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
		entries[i] = model.DeleteEntry{ID: e.Id}
	}
	if err := model.ValidateBatchIDs(model.DeleteBatchEntry, ids); err != nil {
		return nil, err
	}
	for i, e := range in.Entries {
		if entries[i].Receipt, err = receiptOf(e.ReceiptHandle, model.DeleteBatchEntry, i); err != nil {
			return nil, err
		}
	}
	errs, err := h.broker.Delete(c.ctx, name, entries)
	ok, failed, err := batchOutcome(ids, errs, err)
	if err != nil {
		return nil, err
	}
	return &deleteMessageBatchOutput{Successful: ok, Failed: failed}, nil
}

// batchOutcome splits a backend's per-entry results of a delete or
// visibility batch into the Successful and Failed lists of the reply.
func batchOutcome(ids []string, errs []error, err error) ([]batchIDEntry, []batchError, error) {
	if err != nil {
		return nil, nil, err
	}
	if len(errs) != len(ids) {
		return nil, nil, internal(fmt.Errorf("backend returned %d results for %d entries", len(errs), len(ids)))
	}
	ok, failed := []batchIDEntry{}, []batchError{}
	for i, e := range errs {
		if e != nil {
			failed = append(failed, batchFailure(ids[i], e))
		} else {
			ok = append(ok, batchIDEntry{ids[i]})
		}
	}
	return ok, failed, nil
}

func (h *Handler) changeVisibility(c *call, in *changeVisibilityInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	rh, err := receiptOf(in.ReceiptHandle, "", 0)
	if err != nil {
		return nil, err
	}
	if in.VisibilityTimeout == nil {
		return nil, missing("VisibilityTimeout")
	}
	d, err := seconds(in.VisibilityTimeout, "VisibilityTimeout")
	if err != nil {
		return nil, err
	}
	errs, err := h.broker.ChangeVisibility(c.ctx, name, []model.VisibilityEntry{{Receipt: rh, Timeout: *d}})
	return nil, single(errs, err)
}

func (h *Handler) changeVisibilityBatch(c *call, in *changeVisibilityBatchInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	for i, e := range in.Entries {
		ids[i] = e.Id
	}
	if err := model.ValidateBatchIDs(model.VisibilityBatchEntry, ids); err != nil {
		return nil, err
	}
	entries := make([]model.VisibilityEntry, len(in.Entries))
	for i, e := range in.Entries {
		entries[i].ID = e.Id
		if entries[i].Receipt, err = receiptOf(e.ReceiptHandle, model.VisibilityBatchEntry, i); err != nil {
			return nil, err
		}
		// An absent timeout is 0: aws-sdk-go-v2 omits a zero VisibilityTimeout in batch entries.
		d, err := seconds(e.VisibilityTimeout, "VisibilityTimeout")
		if err != nil {
			return nil, err
		}
		if d != nil {
			entries[i].Timeout = *d
		}
	}
	errs, err := h.broker.ChangeVisibility(c.ctx, name, entries)
	ok, failed, err := batchOutcome(ids, errs, err)
	if err != nil {
		return nil, err
	}
	return &changeVisibilityBatchOutput{Successful: ok, Failed: failed}, nil
}
