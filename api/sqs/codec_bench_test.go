package sqs

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// benchMessages is a ReceiveMessage answer of n messages as the handler
// builds it: 256-byte bodies, the usual system attributes, one message
// attribute.
func benchMessages(n int) *receiveMessageOutput {
	out := &receiveMessageOutput{}
	for i := range n {
		out.Messages = append(out.Messages, message{
			MessageId:     "5fea7756-0ea4-451a-a703-a558b933e274",
			ReceiptHandle: "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a+" + strings.Repeat("x", 90) + string(rune('a'+i)),
			MD5OfBody:     "fafb00f5732ab283681e124bf8747ed1",
			Body:          strings.Repeat("body <&> \"quoted\" ", 14),
			Attributes: stringMap{
				"ApproximateReceiveCount":          "1",
				"SentTimestamp":                    "1764770000000",
				"ApproximateFirstReceiveTimestamp": "1764770000123",
				"SenderId":                         "000000000000",
			},
			MD5OfMessageAttributes: "3ae8f24a165a8cedc005670c81a27295",
			MessageAttributes:      attrMap{"trace": {DataType: "String", StringValue: "abc-123"}},
		})
	}
	return out
}

// benchCall is a call whose answer goes to a recorder.
func benchCall(action string) *call {
	c := &call{action: action, requestID: "b9f3a2c4-5d6e-4f70-8192-a3b4c5d6e7f8"}
	c.sw.ResponseWriter = httptest.NewRecorder()
	c.w = &c.sw
	return c
}

var benchSendOutput = &sendMessageOutput{
	MD5OfMessageBody: "fafb00f5732ab283681e124bf8747ed1",
	MessageId:        "5fea7756-0ea4-451a-a703-a558b933e274",
}

// BenchmarkEncode measures the hot answers in both protocols.
func BenchmarkEncode(b *testing.B) {
	cases := []struct {
		name, action string
		out          any
	}{
		{"SendMessage", "SendMessage", benchSendOutput},
		{"ReceiveMessage1", "ReceiveMessage", benchMessages(1)},
		{"ReceiveMessage10", "ReceiveMessage", benchMessages(10)},
	}
	for _, tc := range cases {
		b.Run("JSON/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				writeJSON(benchCall(tc.action), tc.out)
			}
		})
		b.Run("XML/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				writeXML(benchCall(tc.action), tc.out)
			}
		})
	}
}

// BenchmarkDecode measures the decoding of the hot requests in both protocols.
func BenchmarkDecode(b *testing.B) {
	body := strings.Repeat("body <&> \"quoted\" ", 14)
	jsonSend := []byte(`{"QueueUrl":"http://127.0.0.1:9324/000000000000/bench","MessageBody":` + quoteJSON(body) +
		`,"MessageAttributes":{"trace":{"DataType":"String","StringValue":"abc-123"}}}`)
	jsonRecv := []byte(`{"QueueUrl":"http://127.0.0.1:9324/000000000000/bench","MaxNumberOfMessages":10,"WaitTimeSeconds":20,"AttributeNames":["All"],"MessageAttributeNames":["All"]}`)
	querySend := url.Values{"Action": {"SendMessage"}, "QueueUrl": {"http://127.0.0.1:9324/000000000000/bench"}, "MessageBody": {body},
		"MessageAttribute.1.Name": {"trace"}, "MessageAttribute.1.Value.DataType": {"String"}, "MessageAttribute.1.Value.StringValue": {"abc-123"}}.Encode()
	for _, tc := range []struct {
		name, action string
		json         []byte
		query        string
	}{
		{"SendMessage", "SendMessage", jsonSend, querySend},
		{"ReceiveMessage", "ReceiveMessage", jsonRecv, ""},
	} {
		o := operations[tc.action]
		b.Run("JSON/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := o.fromJSON(tc.json); err != nil {
					b.Fatal(err)
				}
			}
		})
		if tc.query == "" {
			continue
		}
		b.Run("Query/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				form, err := url.ParseQuery(tc.query)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := o.fromQuery(newParams(nil, form)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func quoteJSON(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			sb.WriteByte('\\')
		}
		sb.WriteRune(r)
	}
	sb.WriteByte('"')
	return sb.String()
}
