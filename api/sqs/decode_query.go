package sqs

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// params are the flattened parameters of a query-protocol request (form body
// and URL query string; the body wins). Lists and maps are flattened with
// 1-based indexes: AttributeName.1, Attribute.1.Name/Attribute.1.Value,
// SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.DataType.
type params map[string]string

// urlQuery is r's URL query, nil without one (URL.Query would make an empty
// map).
func urlQuery(r *http.Request) url.Values {
	if r.URL.RawQuery == "" {
		return nil
	}
	return r.URL.Query()
}

// newParams merges the URL query and the form body (first value of each key).
func newParams(query, form url.Values) params {
	p := make(params, len(query)+len(form))
	for k, v := range query {
		if len(v) > 0 {
			p[k] = v[0]
		}
	}
	for k, v := range form {
		if len(v) > 0 {
			p[k] = v[0]
		}
	}
	return p
}

// str returns a parameter ("" when absent).
func (p params) str(name string) string { return p[name] }

// strPtr returns a parameter, nil when absent.
func (p params) strPtr(name string) *string {
	if v, ok := p[name]; ok {
		return &v
	}
	return nil
}

// num returns an integer parameter, nil when absent.
func (p params) num(name string) *number {
	if v, ok := p[name]; ok {
		return parseNumber(v)
	}
	return nil
}

// index parses the 1-based index that starts rest ("3" or "3.Name"): it
// returns the index and what follows the dot.
func index(rest string) (int, string, bool) {
	i := strings.IndexByte(rest, '.')
	head, tail := rest, ""
	if i >= 0 {
		head, tail = rest[:i], rest[i+1:]
	}
	if head == "" || len(head) > 9 {
		return 0, "", false
	}
	n, err := strconv.Atoi(head)
	if err != nil || n < 1 {
		return 0, "", false
	}
	return n, tail, i >= 0
}

// list returns the values of prefix.1, prefix.2, … in index order. An empty
// list may come as a bare "prefix=" (botocore); it yields nothing. A bare
// "prefix=value" with no indexed members is a one-element list: kombu 5.2's
// asynchronous GetQueueAttributes and boto 2 send AttributeName=All.
func (p params) list(prefix string) []string {
	type item struct {
		n int
		v string
	}
	var items []item
	for k, v := range p {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		if n, _, sub := index(rest); n > 0 && !sub {
			items = append(items, item{n, v})
		}
	}
	if v := p[prefix]; len(items) == 0 && v != "" {
		return []string{v}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].n < items[j].n })
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.v)
	}
	return out
}

// groups returns the members of a flattened list of structures
// (prefix.N.field=value) as one params per index, fields unprefixed, in index order.
func (p params) groups(prefix string) []params {
	byIndex := map[int]params{}
	for k, v := range p {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		n, field, sub := index(rest)
		if n == 0 || !sub || field == "" {
			continue
		}
		g := byIndex[n]
		if g == nil {
			g = params{}
			byIndex[n] = g
		}
		g[field] = v
	}
	idx := make([]int, 0, len(byIndex))
	for n := range byIndex {
		idx = append(idx, n)
	}
	sort.Ints(idx)
	out := make([]params, 0, len(idx))
	for _, n := range idx {
		out = append(out, byIndex[n])
	}
	return out
}

// stringMap returns a flattened map (prefix.N.<key>=k, prefix.N.<value>=v).
// Entries without a key are dropped; nil when there are none.
func (p params) stringMap(prefix, key, value string) map[string]string {
	var m map[string]string
	for _, g := range p.groups(prefix) {
		k, ok := g[key]
		if !ok {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[k] = g[value]
	}
	return m
}

// attrs returns flattened message attributes (prefix.N.Name,
// prefix.N.Value.DataType, .StringValue, .BinaryValue in base64).
func (p params) attrs(prefix string) (attrMap, error) {
	var m attrMap
	for _, g := range p.groups(prefix) {
		name, ok := g["Name"]
		if !ok {
			continue
		}
		a := attrValue{DataType: g["Value.DataType"], StringValue: text(g["Value.StringValue"])}
		if b64, ok := g["Value.BinaryValue"]; ok {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return nil, invalidValue(b64, prefix+".Value.BinaryValue", "not valid base64.")
			}
			a.BinaryValue = b
		}
		if m == nil {
			m = attrMap{}
		}
		m[name] = a
	}
	return m, nil
}

// The query decoders: one per action, filling the same input structs as JSON.

func queryQueueRef(p params) queueRef { return queueRef{QueueUrl: p.str("QueueUrl")} }

func queryCreateQueue(p params) (*createQueueInput, error) {
	return &createQueueInput{
		QueueName:  p.str("QueueName"),
		Attributes: p.stringMap("Attribute", "Name", "Value"),
		Tags:       p.stringMap("Tag", "Key", "Value"),
	}, nil
}

func queryGetQueueURL(p params) (*getQueueURLInput, error) {
	return &getQueueURLInput{QueueName: p.str("QueueName"), QueueOwnerAWSAccountId: p.str("QueueOwnerAWSAccountId")}, nil
}

func queryListQueues(p params) (*listQueuesInput, error) {
	return &listQueuesInput{QueueNamePrefix: p.str("QueueNamePrefix"), NextToken: p.str("NextToken"), MaxResults: p.num("MaxResults")}, nil
}

func queryQueueOnly(p params) (*queueRef, error) {
	r := queryQueueRef(p)
	return &r, nil
}

func queryGetQueueAttributes(p params) (*getQueueAttributesInput, error) {
	return &getQueueAttributesInput{queueRef: queryQueueRef(p), AttributeNames: p.list("AttributeName")}, nil
}

func querySetQueueAttributes(p params) (*setQueueAttributesInput, error) {
	return &setQueueAttributesInput{queueRef: queryQueueRef(p), Attributes: p.stringMap("Attribute", "Name", "Value")}, nil
}

func querySendEntry(g params) (sendEntry, error) {
	e := sendEntry{
		Id:                     g.str("Id"),
		MessageBody:            (*text)(g.strPtr("MessageBody")),
		DelaySeconds:           g.num("DelaySeconds"),
		MessageDeduplicationId: g.str("MessageDeduplicationId"),
		MessageGroupId:         g.str("MessageGroupId"),
	}
	var err error
	if e.MessageAttributes, err = g.attrs("MessageAttribute"); err != nil {
		return e, err
	}
	e.MessageSystemAttributes, err = g.attrs("MessageSystemAttribute")
	return e, err
}

func querySendMessage(p params) (*sendMessageInput, error) {
	e, err := querySendEntry(p)
	return &sendMessageInput{queueRef: queryQueueRef(p), sendEntry: e}, err
}

func querySendMessageBatch(p params) (*sendMessageBatchInput, error) {
	in := &sendMessageBatchInput{queueRef: queryQueueRef(p)}
	for _, g := range p.groups("SendMessageBatchRequestEntry") {
		e, err := querySendEntry(g)
		if err != nil {
			return nil, err
		}
		in.Entries = append(in.Entries, e)
	}
	return in, nil
}

func queryReceiveMessage(p params) (*receiveMessageInput, error) {
	return &receiveMessageInput{
		queueRef: queryQueueRef(p),
		// Both AttributeNames and MessageSystemAttributeNames flatten to AttributeName.N.
		AttributeNames:          p.list("AttributeName"),
		MessageAttributeNames:   p.list("MessageAttributeName"),
		MaxNumberOfMessages:     p.num("MaxNumberOfMessages"),
		VisibilityTimeout:       p.num("VisibilityTimeout"),
		WaitTimeSeconds:         p.num("WaitTimeSeconds"),
		ReceiveRequestAttemptId: p.str("ReceiveRequestAttemptId"),
	}, nil
}

func queryDeleteMessage(p params) (*deleteMessageInput, error) {
	return &deleteMessageInput{queueRef: queryQueueRef(p), ReceiptHandle: p.strPtr("ReceiptHandle")}, nil
}

func queryDeleteMessageBatch(p params) (*deleteMessageBatchInput, error) {
	in := &deleteMessageBatchInput{queueRef: queryQueueRef(p)}
	for _, g := range p.groups("DeleteMessageBatchRequestEntry") {
		in.Entries = append(in.Entries, deleteBatchEntry{Id: g.str("Id"), ReceiptHandle: g.strPtr("ReceiptHandle")})
	}
	return in, nil
}

func queryChangeVisibility(p params) (*changeVisibilityInput, error) {
	return &changeVisibilityInput{queueRef: queryQueueRef(p), ReceiptHandle: p.strPtr("ReceiptHandle"), VisibilityTimeout: p.num("VisibilityTimeout")}, nil
}

func queryChangeVisibilityBatch(p params) (*changeVisibilityBatchInput, error) {
	in := &changeVisibilityBatchInput{queueRef: queryQueueRef(p)}
	for _, g := range p.groups("ChangeMessageVisibilityBatchRequestEntry") {
		in.Entries = append(in.Entries, visibilityBatchEntry{Id: g.str("Id"), ReceiptHandle: g.strPtr("ReceiptHandle"), VisibilityTimeout: g.num("VisibilityTimeout")})
	}
	return in, nil
}
