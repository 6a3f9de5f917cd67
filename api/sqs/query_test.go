package sqs_test

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker/model"
)

// These tests speak the query protocol with raw form POSTs and GETs and check
// the replies against the documented XML.

const ns = "http://queue.amazonaws.com/doc/2012-11-05/"

// form posts a form-encoded query request to path.
func (e *env) form(path string, v url.Values) (*http.Response, string) {
	e.t.Helper()
	return e.post(path, "application/x-www-form-urlencoded; charset=utf-8", "", v.Encode())
}

func (e *env) get(pathAndQuery string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.URL+pathAndQuery, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(req)
}

func vals(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

type responseMetadata struct {
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

type errorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

type nameValue struct {
	Name  string `xml:"Name"`
	Value string `xml:"Value"`
}

type xmlMessage struct {
	MessageID              string      `xml:"MessageId"`
	ReceiptHandle          string      `xml:"ReceiptHandle"`
	MD5OfBody              string      `xml:"MD5OfBody"`
	Body                   string      `xml:"Body"`
	Attributes             []nameValue `xml:"Attribute"`
	MD5OfMessageAttributes string      `xml:"MD5OfMessageAttributes"`
	MessageAttributes      []struct {
		Name  string `xml:"Name"`
		Value struct {
			StringValue string `xml:"StringValue"`
			BinaryValue string `xml:"BinaryValue"`
			DataType    string `xml:"DataType"`
		} `xml:"Value"`
	} `xml:"MessageAttribute"`
}

// decode parses body into v and checks the root element and namespace.
func decode(t *testing.T, body, root string, v any) {
	t.Helper()
	var probe struct{ XMLName xml.Name }
	if err := xml.Unmarshal([]byte(body), &probe); err != nil {
		t.Fatalf("reply is not XML: %v\n%s", err, body)
	}
	if probe.XMLName.Local != root || probe.XMLName.Space != ns {
		t.Fatalf("root = {%s}%s, want {%s}%s\n%s", probe.XMLName.Space, probe.XMLName.Local, ns, root, body)
	}
	if v != nil {
		if err := xml.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("decode %s: %v", root, err)
		}
	}
}

func expectError(t *testing.T, resp *http.Response, body string, status int, code string) errorResponse {
	t.Helper()
	var er errorResponse
	decode(t, body, "ErrorResponse", &er)
	if resp.StatusCode != status || er.Code != code || er.Type == "" || er.Message == "" || er.RequestID == "" {
		t.Fatalf("want %d %s, got %d %+v\n%s", status, code, resp.StatusCode, er, body)
	}
	return er
}

func TestQueryQueueActions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	resp, body := e.form("/", vals("Action", "CreateQueue", "Version", "2012-11-05", "QueueName", "qq",
		"Attribute.1.Name", "VisibilityTimeout", "Attribute.1.Value", "40"))
	var created struct {
		QueueURL string `xml:"CreateQueueResult>QueueUrl"`
		responseMetadata
	}
	decode(t, body, "CreateQueueResponse", &created)
	qurl := e.URL + "/000000000000/qq"
	if resp.StatusCode != 200 || created.QueueURL != qurl || created.RequestID == "" || resp.Header.Get("Content-Type") != "text/xml" {
		t.Fatalf("CreateQueue: %d %+v", resp.StatusCode, created)
	}

	_, body = e.get("/?Action=GetQueueUrl&QueueName=qq")
	var gotURL struct {
		QueueURL string `xml:"GetQueueUrlResult>QueueUrl"`
	}
	decode(t, body, "GetQueueUrlResponse", &gotURL)
	if gotURL.QueueURL != qurl {
		t.Fatalf("GetQueueUrl: %s", body)
	}

	e.form("/", vals("Action", "CreateQueue", "QueueName", "qq2"))
	_, body = e.form("/", vals("Action", "ListQueues", "QueueNamePrefix", "qq"))
	var listed struct {
		URLs      []string `xml:"ListQueuesResult>QueueUrl"`
		NextToken string   `xml:"ListQueuesResult>NextToken"`
	}
	decode(t, body, "ListQueuesResponse", &listed)
	if len(listed.URLs) != 2 || listed.NextToken != "" {
		t.Fatalf("ListQueues: %s", body)
	}
	_, body = e.form("/", vals("Action", "ListQueues", "QueueNamePrefix", "qq", "MaxResults", "1"))
	listed.URLs, listed.NextToken = nil, ""
	decode(t, body, "ListQueuesResponse", &listed)
	if len(listed.URLs) != 1 || listed.NextToken == "" {
		t.Fatalf("ListQueues page: %s", body)
	}

	_, body = e.form("/", vals("Action", "GetQueueAttributes", "QueueUrl", qurl, "AttributeName.1", "VisibilityTimeout", "AttributeName.2", "QueueArn"))
	var attrs struct {
		Attributes []nameValue `xml:"GetQueueAttributesResult>Attribute"`
	}
	decode(t, body, "GetQueueAttributesResponse", &attrs)
	want := []nameValue{{"QueueArn", "arn:aws:sqs:us-east-1:000000000000:qq"}, {"VisibilityTimeout", "40"}}
	if len(attrs.Attributes) != 2 || attrs.Attributes[0] != want[0] || attrs.Attributes[1] != want[1] {
		t.Fatalf("GetQueueAttributes: %s", body)
	}

	resp, body = e.form("/", vals("Action", "SetQueueAttributes", "QueueUrl", qurl, "Attribute.1.Name", "DelaySeconds", "Attribute.1.Value", "1000"))
	expectError(t, resp, body, 400, "InvalidAttributeValue")

	// Empty outputs: <XResponse> with ResponseMetadata only.
	for _, action := range []string{"PurgeQueue", "DeleteQueue"} {
		resp, body = e.form("/", vals("Action", action, "QueueUrl", qurl))
		var md struct {
			Result *struct{} `xml:"PurgeQueueResult"`
			responseMetadata
		}
		decode(t, body, action+"Response", &md)
		if resp.StatusCode != 200 || md.RequestID == "" || strings.Contains(body, "Result>") {
			t.Fatalf("%s: %d %s", action, resp.StatusCode, body)
		}
	}
	resp, body = e.get("/?Action=GetQueueUrl&QueueName=qq")
	er := expectError(t, resp, body, 400, "AWS.SimpleQueueService.NonExistentQueue")
	if er.Type != "Sender" || er.Message != "The specified queue does not exist for this wsdl version." {
		t.Fatalf("NonExistentQueue: %+v", er)
	}
}

func TestQueryMessagesOnQueuePath(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.form("/", vals("Action", "CreateQueue", "QueueName", "qm"))
	path := "/000000000000/qm"

	// POST to the queue path without QueueUrl (Java v1 style); a body with CR.
	body := "line one\r\nline two\r"
	resp, reply := e.form(path, vals("Action", "SendMessage", "MessageBody", body,
		"MessageAttribute.1.Name", "test-key", "MessageAttribute.1.Value.DataType", "String", "MessageAttribute.1.Value.StringValue", "test-value",
		"MessageAttribute.2.Name", "bin", "MessageAttribute.2.Value.DataType", "Binary", "MessageAttribute.2.Value.BinaryValue", "AAEC"))
	var sent struct {
		MD5OfMessageBody       string `xml:"SendMessageResult>MD5OfMessageBody"`
		MD5OfMessageAttributes string `xml:"SendMessageResult>MD5OfMessageAttributes"`
		MessageID              string `xml:"SendMessageResult>MessageId"`
	}
	decode(t, reply, "SendMessageResponse", &sent)
	wantAttrs := sqs.MD5OfAttributes(map[string]model.MessageAttribute{
		"test-key": {DataType: "String", StringValue: "test-value"}, "bin": {DataType: "Binary", BinaryValue: []byte{0, 1, 2}},
	})
	if resp.StatusCode != 200 || sent.MD5OfMessageBody != sqs.MD5OfBody(body) || sent.MD5OfMessageAttributes != wantAttrs {
		t.Fatalf("SendMessage: %d %s", resp.StatusCode, reply)
	}

	// GET on the queue path; the CR must come back as &#xD; and survive parsing.
	resp, reply = e.get(path + "?Action=ReceiveMessage&AttributeName.1=All&MessageAttributeName.1=test-key&WaitTimeSeconds=5&VisibilityTimeout=0")
	if !strings.Contains(reply, "&#xD;") {
		t.Fatalf("CR not escaped: %s", reply)
	}
	var got struct {
		Messages []xmlMessage `xml:"ReceiveMessageResult>Message"`
	}
	decode(t, reply, "ReceiveMessageResponse", &got)
	if resp.StatusCode != 200 || len(got.Messages) != 1 {
		t.Fatalf("ReceiveMessage: %s", reply)
	}
	m := got.Messages[0]
	if m.Body != body || sqs.MD5OfBody(m.Body) != m.MD5OfBody || m.MessageID != sent.MessageID {
		t.Fatalf("body %q md5 %s", m.Body, m.MD5OfBody)
	}
	if m.MD5OfMessageAttributes != "befa18540a897f7d022bf07057754a03" || len(m.MessageAttributes) != 1 ||
		m.MessageAttributes[0].Name != "test-key" || m.MessageAttributes[0].Value.StringValue != "test-value" || m.MessageAttributes[0].Value.DataType != "String" {
		t.Fatalf("message attributes: %+v", m)
	}
	sys := map[string]string{}
	for _, a := range m.Attributes {
		sys[a.Name] = a.Value
	}
	if sys["SenderId"] != "000000000000" || sys["ApproximateReceiveCount"] != "1" || sys["SentTimestamp"] == "" {
		t.Fatalf("system attributes: %v", sys)
	}

	// The QueueUrl parameter wins over the path (the path names no queue that exists).
	resp, reply = e.form("/000000000000/nonexistent", vals("Action", "ReceiveMessage", "QueueUrl", e.URL+path, "WaitTimeSeconds", "5",
		"MessageAttributeName.1", "All"))
	got.Messages = nil
	decode(t, reply, "ReceiveMessageResponse", &got)
	if resp.StatusCode != 200 || len(got.Messages) != 1 || len(got.Messages[0].MessageAttributes) != 2 ||
		got.Messages[0].MessageAttributes[0].Value.BinaryValue != "AAEC" || got.Messages[0].MD5OfMessageAttributes != wantAttrs {
		t.Fatalf("QueueUrl over path: %s", reply)
	}
	handle := got.Messages[0].ReceiptHandle

	resp, reply = e.form(path, vals("Action", "ChangeMessageVisibility", "ReceiptHandle", handle, "VisibilityTimeout", "60"))
	decode(t, reply, "ChangeMessageVisibilityResponse", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("ChangeMessageVisibility: %s", reply)
	}
	resp, reply = e.form(path, vals("Action", "DeleteMessage", "ReceiptHandle", handle))
	decode(t, reply, "DeleteMessageResponse", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("DeleteMessage: %s", reply)
	}

	// An empty receive is <ReceiveMessageResult/>.
	_, reply = e.form(path, vals("Action", "ReceiveMessage", "WaitTimeSeconds", "0"))
	if !strings.Contains(reply, "<ReceiveMessageResult></ReceiveMessageResult>") && !strings.Contains(reply, "<ReceiveMessageResult/>") {
		t.Fatalf("empty receive: %s", reply)
	}

	// Batches.
	_, reply = e.form(path, vals("Action", "SendMessageBatch",
		"SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "one",
		"SendMessageBatchRequestEntry.1.MessageAttribute.1.Name", "MyAttribute",
		"SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType", "String",
		"SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue", "foobar",
		"SendMessageBatchRequestEntry.2.Id", "b", "SendMessageBatchRequestEntry.2.MessageBody", "bad\x01"))
	var batch struct {
		OK []struct {
			ID                     string `xml:"Id"`
			MD5OfMessageAttributes string `xml:"MD5OfMessageAttributes"`
			MessageID              string `xml:"MessageId"`
		} `xml:"SendMessageBatchResult>SendMessageBatchResultEntry"`
		Failed []struct {
			ID          string `xml:"Id"`
			SenderFault bool   `xml:"SenderFault"`
			Code        string `xml:"Code"`
		} `xml:"SendMessageBatchResult>BatchResultErrorEntry"`
	}
	decode(t, reply, "SendMessageBatchResponse", &batch)
	if len(batch.OK) != 1 || batch.OK[0].ID != "a" || batch.OK[0].MD5OfMessageAttributes != "adb59cd4678ea5a855436b949cd07ab6" ||
		len(batch.Failed) != 1 || batch.Failed[0].ID != "b" || !batch.Failed[0].SenderFault || batch.Failed[0].Code != "InvalidMessageContents" {
		t.Fatalf("SendMessageBatch: %s", reply)
	}
	_, reply = e.form(path, vals("Action", "ReceiveMessage", "WaitTimeSeconds", "5"))
	got.Messages = nil
	decode(t, reply, "ReceiveMessageResponse", &got)
	if len(got.Messages) != 1 {
		t.Fatalf("receive batch message: %s", reply)
	}
	_, reply = e.form(path, vals("Action", "ChangeMessageVisibilityBatch",
		"ChangeMessageVisibilityBatchRequestEntry.1.Id", "x", "ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle", got.Messages[0].ReceiptHandle,
		"ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout", "30"))
	var cv struct {
		OK []string `xml:"ChangeMessageVisibilityBatchResult>ChangeMessageVisibilityBatchResultEntry>Id"`
	}
	decode(t, reply, "ChangeMessageVisibilityBatchResponse", &cv)
	if len(cv.OK) != 1 || cv.OK[0] != "x" {
		t.Fatalf("ChangeMessageVisibilityBatch: %s", reply)
	}
	_, reply = e.form(path, vals("Action", "DeleteMessageBatch",
		"DeleteMessageBatchRequestEntry.1.Id", "x", "DeleteMessageBatchRequestEntry.1.ReceiptHandle", got.Messages[0].ReceiptHandle,
		"DeleteMessageBatchRequestEntry.2.Id", "y", "DeleteMessageBatchRequestEntry.2.ReceiptHandle", "garbage"))
	var db struct {
		OK     []string `xml:"DeleteMessageBatchResult>DeleteMessageBatchResultEntry>Id"`
		Failed []string `xml:"DeleteMessageBatchResult>BatchResultErrorEntry>Code"`
	}
	decode(t, reply, "DeleteMessageBatchResponse", &db)
	if len(db.OK) != 1 || len(db.Failed) != 1 || db.Failed[0] != "ReceiptHandleIsInvalid" {
		t.Fatalf("DeleteMessageBatch: %s", reply)
	}
}

func TestQueryFormWithTargetHeader(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// Perl's Amazon::SQS::Simple: a form body plus an X-Amz-Target header.
	resp, body := e.post("/", "application/x-www-form-urlencoded", "AmazonSQSv20121105.CreateQueue",
		vals("Action", "CreateQueue", "QueueName", "perl", "AWSAccessKeyId", "AKID", "Timestamp", "2026-01-01T00:00:00Z").Encode())
	var created struct {
		QueueURL string `xml:"CreateQueueResult>QueueUrl"`
	}
	decode(t, body, "CreateQueueResponse", &created)
	if resp.StatusCode != 200 || created.QueueURL != e.URL+"/000000000000/perl" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestQueryPresignedGet(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.form("/", vals("Action", "CreateQueue", "QueueName", "kombu"))
	// kombu sends some actions as GETs presigned with SigV4 query parameters.
	sign := "&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=KOMBUKEY%2F20260101%2Fus-east-1%2Fsqs%2Faws4_request&X-Amz-Signature=abc"
	resp, body := e.get("/000000000000/kombu?Action=SendMessage&MessageBody=hi" + sign)
	decode(t, body, "SendMessageResponse", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("presigned send: %d %s", resp.StatusCode, body)
	}
	_, body = e.get("/000000000000/kombu?Action=ReceiveMessage&AttributeName.1=SenderId&WaitTimeSeconds=5" + sign)
	var got struct {
		Messages []xmlMessage `xml:"ReceiveMessageResult>Message"`
	}
	decode(t, body, "ReceiveMessageResponse", &got)
	if len(got.Messages) != 1 || len(got.Messages[0].Attributes) != 1 || got.Messages[0].Attributes[0] != (nameValue{"SenderId", "KOMBUKEY"}) {
		t.Fatalf("SenderId from a presigned credential: %s", body)
	}
}

func TestQueryErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.form("/", vals("Action", "CreateQueue", "QueueName", "qe"))
	path := "/000000000000/qe"

	resp, body := e.form(path, vals("Action", "CreateQueue", "QueueName", "x"))
	er := expectError(t, resp, body, 400, "InvalidAction")
	if er.Message != "The action CreateQueue is not valid for this endpoint." {
		t.Fatalf("InvalidAction message: %q", er.Message)
	}
	resp, body = e.form(path, vals("Action", "ListQueues"))
	expectError(t, resp, body, 400, "InvalidAction")
	resp, body = e.form("/", vals("Action", "FooBar"))
	expectError(t, resp, body, 400, "InvalidAction")
	resp, body = e.get(path)
	expectError(t, resp, body, 404, "UnknownOperationException")
	resp, body = e.form(path, vals("Action", "SendMessage"))
	er = expectError(t, resp, body, 400, "MissingParameter")
	if er.Message != "The request must contain the parameter MessageBody." {
		t.Fatalf("MissingParameter message: %q", er.Message)
	}
	resp, body = e.form("/", vals("Action", "SendMessage", "MessageBody", "x"))
	expectError(t, resp, body, 400, "MissingParameter")
	resp, body = e.form(path, vals("Action", "ReceiveMessage", "MaxNumberOfMessages", "abc"))
	expectError(t, resp, body, 400, "InvalidParameterValue")
	resp, body = e.form(path, vals("Action", "ReceiveMessage", "MaxNumberOfMessages", "0"))
	expectError(t, resp, body, 400, "InvalidParameterValue")
	resp, body = e.form(path, vals("Action", "DeleteMessage", "ReceiptHandle", "garbage"))
	expectError(t, resp, body, 404, "ReceiptHandleIsInvalid")
	resp, body = e.form(path, vals("Action", "SendMessage", "MessageBody", "x", "MessageAttribute.1.Name", "b",
		"MessageAttribute.1.Value.DataType", "Binary", "MessageAttribute.1.Value.BinaryValue", "!!!"))
	expectError(t, resp, body, 400, "InvalidParameterValue")
	resp, body = e.form(path, vals("Action", "SendMessageBatch", "SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "x",
		"SendMessageBatchRequestEntry.2.Id", "a", "SendMessageBatchRequestEntry.2.MessageBody", "y"))
	expectError(t, resp, body, 400, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
	resp, body = e.form(path, vals("Action", "DeleteMessageBatch"))
	expectError(t, resp, body, 400, "AWS.SimpleQueueService.EmptyBatchRequest")
	resp, body = e.form(path, vals("Action", "CancelMessageMoveTask", "TaskHandle", "garbage"))
	expectError(t, resp, body, 400, "InvalidParameterValue")
	resp, body = e.form("/", vals("Action", "GetQueueAttributes", "QueueUrl", "http://h/000000000000/qe", "AttributeName.1", "Foobar"))
	er = expectError(t, resp, body, 400, "InvalidAttributeName")
	if er.Message != "Unknown Attribute Foobar." {
		t.Fatalf("InvalidAttributeName message: %q", er.Message)
	}
}
