package sqs_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/api/sqs"
	"github.com/sluicemq/sluice/broker/model"
)

// TestInvalidUnicodeRefused: message contents that are not Unicode text as
// sent (invalid UTF-8, an unpaired UTF-16 surrogate) are refused, never stored
// changed: a body with InvalidMessageContents, an attribute value with
// InvalidParameterValue, as the query protocol answers; in a batch only that
// entry fails. A valid surrogate pair is the character it encodes.
func TestInvalidUnicodeRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	qurl := e.queue("unicode", nil)
	path := strings.TrimPrefix(qurl, e.URL)
	const invalidContents = "com.amazonaws.sqs#InvalidMessageContents"
	q := `"QueueUrl":"` + qurl + `"`

	// JSON: raw bodies (an SDK would not send these).
	refused := []struct{ what, op, body string }{
		{"lone high surrogate", "SendMessage", `{` + q + `,"MessageBody":"a\ud800b"}`},
		{"high surrogate at the end", "SendMessage", `{` + q + `,"MessageBody":"a\ud800"}`},
		{"high surrogate before a non-surrogate escape", "SendMessage", `{` + q + `,"MessageBody":"\ud800\u0041"}`},
		{"two high surrogates", "SendMessage", `{` + q + `,"MessageBody":"\uD83D\uD83D"}`},
		{"lone low surrogate", "SendMessage", `{` + q + `,"MessageBody":"x\udc00"}`},
		{"reversed pair", "SendMessage", `{` + q + `,"MessageBody":"\ude00\ud83d"}`},
		{"invalid UTF-8 byte", "SendMessage", `{` + q + `,"MessageBody":"a` + "\xff" + `b"}`},
		{"UTF-8 encoded surrogate", "SendMessage", `{` + q + `,"MessageBody":"` + "\xed\xa0\x80" + `"}`},
		{"truncated UTF-8", "SendMessage", `{` + q + `,"MessageBody":"` + "\xe2\x82" + `"}`},
	}
	for _, c := range refused {
		resp, body := e.jsonCall(c.op, c.body)
		er := expectJSONError(t, resp, body, 400, invalidContents, "InvalidMessageContents")
		if !strings.Contains(er.Message, "Invalid characters found") {
			t.Errorf("%s: message %q", c.what, er.Message)
		}
	}
	for what, body := range map[string]string{
		"lone surrogate in an attribute": `{` + q + `,"MessageBody":"ok","MessageAttributes":{"a":{"DataType":"String","StringValue":"\udc00"}}}`,
		"invalid UTF-8 in an attribute":  `{` + q + `,"MessageBody":"ok","MessageAttributes":{"a":{"DataType":"String","StringValue":"` + "\xc3" + `"}}}`,
	} {
		resp, rbody := e.jsonCall("SendMessage", body)
		er := expectJSONError(t, resp, rbody, 400, "com.amazon.coral.service#InvalidParameterValueException", "InvalidParameterValue")
		if !strings.Contains(er.Message, "contains invalid characters") {
			t.Errorf("%s: message %q", what, er.Message)
		}
	}
	// In a batch, only the entry fails; its batch-mates are stored.
	for what, c := range map[string]struct{ body, code string }{
		"lone surrogate in a batch entry":            {`{` + q + `,"Entries":[{"Id":"a","MessageBody":"fine"},{"Id":"b","MessageBody":"\ud800"}]}`, "InvalidMessageContents"},
		"invalid UTF-8 in a batch entry's attribute": {`{` + q + `,"Entries":[{"Id":"a","MessageBody":"fine"},{"Id":"b","MessageBody":"fine","MessageAttributes":{"a":{"DataType":"String","StringValue":"` + "\xff" + `"}}}]}`, "InvalidParameterValue"},
	} {
		resp, rbody := e.jsonCall("SendMessageBatch", c.body)
		var out struct {
			Successful []struct{ Id string }
			Failed     []struct{ Id, Code string }
		}
		expectJSONOK(t, what, resp, rbody, &out)
		if len(out.Successful) != 1 || out.Successful[0].Id != "a" || len(out.Failed) != 1 || out.Failed[0].Id != "b" || out.Failed[0].Code != c.code {
			t.Errorf("%s: %s, want a stored and b failed with %s", what, rbody, c.code)
		}
	}
	// Valid: a surrogate pair (either case of hex), U+FFFD itself, escapes.
	accepted := map[string]string{
		`"\ud83d\ude00"`:     "😀",
		`"\uD83D\uDE00 é"`:   "😀 é",
		`"\ufffd"`:           "\uFFFD",
		`"` + "\uFFFD" + `"`: "\uFFFD",
		`"a\\ud800"`:         `a\ud800`, // an escaped backslash: the text \ud800, not a surrogate
		`"\u00e9\n"`:         "é\n",
	}
	for lit, want := range accepted {
		resp, body := e.jsonCall("SendMessage", `{`+q+`,"MessageBody":`+lit+`,"MessageAttributes":{"a":{"DataType":"String","StringValue":`+lit+`}}}`)
		var sent struct{ MD5OfMessageBody, MD5OfMessageAttributes string }
		expectJSONOK(t, "JSON SendMessage of "+lit, resp, body, &sent)
		if sent.MD5OfMessageBody != sqs.MD5OfBody(want) ||
			sent.MD5OfMessageAttributes != sqs.MD5OfAttributes(map[string]model.MessageAttribute{"a": {DataType: "String", StringValue: want}}) {
			t.Errorf("JSON SendMessage of %s: MD5s %+v, want those of %q", lit, sent, want)
		}
	}

	// Query: the same contents, percent-encoded.
	for what, raw := range map[string]string{
		"invalid UTF-8 byte":      "a\xffb",
		"UTF-8 encoded surrogate": "\xed\xa0\x80",
		"truncated UTF-8":         "\xe2\x82",
	} {
		resp, body := e.form(path, url.Values{"Action": {"SendMessage"}, "MessageBody": {raw}})
		if er := expectError(t, resp, body, 400, "InvalidMessageContents"); !strings.Contains(er.Message, "Invalid characters found") {
			t.Errorf("query %s: %+v", what, er)
		}
	}
	resp, body := e.form(path, url.Values{"Action": {"SendMessage"}, "MessageBody": {"😀"}})
	var sent struct {
		MD5 string `xml:"SendMessageResult>MD5OfMessageBody"`
	}
	decode(t, body, "SendMessageResponse", &sent)
	if resp.StatusCode != 200 || sent.MD5 != sqs.MD5OfBody("😀") {
		t.Fatalf("query SendMessage of 😀: %s", body)
	}

	// Only the valid messages were stored: 6 JSON sends, the 2 batch-mates
	// of refused entries, 1 query send.
	if visible, _ := e.queueCounts(qurl); visible != "9" {
		t.Fatalf("%s messages stored, want the 9 valid ones", visible)
	}
}

// TestWrongJSONTypes: a member of the wrong JSON type is answered in the SQS
// error shape, naming the parameter and the type it must have; Go's decoder
// internals never reach the client.
func TestWrongJSONTypes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	qurl := e.queue("types", nil)
	q := `"QueueUrl":"` + qurl + `"`
	const serialization = "com.amazon.coral.service#SerializationException"
	cases := []struct {
		op, body, message string
	}{
		{"CreateQueue", `{"QueueName":5}`, "Parameter QueueName must be a string, not a number."},
		{"SendMessage", `{"QueueUrl":true,"MessageBody":"x"}`, "Parameter QueueUrl must be a string, not a boolean."},
		{"SendMessage", `{` + q + `,"MessageBody":{"a":1}}`, "Parameter MessageBody must be a string, not an object."},
		{"SendMessage", `{` + q + `,"MessageBody":"x","MessageAttributes":[]}`, "Parameter MessageAttributes must be a map, not a list."},
		{"SendMessage", `{` + q + `,"MessageBody":"x","MessageAttributes":{"a":{"DataType":"String","StringValue":7}}}`,
			"Parameter MessageAttributes.StringValue must be a string, not a number."},
		{"SendMessage", `{` + q + `,"MessageBody":"x","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":7}}}`,
			"Parameter MessageAttributes.BinaryValue must be a base64 string, not a number."},
		{"SendMessageBatch", `{` + q + `,"Entries":[{"Id":1,"MessageBody":"x"}]}`, "Parameter Entries.Id must be a string, not a number."},
		{"SendMessageBatch", `{` + q + `,"Entries":{"Id":"a"}}`, "Parameter Entries must be a list, not an object."},
		{"ReceiveMessage", `{` + q + `,"AttributeNames":"All"}`, "Parameter AttributeNames must be a list of strings, not a string."},
		{"ReceiveMessage", `{` + q + `,"MessageAttributeNames":[1]}`, "Each member of parameter MessageAttributeNames must be a string, not a number."},
		{"CreateQueue", `{"QueueName":"q","Attributes":{"VisibilityTimeout":30}}`, "Each value of parameter Attributes must be a string, not a number."},
		{"CreateQueue", `{"QueueName":"q","tags":["a"]}`, "Parameter tags must be a map of string to string, not a list."},
		{"TagQueue", `{` + q + `,"Tags":"a=b"}`, "Parameter Tags must be a map of string to string, not a string."},
		{"DeleteMessageBatch", `{` + q + `,"Entries":[{"Id":"a","ReceiptHandle":false}]}`, "Parameter Entries.ReceiptHandle must be a string, not a boolean."},
		{"SendMessage", `[]`, "The request body must be a JSON object, not a list."},
		{"ListQueues", `"x"`, "The request body must be a JSON object, not a string."},
	}
	for _, c := range cases {
		resp, body := e.jsonCall(c.op, c.body)
		er := expectJSONError(t, resp, body, 400, serialization, "SerializationException")
		if er.Message != c.message {
			t.Errorf("%s %s: message %q, want %q", c.op, c.body, er.Message, c.message)
		}
		if strings.Contains(er.Message, "Go") || strings.Contains(er.Message, "unmarshal") {
			t.Errorf("%s %s: Go internals in %q", c.op, c.body, er.Message)
		}
	}
	// Integer parameters take a number or a string of an integer's plain
	// form; any other string is a SerializationException naming the member
	// (AWS answers one for every string, "STRING_VALUE can not be converted
	// to an Integer"), as is a member named twice or named in another case.
	for body, want := range map[string]string{
		`{` + q + `,"MaxNumberOfMessages":"ten"}`:                      `Parameter MaxNumberOfMessages must be an integer, not the string "ten"`,
		`{` + q + `,"WaitTimeSeconds":" 5"}`:                           `Parameter WaitTimeSeconds must be an integer, not the string " 5"`,
		`{` + q + `,"WaitTimeSeconds":"+5"}`:                           `Parameter WaitTimeSeconds must be an integer, not the string "+5"`,
		`{` + q + `,"WaitTimeSeconds":"05"}`:                           `Parameter WaitTimeSeconds must be an integer, not the string "05"`,
		`{` + q + `,"WaitTimeSeconds":"-0"}`:                           `Parameter WaitTimeSeconds must be an integer, not the string "-0"`,
		`{` + q + `,"WaitTimeSeconds":""}`:                             `Parameter WaitTimeSeconds must be an integer, not the string ""`,
		`{"queueurl":` + strings.TrimPrefix(q, `"QueueUrl":`) + `}`:    "Unknown member queueurl: member names are case-sensitive; did you mean QueueUrl?",
		`{` + q + `,` + q + `}`:                                        "Member QueueUrl is given more than once.",
		`{` + q + `,"MaxNumberOfMessages":1,"MaxNumberOfMessages":10}`: "Member MaxNumberOfMessages is given more than once.",
		// A deep unknown member before a duplicate does not hide it.
		`{"Pad":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `,` + q + `,` + q + `}`: "The request body nests more than 16 levels deep",
	} {
		resp, reply := e.jsonCall("ReceiveMessage", body)
		er := expectJSONError(t, resp, reply, 400, serialization, "SerializationException")
		if !strings.HasPrefix(er.Message, want) {
			t.Errorf("ReceiveMessage %s: message %q, want %q", body, er.Message, want)
		}
	}
	for _, body := range []string{
		`{` + q + `,"MessageBody":"a","MessageAttributes":{"k":{"DataType":"String","StringValue":"1"},"k":{"DataType":"String","StringValue":"2"}}}`,
		`{` + q + `,"MessageBody":"a","MessageAttributes":{"k":{"DataType":"String","StringValue":"1","StringValue":"2"}}}`,
	} {
		resp, reply := e.jsonCall("SendMessage", body)
		if er := expectJSONError(t, resp, reply, 400, serialization, "SerializationException"); !strings.Contains(er.Message, "is given more than once") {
			t.Errorf("SendMessage %s: %q", body, er.Message)
		}
	}
	// A number that is not an integer (a fraction, a list) is
	// InvalidParameterValue naming the parameter, as is malformed JSON.
	const invalidValue = "com.amazon.coral.service#InvalidParameterValueException"
	for body, want := range map[string]string{
		`{` + q + `,"MaxNumberOfMessages":2.5}`: "Value 2.5 for parameter MaxNumberOfMessages is invalid. Reason: must be an integer.",
		`{` + q + `,"WaitTimeSeconds":[1]}`:     "Value [1] for parameter WaitTimeSeconds is invalid. Reason: must be an integer.",
		`{` + q + `,"MaxNumberOfMessages":`:     "The request body is not valid JSON",
	} {
		resp, reply := e.jsonCall("ReceiveMessage", body)
		er := expectJSONError(t, resp, reply, 400, invalidValue, "InvalidParameterValue")
		if !strings.HasPrefix(er.Message, want) {
			t.Errorf("ReceiveMessage %s: message %q, want %q", body, er.Message, want)
		}
	}
	resp, reply := e.jsonCall("ReceiveMessage", `{`+q+`,"MaxNumberOfMessages":"2"}`)
	expectJSONOK(t, "MaxNumberOfMessages as a string", resp, reply, nil)

	// The query protocol has no JSON types: a value that does not parse is
	// InvalidParameterValue naming the parameter.
	resp, reply = e.form(strings.TrimPrefix(qurl, e.URL), vals("Action", "ReceiveMessage", "MaxNumberOfMessages", "ten"))
	if er := expectError(t, resp, reply, 400, "InvalidParameterValue"); er.Message != "Value ten for parameter MaxNumberOfMessages is invalid. Reason: must be an integer." {
		t.Errorf("query MaxNumberOfMessages=ten: %q", er.Message)
	}
}
