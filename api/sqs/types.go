package sqs

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/broker/model"
)

// The request and response shapes of the actions. Field names are the JSON
// member names of the SQS model; both decoders (JSON and query) fill the same
// input structs, and both encoders write the same output structs.

// number is an integer parameter as the client sent it. A value that does not
// parse is kept (bad) so that the action can report it as InvalidParameterValue
// naming the parameter; a nil *number means the parameter was absent.
type number struct {
	n   int64
	raw string
	bad bool
	// quotedBad: a JSON string that is not an integer's plain form (" 5",
	// "+5", "05"): a SerializationException, as a value of the wrong type.
	quotedBad bool
}

// parseNumber reads an integer parameter from its text.
func parseNumber(s string) *number {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return &number{raw: s, bad: true}
	}
	return &number{n: n, raw: s}
}

// parseQuotedNumber reads an integer parameter the JSON protocol sent as a
// string. Only an integer's plain form is taken ("5", "-1", "0"): no space,
// no sign but a minus, no leading zero, as a JSON number would be written.
// Some clients send integers as strings; none sends " 5", "+5" or "05".
func parseQuotedNumber(s string) *number {
	digits := strings.TrimPrefix(s, "-")
	plain := digits != "" && s != "-0" && (digits == "0" || digits[0] != '0')
	for _, c := range digits {
		plain = plain && c >= '0' && c <= '9'
	}
	if !plain {
		return &number{raw: s, bad: true, quotedBad: true}
	}
	return parseNumber(s)
}

// UnmarshalJSON accepts a JSON number or a string holding an integer's
// plain form (parseQuotedNumber).
func (j *number) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			*j = number{raw: string(b), bad: true, quotedBad: true}
			return nil
		}
		*j = *parseQuotedNumber(s)
		return nil
	}
	*j = *parseNumber(string(b))
	return nil
}

// maxNumber bounds integer parameters before they become durations; every SQS
// integer parameter is far below it.
const maxNumber = 1 << 31

// get returns the value of an optional integer parameter.
func (j *number) get(param string) (n int64, ok bool, err error) {
	if j == nil {
		return 0, false, nil
	}
	if j.quotedBad {
		return 0, false, model.Errorf(errSerialization, "Parameter %s must be an integer, not the string %q (a JSON number, or a string of digits without spaces, plus sign or leading zeros).", param, j.raw)
	}
	if j.bad {
		return 0, false, invalidValue(j.raw, param, "must be an integer.")
	}
	if j.n > maxNumber || j.n < -maxNumber {
		return 0, false, invalidValue(j.n, param, "out of range.")
	}
	return j.n, true, nil
}

// blob is binary data, base64 on the wire in both JSON and XML.
type blob []byte

// MarshalText encodes b in standard base64.
func (b blob) MarshalText() ([]byte, error) {
	out := make([]byte, base64.StdEncoding.EncodedLen(len(b)))
	base64.StdEncoding.Encode(out, b)
	return out, nil
}

// UnmarshalText decodes standard base64.
func (b *blob) UnmarshalText(text []byte) error {
	out := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(out, text)
	if err != nil {
		return invalidValue(string(text), "BinaryValue", "not valid base64.")
	}
	*b = out[:n]
	return nil
}

// attrValue is a MessageAttributeValue (user or system attribute).
type attrValue struct {
	StringValue text   `json:"StringValue,omitempty" xml:"StringValue,omitempty"`
	BinaryValue blob   `json:"BinaryValue,omitempty" xml:"BinaryValue,omitempty"`
	DataType    string `json:"DataType" xml:"DataType"`
}

// attrMap is a map of message attributes. In XML it is flattened as repeated
// <Name/><Value>…</Value> elements named by the field (MessageAttribute).
type attrMap map[string]attrValue

func toBroker(m attrMap) map[string]model.MessageAttribute {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]model.MessageAttribute, len(m))
	for k, v := range m {
		out[k] = model.MessageAttribute{DataType: v.DataType, StringValue: string(v.StringValue), BinaryValue: v.BinaryValue}
	}
	return out
}

func fromBroker(m map[string]model.MessageAttribute) attrMap {
	if len(m) == 0 {
		return nil
	}
	out := make(attrMap, len(m))
	for k, v := range m {
		a := attrValue{DataType: v.DataType}
		if v.IsBinary() {
			a.BinaryValue = v.BinaryValue
		} else {
			a.StringValue = text(v.StringValue)
		}
		out[k] = a
	}
	return out
}

// MarshalXML writes one <start><Name/><Value/></start> per attribute, in name order.
func (m attrMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	for _, k := range sortedKeys(m) {
		v := struct {
			Name  string    `xml:"Name"`
			Value attrValue `xml:"Value"`
		}{k, m[k]}
		if err := e.EncodeElement(v, start); err != nil {
			return err
		}
	}
	return nil
}

// stringMap is a map of strings (queue attributes). In XML it is flattened as
// repeated <start><Name/><Value/></start> elements.
type stringMap map[string]string

// MarshalXML writes one element per entry, in name order.
func (m stringMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	for _, k := range sortedKeys(m) {
		v := struct {
			Name  string `xml:"Name"`
			Value string `xml:"Value"`
		}{k, m[k]}
		if err := e.EncodeElement(v, start); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type queueRef struct {
	QueueUrl string `json:"QueueUrl"`
}

type createQueueInput struct {
	QueueName  string            `json:"QueueName"`
	Attributes map[string]string `json:"Attributes"`
	Tags       map[string]string `json:"tags"`
}

type queueURLOutput struct {
	QueueUrl string `json:"QueueUrl" xml:"QueueUrl"`
}

type getQueueURLInput struct {
	QueueName              string `json:"QueueName"`
	QueueOwnerAWSAccountId string `json:"QueueOwnerAWSAccountId"`
}

type listQueuesInput struct {
	QueueNamePrefix string  `json:"QueueNamePrefix"`
	NextToken       string  `json:"NextToken"`
	MaxResults      *number `json:"MaxResults"`
}

type listQueuesOutput struct {
	QueueUrls []string `json:"QueueUrls,omitempty" xml:"QueueUrl"`
	NextToken string   `json:"NextToken,omitempty" xml:"NextToken,omitempty"`
}

type getQueueAttributesInput struct {
	queueRef
	AttributeNames []string `json:"AttributeNames"`
}

type getQueueAttributesOutput struct {
	Attributes stringMap `json:"Attributes,omitempty" xml:"Attribute"`
}

type setQueueAttributesInput struct {
	queueRef
	Attributes map[string]string `json:"Attributes"`
}

// sendEntry is SendMessage's input and one SendMessageBatch entry.
type sendEntry struct {
	Id                      string  `json:"Id"`
	MessageBody             *text   `json:"MessageBody"`
	DelaySeconds            *number `json:"DelaySeconds"`
	MessageAttributes       attrMap `json:"MessageAttributes"`
	MessageSystemAttributes attrMap `json:"MessageSystemAttributes"`
	MessageDeduplicationId  string  `json:"MessageDeduplicationId"`
	MessageGroupId          string  `json:"MessageGroupId"`
}

type sendMessageInput struct {
	queueRef
	sendEntry
}

type sendMessageOutput struct {
	MD5OfMessageBody             string `json:"MD5OfMessageBody" xml:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty" xml:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty" xml:"MD5OfMessageSystemAttributes,omitempty"`
	MessageId                    string `json:"MessageId" xml:"MessageId"`
	SequenceNumber               string `json:"SequenceNumber,omitempty" xml:"SequenceNumber,omitempty"`
}

type sendMessageBatchInput struct {
	queueRef
	Entries []sendEntry `json:"Entries"`
}

type sendBatchResultEntry struct {
	Id string `json:"Id" xml:"Id"`
	sendMessageOutput
}

// batchError is a BatchResultErrorEntry.
type batchError struct {
	Id          string `json:"Id" xml:"Id"`
	SenderFault bool   `json:"SenderFault" xml:"SenderFault"`
	Code        string `json:"Code" xml:"Code"`
	Message     string `json:"Message,omitempty" xml:"Message,omitempty"`
}

type sendMessageBatchOutput struct {
	Successful []sendBatchResultEntry `json:"Successful" xml:"SendMessageBatchResultEntry"`
	Failed     []batchError           `json:"Failed" xml:"BatchResultErrorEntry"`
}

type receiveMessageInput struct {
	queueRef
	AttributeNames              []string `json:"AttributeNames"`
	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
	MessageAttributeNames       []string `json:"MessageAttributeNames"`
	MaxNumberOfMessages         *number  `json:"MaxNumberOfMessages"`
	VisibilityTimeout           *number  `json:"VisibilityTimeout"`
	WaitTimeSeconds             *number  `json:"WaitTimeSeconds"`
	ReceiveRequestAttemptId     string   `json:"ReceiveRequestAttemptId"`
}

type message struct {
	MessageId              string    `json:"MessageId" xml:"MessageId"`
	ReceiptHandle          string    `json:"ReceiptHandle" xml:"ReceiptHandle"`
	MD5OfBody              string    `json:"MD5OfBody" xml:"MD5OfBody"`
	Body                   string    `json:"Body" xml:"Body"`
	Attributes             stringMap `json:"Attributes,omitempty" xml:"Attribute"`
	MD5OfMessageAttributes string    `json:"MD5OfMessageAttributes,omitempty" xml:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      attrMap   `json:"MessageAttributes,omitempty" xml:"MessageAttribute"`
}

type receiveMessageOutput struct {
	Messages []message `json:"Messages,omitempty" xml:"Message"`
}

type deleteMessageInput struct {
	queueRef
	ReceiptHandle *string `json:"ReceiptHandle"`
}

type deleteBatchEntry struct {
	Id            string  `json:"Id"`
	ReceiptHandle *string `json:"ReceiptHandle"`
}

type deleteMessageBatchInput struct {
	queueRef
	Entries []deleteBatchEntry `json:"Entries"`
}

type batchIDEntry struct {
	Id string `json:"Id" xml:"Id"`
}

type deleteMessageBatchOutput struct {
	Successful []batchIDEntry `json:"Successful" xml:"DeleteMessageBatchResultEntry"`
	Failed     []batchError   `json:"Failed" xml:"BatchResultErrorEntry"`
}

type changeVisibilityInput struct {
	queueRef
	ReceiptHandle     *string `json:"ReceiptHandle"`
	VisibilityTimeout *number `json:"VisibilityTimeout"`
}

type visibilityBatchEntry struct {
	Id                string  `json:"Id"`
	ReceiptHandle     *string `json:"ReceiptHandle"`
	VisibilityTimeout *number `json:"VisibilityTimeout"`
}

type changeVisibilityBatchInput struct {
	queueRef
	Entries []visibilityBatchEntry `json:"Entries"`
}

type changeVisibilityBatchOutput struct {
	Successful []batchIDEntry `json:"Successful" xml:"ChangeMessageVisibilityBatchResultEntry"`
	Failed     []batchError   `json:"Failed" xml:"BatchResultErrorEntry"`
}
