package sqs

import (
	"encoding/xml"

	"github.com/sluicemq/sluice/broker/model"
)

// The tag and permission actions: TagQueue, UntagQueue, ListQueueTags,
// AddPermission, RemovePermission. Permissions are stored in the Policy attribute and returned by
// GetQueueAttributes; Sluice does not enforce them.

type tagQueueInput struct {
	queueRef
	Tags map[string]string `json:"Tags"`
}

type untagQueueInput struct {
	queueRef
	TagKeys []string `json:"TagKeys"`
}

type listQueueTagsOutput struct {
	Tags tagMap `json:"Tags,omitempty" xml:"Tag"`
}

// tagMap is a map of tags. In XML it is flattened as repeated
// <Tag><Key/><Value/></Tag> elements.
type tagMap map[string]string

// MarshalXML writes one element per tag, in key order.
func (m tagMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	for _, k := range sortedKeys(m) {
		v := struct {
			Key   string `xml:"Key"`
			Value string `xml:"Value"`
		}{k, m[k]}
		if err := e.EncodeElement(v, start); err != nil {
			return err
		}
	}
	return nil
}

type addPermissionInput struct {
	queueRef
	Label         string   `json:"Label"`
	AWSAccountIds []string `json:"AWSAccountIds"`
	Actions       []string `json:"Actions"`
}

type removePermissionInput struct {
	queueRef
	Label string `json:"Label"`
}

func queryTagQueue(p params) (*tagQueueInput, error) {
	return &tagQueueInput{queueRef: queryQueueRef(p), Tags: p.stringMap("Tag", "Key", "Value")}, nil
}

func queryUntagQueue(p params) (*untagQueueInput, error) {
	return &untagQueueInput{queueRef: queryQueueRef(p), TagKeys: p.list("TagKey")}, nil
}

func queryAddPermission(p params) (*addPermissionInput, error) {
	return &addPermissionInput{
		queueRef: queryQueueRef(p), Label: p.str("Label"),
		AWSAccountIds: p.list("AWSAccountId"), Actions: p.list("ActionName"),
	}, nil
}

func queryRemovePermission(p params) (*removePermissionInput, error) {
	return &removePermissionInput{queueRef: queryQueueRef(p), Label: p.str("Label")}, nil
}

func (h *Handler) tagQueue(c *call, in *tagQueueInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	if len(in.Tags) == 0 {
		return nil, missing("Tags")
	}
	return nil, h.broker.TagQueue(c.ctx, name, in.Tags)
}

func (h *Handler) untagQueue(c *call, in *untagQueueInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	if len(in.TagKeys) == 0 {
		return nil, missing("TagKeys")
	}
	return nil, h.broker.UntagQueue(c.ctx, name, in.TagKeys)
}

func (h *Handler) listQueueTags(c *call, in *queueRef) (any, error) {
	name, err := c.queueName(*in)
	if err != nil {
		return nil, err
	}
	q, err := h.broker.GetQueueFor(c.ctx, model.ActionListQueueTags, name)
	if err != nil {
		return nil, err
	}
	out := &listQueueTagsOutput{}
	if len(q.Tags) > 0 {
		out.Tags = tagMap(q.Tags)
	}
	return out, nil
}

func (h *Handler) addPermission(c *call, in *addPermissionInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	return nil, h.broker.AddPermission(c.ctx, name, model.Permission{
		Label: in.Label, AccountIDs: in.AWSAccountIds, Actions: in.Actions, Resource: h.arn(h.ownerOf(c), name),
	})
}

func (h *Handler) removePermission(c *call, in *removePermissionInput) (any, error) {
	name, err := c.queueName(in.queueRef)
	if err != nil {
		return nil, err
	}
	return nil, h.broker.RemovePermission(c.ctx, name, in.Label)
}
