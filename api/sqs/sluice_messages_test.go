package sqs_test

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker/model"
)

// The Sluice message options (Sluice.* message attributes), trace context and
// backpressure (MaxDepth, LowPriorityMaxDepth) as SQS clients meet them, in
// both protocols.

// traceparent is a W3C trace context as OpenTelemetry's SQS instrumentations
// inject it; xrayTrace an X-Ray header.
const (
	traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	xrayTrace   = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
)

// optionAttrs are Sluice options and a traceparent, written as a client might
// (a sign and a leading zero in a Number, a custom type label): each must come back byte for byte.
func optionAttrs() map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{
		"Sluice.Priority":      {DataType: aws.String("Number"), StringValue: aws.String("+07")},
		"Sluice.MaxAttempts":   {DataType: aws.String("Number.int"), StringValue: aws.String("3")},
		"Sluice.CorrelationId": {DataType: aws.String("String"), StringValue: aws.String("order-42/é")},
		"traceparent":          strAttr(traceparent),
		"plain":                {DataType: aws.String("Binary"), BinaryValue: []byte{0, 0xff}},
	}
}

// toBrokerAttrs converts SDK attributes for sqs.MD5OfAttributes.
func toBrokerAttrs(in map[string]types.MessageAttributeValue) map[string]model.MessageAttribute {
	out := map[string]model.MessageAttribute{}
	for k, v := range in {
		out[k] = model.MessageAttribute{DataType: aws.ToString(v.DataType), StringValue: aws.ToString(v.StringValue), BinaryValue: v.BinaryValue}
	}
	return out
}

// redriven creates a dead-letter queue and a queue that uses it (Sluice.MaxAttempts
// needs a RedrivePolicy), with extra attributes, and returns the queue's URL.
func (e *env) redriven(name string, extra map[string]string) string {
	e.t.Helper()
	e.queue(name+"-dlq", nil)
	attrs := map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + qarn(name+"-dlq") + `","maxReceiveCount":5}`}
	for k, v := range extra {
		attrs[k] = v
	}
	return e.queue(name, attrs)
}

// badOptions are entries every protocol must fail with InvalidParameterValue,
// on a standard queue with a RedrivePolicy.
var badOptions = []struct {
	name, dataType, value string
}{
	{"Sluice.Priority", "Number", "101"},
	{"Sluice.Priority", "Number", "-101"},
	{"Sluice.Priority", "Number", "1.5"},
	{"Sluice.Priority", "String", "5"},
	{"Sluice.MaxAttempts", "Number", "0"},
	{"Sluice.MaxAttempts", "Number", "1001"},
	{"Sluice.CorrelationId", "Number", "12"},
	{"Sluice.CorrelationId", "String", strings.Repeat("c", 129)},
	{"Sluice.Unknown", "String", "x"},
	{"sluice.priority", "Number", "1"},
}

func TestSluiceMessageOptionsJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	q := e.redriven("opts", nil)

	attrs := optionAttrs()
	sent, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("with options"),
		MessageAttributes: attrs,
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(xrayTrace)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	wantMD5 := sqs.MD5OfAttributes(toBrokerAttrs(attrs))
	if aws.ToString(sent.MD5OfMessageAttributes) != wantMD5 {
		t.Fatalf("MD5OfMessageAttributes = %s, want %s (the Sluice options included)", aws.ToString(sent.MD5OfMessageAttributes), wantMD5)
	}
	got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 5,
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"AWSTraceHeader"}})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	m := got.Messages[0]
	if aws.ToString(m.MD5OfMessageAttributes) != wantMD5 || len(m.MessageAttributes) != len(attrs) {
		t.Fatalf("received attributes %v, MD5 %s", m.MessageAttributes, aws.ToString(m.MD5OfMessageAttributes))
	}
	for k, want := range attrs {
		g := m.MessageAttributes[k]
		if aws.ToString(g.DataType) != aws.ToString(want.DataType) || aws.ToString(g.StringValue) != aws.ToString(want.StringValue) || string(g.BinaryValue) != string(want.BinaryValue) {
			t.Errorf("%s came back as %s %q %x", k, aws.ToString(g.DataType), aws.ToString(g.StringValue), g.BinaryValue)
		}
	}
	if m.Attributes["AWSTraceHeader"] != xrayTrace {
		t.Errorf("AWSTraceHeader = %q", m.Attributes["AWSTraceHeader"])
	}
	// Asked for by prefix, as SQS allows ("Sluice.*"): the options alone.
	if _, err := e.client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	got, err = e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 5, MessageAttributeNames: []string{"Sluice.*"}})
	if err != nil || len(got.Messages) != 1 || len(got.Messages[0].MessageAttributes) != 3 {
		t.Fatalf("receive Sluice.*: %+v, %v", got, err)
	}

	// A wrong option fails the send, and its entry alone in a batch.
	for _, b := range badOptions {
		bad := map[string]types.MessageAttributeValue{b.name: {DataType: aws.String(b.dataType), StringValue: aws.String(b.value)}}
		_, err := e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("bad"), MessageAttributes: bad})
		apiErr(t, "SendMessage "+b.name+"="+b.value, err, "InvalidParameterValue", "")
		out, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &q, Entries: []types.SendMessageBatchRequestEntry{
			{Id: aws.String("good"), MessageBody: aws.String("good"), MessageAttributes: map[string]types.MessageAttributeValue{
				"Sluice.Priority": {DataType: aws.String("Number"), StringValue: aws.String("-100")}}},
			{Id: aws.String("bad"), MessageBody: aws.String("bad"), MessageAttributes: bad},
		}})
		if err != nil || len(out.Successful) != 1 || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "bad" ||
			aws.ToString(out.Failed[0].Code) != "InvalidParameterValue" || !out.Failed[0].SenderFault {
			t.Fatalf("SendMessageBatch with %s=%s: %+v, %v", b.name, b.value, out, err)
		}
	}

	// Sluice.MaxAttempts needs a RedrivePolicy; FIFO queues take no priority.
	plain := e.queue("opts-plain", nil)
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &plain, MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Sluice.MaxAttempts": {DataType: aws.String("Number"), StringValue: aws.String("2")}}})
	apiErr(t, "Sluice.MaxAttempts without a RedrivePolicy", err, "InvalidParameterValue", "")
	fifo := e.queue("opts.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &fifo, MessageBody: aws.String("x"), MessageGroupId: aws.String("g"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Sluice.Priority": {DataType: aws.String("Number"), StringValue: aws.String("1")}}})
	apiErr(t, "Sluice.Priority on a FIFO queue", err, "InvalidParameterValue", "")
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &fifo, MessageBody: aws.String("y"), MessageGroupId: aws.String("g"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Sluice.CorrelationId": strAttr("c-1")}})
	if err != nil {
		t.Fatalf("Sluice.CorrelationId on a FIFO queue: %v", err)
	}
}

// queryMsgAttrs sets MessageAttribute.N.* (or, with prefix, an entry's) in v.
func queryMsgAttrs(v url.Values, prefix string, attrs map[string]model.MessageAttribute) {
	i := 0
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		i++
		p := prefix + "MessageAttribute." + strconv.Itoa(i)
		v.Set(p+".Name", name)
		v.Set(p+".Value.DataType", a.DataType)
		if strings.HasPrefix(a.DataType, "Binary") {
			v.Set(p+".Value.BinaryValue", base64.StdEncoding.EncodeToString(a.BinaryValue))
		} else {
			v.Set(p+".Value.StringValue", a.StringValue)
		}
	}
}

func TestSluiceMessageOptionsQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	q := e.redriven("qopts", nil)
	path := strings.TrimPrefix(q, e.URL)
	attrs := toBrokerAttrs(optionAttrs())

	v := vals("Action", "SendMessage", "MessageBody", "with options",
		"MessageSystemAttribute.1.Name", "AWSTraceHeader",
		"MessageSystemAttribute.1.Value.DataType", "String", "MessageSystemAttribute.1.Value.StringValue", xrayTrace)
	queryMsgAttrs(v, "", attrs)
	resp, body := e.form(path, v)
	var sent struct {
		MD5 string `xml:"SendMessageResult>MD5OfMessageAttributes"`
	}
	decode(t, body, "SendMessageResponse", &sent)
	wantMD5 := sqs.MD5OfAttributes(attrs)
	if resp.StatusCode != 200 || sent.MD5 != wantMD5 {
		t.Fatalf("SendMessage: %d %s (want MD5 %s)", resp.StatusCode, body, wantMD5)
	}
	resp, body = e.form(path, vals("Action", "ReceiveMessage", "WaitTimeSeconds", "5", "MessageAttributeName.1", "All", "AttributeName.1", "AWSTraceHeader"))
	var got struct {
		Messages []xmlMessage `xml:"ReceiveMessageResult>Message"`
	}
	decode(t, body, "ReceiveMessageResponse", &got)
	if resp.StatusCode != 200 || len(got.Messages) != 1 {
		t.Fatalf("ReceiveMessage: %d %s", resp.StatusCode, body)
	}
	m := got.Messages[0]
	if m.MD5OfMessageAttributes != wantMD5 || len(m.MessageAttributes) != len(attrs) {
		t.Fatalf("received: %s", body)
	}
	for _, a := range m.MessageAttributes {
		want := attrs[a.Name]
		bin, _ := base64.StdEncoding.DecodeString(a.Value.BinaryValue)
		if a.Value.DataType != want.DataType || a.Value.StringValue != want.StringValue || string(bin) != string(want.BinaryValue) {
			t.Errorf("%s came back as %+v", a.Name, a.Value)
		}
	}
	if len(m.Attributes) != 1 || m.Attributes[0] != (nameValue{"AWSTraceHeader", xrayTrace}) {
		t.Errorf("system attributes: %+v", m.Attributes)
	}

	for _, b := range badOptions {
		bad := map[string]model.MessageAttribute{b.name: {DataType: b.dataType, StringValue: b.value}}
		v := vals("Action", "SendMessage", "MessageBody", "bad")
		queryMsgAttrs(v, "", bad)
		resp, body := e.form(path, v)
		expectError(t, resp, body, 400, "InvalidParameterValue")

		v = vals("Action", "SendMessageBatch",
			"SendMessageBatchRequestEntry.1.Id", "good", "SendMessageBatchRequestEntry.1.MessageBody", "good",
			"SendMessageBatchRequestEntry.2.Id", "bad", "SendMessageBatchRequestEntry.2.MessageBody", "bad")
		queryMsgAttrs(v, "SendMessageBatchRequestEntry.1.", map[string]model.MessageAttribute{"Sluice.CorrelationId": {DataType: "String", StringValue: "c"}})
		queryMsgAttrs(v, "SendMessageBatchRequestEntry.2.", bad)
		resp, body = e.form(path, v)
		var out struct {
			OK     []string `xml:"SendMessageBatchResult>SendMessageBatchResultEntry>Id"`
			Failed []struct {
				ID          string `xml:"Id"`
				Code        string `xml:"Code"`
				SenderFault bool   `xml:"SenderFault"`
			} `xml:"SendMessageBatchResult>BatchResultErrorEntry"`
		}
		decode(t, body, "SendMessageBatchResponse", &out)
		if resp.StatusCode != 200 || len(out.OK) != 1 || len(out.Failed) != 1 || out.Failed[0].ID != "bad" ||
			out.Failed[0].Code != "InvalidParameterValue" || !out.Failed[0].SenderFault {
			t.Fatalf("SendMessageBatch with %s=%s: %d %s", b.name, b.value, resp.StatusCode, body)
		}
	}
}

func TestBackpressureJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	q := e.queue("full", map[string]string{"MaxDepth": "2", "LowPriorityMaxDepth": "1"})
	send := func(body string, priority string) error {
		in := &awssqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(body)}
		if priority != "" {
			in.MessageAttributes = map[string]types.MessageAttributeValue{"Sluice.Priority": {DataType: aws.String("Number"), StringValue: aws.String(priority)}}
		}
		_, err := e.client.SendMessage(ctx, in)
		return err
	}
	if err := send("a", "-1"); err != nil {
		t.Fatal(err)
	}
	// At depth 1, a low-priority send would pass LowPriorityMaxDepth; a normal one fits.
	err := send("low", "-5")
	var thr *types.RequestThrottled
	if !errors.As(err, &thr) || !strings.Contains(thr.ErrorMessage(), "LowPriorityMaxDepth") || !strings.Contains(thr.ErrorMessage(), "depth is 1") {
		t.Fatalf("low-priority send at LowPriorityMaxDepth: %v", err)
	}
	if err := send("b", "0"); err != nil {
		t.Fatal(err)
	}
	// Full: the SDK sees RequestThrottled (no retries in this client).
	err = send("c", "")
	if !errors.As(err, &thr) || thr.ErrorCode() != "RequestThrottled" {
		t.Fatalf("send to a full queue: %v", err)
	}
	// On the wire: 403, the modeled shape, the query-compatible header, and a
	// message that says the queue is full and its depth.
	resp, body := e.jsonCall("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"c"}`)
	je := expectJSONError(t, resp, body, 403, "com.amazonaws.sqs#RequestThrottled", "RequestThrottled")
	if !strings.Contains(je.Message, "full") || !strings.Contains(je.Message, "depth is 2") || !strings.Contains(je.Message, "MaxDepth is 2") {
		t.Errorf("message: %q", je.Message)
	}

	// A batch that would pass the limit is refused whole.
	got, err := e.client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 5})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	if _, err := e.client.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: got.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	batch := []types.SendMessageBatchRequestEntry{{Id: aws.String("1"), MessageBody: aws.String("x")}, {Id: aws.String("2"), MessageBody: aws.String("y")}}
	_, err = e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &q, Entries: batch})
	if !errors.As(err, &thr) || !strings.Contains(thr.ErrorMessage(), "depth is 1") {
		t.Fatalf("batch past MaxDepth: %v", err)
	}
	if n := e.count(q); n != 1 {
		t.Fatalf("after the refused batch the queue holds %d messages, want 1", n)
	}
	// One entry fits; an entry that fails on its own does not count.
	batch[1].MessageAttributes = map[string]types.MessageAttributeValue{"Sluice.Priority": {DataType: aws.String("Number"), StringValue: aws.String("500")}}
	out, err := e.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &q, Entries: batch})
	if err != nil || len(out.Successful) != 1 || len(out.Failed) != 1 {
		t.Fatalf("batch of one valid entry at depth 1: %+v, %v", out, err)
	}
	// Raising MaxDepth makes room at once.
	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"MaxDepth": "3"}}); err != nil {
		t.Fatal(err)
	}
	if err := send("d", ""); err != nil {
		t.Fatalf("send after raising MaxDepth: %v", err)
	}
}

func TestBackpressureQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	q := e.queue("qfull", map[string]string{"MaxDepth": "1"})
	path := strings.TrimPrefix(q, e.URL)
	if resp, body := e.form(path, vals("Action", "SendMessage", "MessageBody", "a")); resp.StatusCode != 200 {
		t.Fatalf("first send: %d %s", resp.StatusCode, body)
	}
	resp, body := e.form(path, vals("Action", "SendMessage", "MessageBody", "b"))
	er := expectError(t, resp, body, 403, "RequestThrottled")
	if er.Type != "Sender" || !strings.Contains(er.Message, "full") || !strings.Contains(er.Message, "depth is 1") {
		t.Errorf("refusal: %+v", er)
	}
	resp, body = e.form(path, vals("Action", "SendMessageBatch",
		"SendMessageBatchRequestEntry.1.Id", "1", "SendMessageBatchRequestEntry.1.MessageBody", "x"))
	expectError(t, resp, body, 403, "RequestThrottled")
	if n := e.count(q); n != 1 {
		t.Fatalf("the queue holds %d messages, want 1", n)
	}
}
