package sqs

import (
	"encoding/base64"
	"unicode/utf8"
)

// jsonAppender is an answer that writes its own AWS JSON form: the hot
// answers (SendMessage, ReceiveMessage), which encoding/json would build by
// reflection on every request. Its output is byte for byte what
// encoding/json's Encoder (SetEscapeHTML(false)) writes, newline included
// (TestJSONAppendersMatchEncodingJSON, FuzzJSONAppenders).
type jsonAppender interface {
	appendJSON(dst []byte) []byte
}

// appendJSONAnswer is a's JSON in a buffer sized for it.
func appendJSONAnswer(a jsonAppender) []byte {
	n := 256
	if r, ok := a.(*receiveMessageOutput); ok {
		n = r.jsonSize()
	}
	return a.appendJSON(make([]byte, 0, n))
}

func (o *sendMessageOutput) appendJSON(b []byte) []byte {
	b = append(b, `{"MD5OfMessageBody":`...)
	b = appendJSONString(b, o.MD5OfMessageBody)
	if o.MD5OfMessageAttributes != "" {
		b = append(b, `,"MD5OfMessageAttributes":`...)
		b = appendJSONString(b, o.MD5OfMessageAttributes)
	}
	if o.MD5OfMessageSystemAttributes != "" {
		b = append(b, `,"MD5OfMessageSystemAttributes":`...)
		b = appendJSONString(b, o.MD5OfMessageSystemAttributes)
	}
	b = append(b, `,"MessageId":`...)
	b = appendJSONString(b, o.MessageId)
	if o.SequenceNumber != "" {
		b = append(b, `,"SequenceNumber":`...)
		b = appendJSONString(b, o.SequenceNumber)
	}
	return append(b, "}\n"...)
}

// jsonSize is an upper estimate of the answer's JSON length when nothing
// in it needs escaping, so that one allocation usually holds it.
func (o *receiveMessageOutput) jsonSize() int {
	n := 16
	for i := range o.Messages {
		m := &o.Messages[i]
		n += 128 + len(m.MessageId) + len(m.ReceiptHandle) + len(m.MD5OfBody) + len(m.Body) + len(m.MD5OfMessageAttributes)
		for k, v := range m.Attributes {
			n += 6 + len(k) + len(v)
		}
		for k, v := range m.MessageAttributes {
			n += 64 + len(k) + len(v.StringValue) + len(v.DataType) + base64.StdEncoding.EncodedLen(len(v.BinaryValue))
		}
	}
	return n
}

func (o *receiveMessageOutput) appendJSON(b []byte) []byte {
	if len(o.Messages) == 0 {
		return append(b, "{}\n"...)
	}
	b = append(b, `{"Messages":[`...)
	for i := range o.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = o.Messages[i].appendJSON(b)
	}
	return append(b, "]}\n"...)
}

func (m *message) appendJSON(b []byte) []byte {
	b = append(b, `{"MessageId":`...)
	b = appendJSONString(b, m.MessageId)
	b = append(b, `,"ReceiptHandle":`...)
	b = appendJSONString(b, m.ReceiptHandle)
	b = append(b, `,"MD5OfBody":`...)
	b = appendJSONString(b, m.MD5OfBody)
	b = append(b, `,"Body":`...)
	b = appendJSONString(b, m.Body)
	if len(m.Attributes) > 0 {
		b = append(b, `,"Attributes":{`...)
		for i, k := range sortedKeys(m.Attributes) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, m.Attributes[k])
		}
		b = append(b, '}')
	}
	if m.MD5OfMessageAttributes != "" {
		b = append(b, `,"MD5OfMessageAttributes":`...)
		b = appendJSONString(b, m.MD5OfMessageAttributes)
	}
	if len(m.MessageAttributes) > 0 {
		b = append(b, `,"MessageAttributes":{`...)
		for i, k := range sortedKeys(m.MessageAttributes) {
			if i > 0 {
				b = append(b, ',')
			}
			v := m.MessageAttributes[k]
			b = appendJSONString(b, k)
			b = append(b, ":{"...)
			if v.StringValue != "" {
				b = append(b, `"StringValue":`...)
				b = appendJSONString(b, string(v.StringValue))
				b = append(b, ',')
			}
			if len(v.BinaryValue) > 0 {
				b = append(b, `"BinaryValue":"`...)
				b = base64.StdEncoding.AppendEncode(b, v.BinaryValue)
				b = append(b, `",`...)
			}
			b = append(b, `"DataType":`...)
			b = appendJSONString(b, v.DataType)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal exactly as
// encoding/json writes it without HTML escaping: '"' and '\\' escaped, the
// control characters as \b \f \n \r \t or \u00XX, bytes that are not UTF-8
// as \ufffd, U+2028 and U+2029 as \u2028 and \u2029 (JSONP safety).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
