package sqs

import (
	"encoding/base64"
	"strings"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
)

// The queue actions: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue,
// PurgeQueue, GetQueueAttributes, SetQueueAttributes.

func (h *Handler) createQueue(c *call, in *createQueueInput) (any, error) {
	if in.QueueName == "" {
		return nil, missing("QueueName")
	}
	c.queue = in.QueueName
	q, err := h.broker.CreateQueue(c.ctx, in.QueueName, in.Attributes, in.Tags)
	if err != nil {
		return nil, err
	}
	return &queueURLOutput{QueueUrl: h.queueURL(c, h.broker.OwnerAccount(q), q.Name)}, nil
}

func (h *Handler) getQueueURL(c *call, in *getQueueURLInput) (any, error) {
	if in.QueueName == "" {
		return nil, missing("QueueName")
	}
	c.queue = in.QueueName
	if a := in.QueueOwnerAWSAccountId; a != "" {
		c.owner, c.ctx = a, broker.WithQueueOwner(c.ctx, a)
	}
	q, err := h.broker.GetQueueFor(c.ctx, model.ActionGetQueueURL, in.QueueName)
	if err != nil {
		return nil, err
	}
	return &queueURLOutput{QueueUrl: h.queueURL(c, h.broker.OwnerAccount(q.Queue), q.Name)}, nil
}

// maxListQueues is the most queues ListQueues returns in one answer.
const maxListQueues = 1000

// listTokenPrefix versions the NextToken encoding. A token names the last
// queue of the previous page, so paging is stable while queues come and go:
// the next page starts after that name whether or not it still exists.
const listTokenPrefix = "q1:"

func encodeListToken(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(listTokenPrefix + after))
}

func decodeListToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	after, ok := strings.CutPrefix(string(b), listTokenPrefix)
	if err != nil || !ok || model.ValidateQueueName(after) != nil {
		return "", invalidValue(tok, "NextToken", "Invalid NextToken value.")
	}
	return after, nil
}

func (h *Handler) listQueues(c *call, in *listQueuesInput) (any, error) {
	limit, paged, err := in.MaxResults.get("MaxResults")
	if err != nil {
		return nil, err
	}
	if paged && (limit < 1 || limit > maxListQueues) {
		return nil, invalidValue(limit, "MaxResults", "MaxResults must be an integer between 1 and 1000.")
	}
	if !paged {
		limit = maxListQueues
	}
	after := ""
	if in.NextToken != "" {
		if after, err = decodeListToken(in.NextToken); err != nil {
			return nil, err
		}
	}
	// Ask for one more than the page to learn whether another page follows.
	qs, err := h.broker.ListQueues(c.ctx, in.QueueNamePrefix, after, int(limit)+1)
	if err != nil {
		return nil, err
	}
	out := &listQueuesOutput{}
	more := len(qs) > int(limit)
	if more {
		qs = qs[:limit]
	}
	for _, q := range qs {
		out.QueueUrls = append(out.QueueUrls, h.queueURL(c, h.broker.OwnerAccount(q), q.Name))
	}
	// SQS gives a NextToken only to a caller that asked for pages.
	if more && paged {
		out.NextToken = encodeListToken(qs[len(qs)-1].Name)
	}
	return out, nil
}

func (h *Handler) deleteQueue(c *call, in *queueRef) (any, error) {
	name, err := c.queueName(*in)
	if err != nil {
		return nil, err
	}
	return nil, h.broker.DeleteQueue(c.ctx, name)
}

func (h *Handler) purgeQueue(c *call, in *queueRef) (any, error) {
	name, err := c.queueName(*in)
	if err != nil {
		return nil, err
	}
	return nil, h.broker.PurgeQueue(c.ctx, name)
}

func (h *Handler) getQueueAttributes(c *call, in *getQueueAttributesInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	all := false
	for _, n := range in.AttributeNames {
		if !model.IsQueueAttributeName(n) {
			return nil, model.Errorf(model.ErrInvalidAttributeName, "Unknown Attribute %s.", n)
		}
		all = all || n == "All"
	}
	info, err := h.broker.GetQueue(c.ctx, name)
	if err != nil {
		return nil, err
	}
	out := &getQueueAttributesOutput{}
	if len(in.AttributeNames) == 0 {
		return out, nil
	}
	attrs := model.QueueAttributes(info, h.arn(h.broker.OwnerAccount(info.Queue), info.Name))
	out.Attributes = stringMap{}
	if all {
		out.Attributes = attrs
	}
	for _, n := range in.AttributeNames {
		if v, ok := attrs[n]; ok {
			out.Attributes[n] = v
		} else if model.IsSluiceAttribute(n) {
			// Asked for by name (with All or not), an unset Sluice setting
			// reads as its default; All alone includes only the set ones.
			out.Attributes[n] = info.Config.DefaultOf(n)
		}
	}
	return out, nil
}

func (h *Handler) setQueueAttributes(c *call, in *setQueueAttributesInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	if in.Attributes == nil {
		return nil, missing("Attributes")
	}
	return nil, h.broker.SetQueueAttributes(c.ctx, name, in.Attributes)
}
