package sqs

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// encodingJSON is what writeJSON wrote before the appenders: encoding/json's
// Encoder without HTML escaping.
func encodingJSON(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// randomText is a string of characters that JSON escapes or not: ASCII,
// controls, quotes, HTML characters, multi-byte runes, U+2028/9, and bytes
// that are not UTF-8.
func randomText(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f",
		"é", "☃", "😀", "\u2028", "\u2029", "\ufffd", "\xff", "\xed\xa0\x80", "\xe2\x80", "{}", ","}
	var b []byte
	for range r.IntN(24) {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

func randomReceive(r *rand.Rand) *receiveMessageOutput {
	out := &receiveMessageOutput{}
	for range r.IntN(4) {
		m := message{MessageId: randomText(r), ReceiptHandle: randomText(r), MD5OfBody: randomText(r), Body: randomText(r)}
		if r.IntN(2) == 0 {
			m.Attributes = stringMap{}
			for range r.IntN(4) {
				m.Attributes[randomText(r)] = randomText(r)
			}
		}
		if r.IntN(2) == 0 {
			m.MD5OfMessageAttributes = randomText(r)
		}
		if r.IntN(2) == 0 {
			m.MessageAttributes = attrMap{}
			for range r.IntN(4) {
				v := attrValue{DataType: randomText(r)}
				if r.IntN(2) == 0 {
					v.StringValue = text(randomText(r))
				}
				if r.IntN(2) == 0 {
					v.BinaryValue = blob(randomText(r))
				}
				m.MessageAttributes[randomText(r)] = v
			}
		}
		out.Messages = append(out.Messages, m)
	}
	return out
}

func randomSend(r *rand.Rand) *sendMessageOutput {
	o := &sendMessageOutput{MD5OfMessageBody: randomText(r), MessageId: randomText(r)}
	if r.IntN(2) == 0 {
		o.MD5OfMessageAttributes = randomText(r)
	}
	if r.IntN(2) == 0 {
		o.MD5OfMessageSystemAttributes = randomText(r)
	}
	if r.IntN(2) == 0 {
		o.SequenceNumber = randomText(r)
	}
	return o
}

// TestJSONAppendersMatchEncodingJSON: the hand-written encoders write
// exactly encoding/json's bytes for randomized answers.
func TestJSONAppendersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		for _, v := range []jsonAppender{randomReceive(r), randomSend(r)} {
			want := encodingJSON(t, v)
			if got := v.appendJSON(nil); !bytes.Equal(got, want) {
				t.Fatalf("case %d: appendJSON\n got %q\nwant %q", i, got, want)
			}
		}
	}
	for _, v := range []jsonAppender{&receiveMessageOutput{}, &receiveMessageOutput{Messages: []message{}}, &sendMessageOutput{}, benchMessages(3), benchSendOutput} {
		if got, want := v.appendJSON(nil), encodingJSON(t, v); !bytes.Equal(got, want) {
			t.Fatalf("appendJSON(%+v)\n got %q\nwant %q", v, got, want)
		}
	}
}

// FuzzJSONAppenders: any strings in a ReceiveMessage answer encode as
// encoding/json encodes them.
func FuzzJSONAppenders(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/<>&", "\b\f\n\r\t\x00\x1f\x7f", "é☃😀", "\u2028\u2029", "\xff\xed\xa0\x80\xe2\x80"} {
		f.Add(s, s, []byte(s))
	}
	f.Fuzz(func(t *testing.T, body, attr string, bin []byte) {
		v := &receiveMessageOutput{Messages: []message{{
			MessageId: attr, ReceiptHandle: body, MD5OfBody: attr, Body: body,
			Attributes:             stringMap{attr: body, body: attr},
			MD5OfMessageAttributes: body,
			MessageAttributes:      attrMap{attr: {StringValue: text(body), BinaryValue: bin, DataType: attr}},
		}}}
		if got, want := v.appendJSON(nil), encodingJSON(t, v); !bytes.Equal(got, want) {
			t.Fatalf("appendJSON\n got %q\nwant %q", got, want)
		}
		s := &sendMessageOutput{MD5OfMessageBody: body, MessageId: attr, SequenceNumber: body}
		if got, want := s.appendJSON(nil), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSON\n got %q\nwant %q", got, want)
		}
	})
}
