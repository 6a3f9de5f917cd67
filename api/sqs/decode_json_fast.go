package sqs

import (
	"encoding/base64"
	"unicode/utf8"
)

// The fast path of the JSON decoder, for the requests of the message path
// (SendMessage, SendMessageBatch, ReceiveMessage, DeleteMessage,
// DeleteMessageBatch, ChangeMessageVisibility and its batch). It accepts only
// well-formed JSON of the expected shape and fills the input struct exactly
// as decodeJSON (encoding/json with the text and number decoders) would.
// Anything else makes it give up, and the caller decodes the body again with
// decodeJSON, which answers errors as it always did:
//
//   - a member name that is not one of the struct's exact names (encoding/json
//     ignores unknown members and matches names without regard to case), or
//     that holds an escape or a byte outside printable ASCII;
//   - a member or message attribute named twice in one object (decodeJSON
//     refuses it; encoding/json would merge the values);
//   - a value of another JSON type than the field's (true, a number for a
//     string, an object for a list), except null, which leaves every field
//     of these structs at its zero value as encoding/json does;
//   - a string field (not message contents) whose text is not valid Unicode:
//     encoding/json replaces such input by U+FFFD;
//   - a BinaryValue with an escape, or that is not valid base64;
//   - a number given as a string with an escape, or with text that is not
//     UTF-8;
//   - an array of more than maxFastArray elements (decodeJSON refuses
//     arrays past apicommon.MaxJSONArray before decoding);
//   - any syntax error, and anything but white space after the object.
//
// TestFastJSONMatchesEncodingJSON and FuzzJSONRequestDecode check that an
// accepted body gives the struct decodeJSON gives.

// maxFastArray is the longest array the fast path decodes: every list of
// these requests is far shorter (10 batch entries, a few attribute names).
const maxFastArray = 100

// decodeJSONFast decodes body into in when in is one of the message path's
// input structs and body is in the shape it accepts. It reports whether it
// did; when it did not, in may be partly filled and must be reset.
func decodeJSONFast(body []byte, in any) bool {
	d := fastDecoder{b: body}
	var ok bool
	switch v := in.(type) {
	case *sendMessageInput:
		ok = d.sendMessage(v)
	case *sendMessageBatchInput:
		ok = d.sendMessageBatch(v)
	case *receiveMessageInput:
		ok = d.receiveMessage(v)
	case *deleteMessageInput:
		ok = d.deleteMessage(v)
	case *deleteMessageBatchInput:
		ok = d.deleteMessageBatch(v)
	case *changeVisibilityInput:
		ok = d.changeVisibility(v)
	case *changeVisibilityBatchInput:
		ok = d.changeVisibilityBatch(v)
	default:
		return false
	}
	if !ok {
		return false
	}
	d.ws()
	return d.i == len(d.b)
}

// fastDecoder reads b from i on.
type fastDecoder struct {
	b []byte
	i int
}

// ws skips JSON white space.
func (d *fastDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte (0 at the end) without
// consuming it.
func (d *fastDecoder) next() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// eat consumes c after white space.
func (d *fastDecoder) eat(c byte) bool {
	if d.next() != c {
		return false
	}
	d.i++
	return true
}

// null consumes a null literal if one is next.
func (d *fastDecoder) null() bool {
	if d.next() == 'n' && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// object reads an object, calling member with each member name (printable
// ASCII without escapes, else it fails) with the decoder at its value.
// seen guards against a name given twice: member returns the bit of its
// field (0 for none: an unknown name, and the object fails).
func (d *fastDecoder) object(member func(name []byte) uint32) bool {
	if !d.eat('{') {
		return false
	}
	if d.eat('}') {
		return true
	}
	var seen uint32
	for {
		name, ok := d.name()
		if !ok || !d.eat(':') {
			return false
		}
		bit := member(name)
		if bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// name reads a member name: a string of printable ASCII without escapes.
func (d *fastDecoder) name() ([]byte, bool) {
	if !d.eat('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// array reads an array of at most maxFastArray elements, calling elem with
// the decoder at each element. It reports the count of elements.
func (d *fastDecoder) array(elem func() bool) (int, bool) {
	if !d.eat('[') {
		return 0, false
	}
	if d.eat(']') {
		return 0, true
	}
	for n := 1; n <= maxFastArray; n++ {
		if !elem() {
			return 0, false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			return n, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// literal reads a string literal, checking its syntax as encoding/json's
// scanner does, and returns it with its quotes, whether it holds an escape,
// and whether it holds a byte outside ASCII.
func (d *fastDecoder) literal() (lit []byte, escaped, nonASCII, ok bool) {
	if d.next() != '"' {
		return nil, false, false, false
	}
	start := d.i
	d.i++
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return d.b[start:d.i], escaped, nonASCII, true
		case c == '\\':
			escaped = true
			if d.i+1 >= len(d.b) {
				return nil, false, false, false
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.b) || !isHex(d.b[d.i+2]) || !isHex(d.b[d.i+3]) || !isHex(d.b[d.i+4]) || !isHex(d.b[d.i+5]) {
					return nil, false, false, false
				}
				d.i += 6
			default:
				return nil, false, false, false
			}
		case c < 0x20:
			return nil, false, false, false
		default:
			if c >= 0x80 {
				nonASCII = true
			}
			d.i++
		}
	}
	return nil, false, false, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// str reads a string as encoding/json decodes it into a string field, or
// fails where encoding/json would replace something by U+FFFD. Text that
// unquoteText leaves valid UTF-8 had no invalid byte and no unpaired
// surrogate escape, and is then what encoding/json decodes.
func (d *fastDecoder) str() (string, bool) {
	lit, escaped, nonASCII, ok := d.literal()
	if !ok {
		return "", false
	}
	content := lit[1 : len(lit)-1]
	if !escaped {
		if nonASCII && !utf8.Valid(content) {
			return "", false
		}
		return string(content), true
	}
	s := unquoteText(lit)
	if !utf8.ValidString(s) {
		return "", false
	}
	return s, true
}

// stringField reads a string member into dst (null leaves it empty).
func (d *fastDecoder) stringField(dst *string) bool {
	if d.null() {
		return true
	}
	s, ok := d.str()
	*dst = s
	return ok
}

// stringPtr reads a *string member (null leaves it nil).
func (d *fastDecoder) stringPtr(dst **string) bool {
	if d.null() {
		return true
	}
	s, ok := d.str()
	if !ok {
		return false
	}
	*dst = &s
	return true
}

// text reads message contents as text.UnmarshalJSON does: any well-formed
// string literal, taken as sent.
func (d *fastDecoder) text() (text, bool) {
	lit, escaped, _, ok := d.literal()
	if !ok {
		return "", false
	}
	if !escaped {
		return text(lit[1 : len(lit)-1]), true
	}
	return text(unquoteText(lit)), true
}

// textPtr reads a *text member (null leaves it nil).
func (d *fastDecoder) textPtr(dst **text) bool {
	if d.null() {
		return true
	}
	t, ok := d.text()
	if !ok {
		return false
	}
	*dst = &t
	return true
}

// numberPtr reads a *number member as number.UnmarshalJSON does: a JSON
// number, or a string holding one (null leaves it nil).
func (d *fastDecoder) numberPtr(dst **number) bool {
	if d.null() {
		return true
	}
	if d.next() == '"' {
		lit, escaped, nonASCII, ok := d.literal()
		if !ok || escaped {
			return false
		}
		content := lit[1 : len(lit)-1]
		if nonASCII && !utf8.Valid(content) {
			return false
		}
		*dst = parseQuotedNumber(string(content))
		return true
	}
	start := d.i
	if !d.numberLiteral() {
		return false
	}
	*dst = parseNumber(string(d.b[start:d.i]))
	return true
}

// numberLiteral consumes a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *fastDecoder) numberLiteral() bool {
	b := d.b
	if d.i < len(b) && b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(b) && b[d.i] == '0':
		d.i++
	case d.i < len(b) && b[d.i] >= '1' && b[d.i] <= '9':
		for d.i < len(b) && b[d.i] >= '0' && b[d.i] <= '9' {
			d.i++
		}
	default:
		return false
	}
	if d.i < len(b) && b[d.i] == '.' {
		d.i++
		if !d.digits() {
			return false
		}
	}
	if d.i < len(b) && (b[d.i] == 'e' || b[d.i] == 'E') {
		d.i++
		if d.i < len(b) && (b[d.i] == '+' || b[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

// digits consumes one or more decimal digits.
func (d *fastDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// stringList reads a list of strings (null leaves it nil; a null element is
// ""; [] is an empty list, not nil).
func (d *fastDecoder) stringList(dst *[]string) bool {
	if d.null() {
		return true
	}
	list := []string{}
	_, ok := d.array(func() bool {
		var s string
		if !d.stringField(&s) {
			return false
		}
		list = append(list, s)
		return true
	})
	*dst = list
	return ok
}

// attrMap reads a map of message attributes (null leaves it nil; {} is an
// empty map). A name given twice makes it give up: decodeJSON refuses it.
func (d *fastDecoder) attrMap(dst *attrMap) bool {
	if d.null() {
		return true
	}
	if !d.eat('{') {
		return false
	}
	m := attrMap{}
	*dst = m
	if d.eat('}') {
		return true
	}
	for {
		name, ok := d.str()
		if !ok || !d.eat(':') {
			return false
		}
		if _, dup := m[name]; dup {
			return false
		}
		var v attrValue
		if !d.null() && !d.attrValue(&v) {
			return false
		}
		m[name] = v
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// attrValue reads a MessageAttributeValue object.
func (d *fastDecoder) attrValue(v *attrValue) bool {
	return d.object(func(name []byte) uint32 {
		switch string(name) {
		case "DataType":
			return bitIf(1, d.stringField(&v.DataType))
		case "StringValue":
			if d.null() {
				return 2
			}
			t, ok := d.text()
			v.StringValue = t
			return bitIf(2, ok)
		case "BinaryValue":
			return bitIf(4, d.blob(&v.BinaryValue))
		}
		return 0
	})
}

// blob reads base64 data as blob.UnmarshalText does ("" is an empty,
// non-nil blob; null leaves it nil). An escape or a byte that is not
// base64 makes it fail.
func (d *fastDecoder) blob(dst *blob) bool {
	if d.null() {
		return true
	}
	lit, escaped, _, ok := d.literal()
	if !ok || escaped {
		return false
	}
	src := lit[1 : len(lit)-1]
	out := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
	n, err := base64.StdEncoding.Decode(out, src)
	if err != nil {
		return false
	}
	*dst = out[:n]
	return true
}

// bitIf is bit when ok, else 0 (the member failed).
func bitIf(bit uint32, ok bool) uint32 {
	if ok {
		return bit
	}
	return 0
}

// sendEntryMember reads one member of a sendEntry (SendMessage's own
// members, or a batch entry's); bits 1 to 64.
func (d *fastDecoder) sendEntryMember(e *sendEntry, name []byte) uint32 {
	switch string(name) {
	case "Id":
		return bitIf(1, d.stringField(&e.Id))
	case "MessageBody":
		return bitIf(2, d.textPtr(&e.MessageBody))
	case "DelaySeconds":
		return bitIf(4, d.numberPtr(&e.DelaySeconds))
	case "MessageAttributes":
		return bitIf(8, d.attrMap(&e.MessageAttributes))
	case "MessageSystemAttributes":
		return bitIf(16, d.attrMap(&e.MessageSystemAttributes))
	case "MessageDeduplicationId":
		return bitIf(32, d.stringField(&e.MessageDeduplicationId))
	case "MessageGroupId":
		return bitIf(64, d.stringField(&e.MessageGroupId))
	}
	return 0
}

// bitQueueURL is the seen-bit of QueueUrl in the top-level objects.
const bitQueueURL = 1 << 31

func (d *fastDecoder) sendMessage(in *sendMessageInput) bool {
	return d.object(func(name []byte) uint32 {
		if string(name) == "QueueUrl" {
			return bitIf(bitQueueURL, d.stringField(&in.QueueUrl))
		}
		return d.sendEntryMember(&in.sendEntry, name)
	})
}

// entries decodes a batch's Entries member into *dst: null, or an array
// whose elements are null or objects whose members member decodes; it
// returns the member's bit as the callers of object do.
func entries[E any](d *fastDecoder, dst *[]E, member func(e *E, name []byte) uint32) uint32 {
	if d.null() {
		return 1
	}
	es := []E{}
	_, ok := d.array(func() bool {
		var zero E
		es = append(es, zero)
		e := &es[len(es)-1]
		return d.null() || d.object(func(name []byte) uint32 { return member(e, name) })
	})
	*dst = es
	return bitIf(1, ok)
}

func (d *fastDecoder) sendMessageBatch(in *sendMessageBatchInput) bool {
	return d.object(func(name []byte) uint32 {
		switch string(name) {
		case "QueueUrl":
			return bitIf(bitQueueURL, d.stringField(&in.QueueUrl))
		case "Entries":
			return entries(d, &in.Entries, d.sendEntryMember)
		}
		return 0
	})
}

func (d *fastDecoder) receiveMessage(in *receiveMessageInput) bool {
	return d.object(func(name []byte) uint32 {
		switch string(name) {
		case "QueueUrl":
			return bitIf(bitQueueURL, d.stringField(&in.QueueUrl))
		case "AttributeNames":
			return bitIf(1, d.stringList(&in.AttributeNames))
		case "MessageSystemAttributeNames":
			return bitIf(2, d.stringList(&in.MessageSystemAttributeNames))
		case "MessageAttributeNames":
			return bitIf(4, d.stringList(&in.MessageAttributeNames))
		case "MaxNumberOfMessages":
			return bitIf(8, d.numberPtr(&in.MaxNumberOfMessages))
		case "VisibilityTimeout":
			return bitIf(16, d.numberPtr(&in.VisibilityTimeout))
		case "WaitTimeSeconds":
			return bitIf(32, d.numberPtr(&in.WaitTimeSeconds))
		case "ReceiveRequestAttemptId":
			return bitIf(64, d.stringField(&in.ReceiveRequestAttemptId))
		}
		return 0
	})
}

func (d *fastDecoder) deleteMessage(in *deleteMessageInput) bool {
	return d.object(func(name []byte) uint32 {
		switch string(name) {
		case "QueueUrl":
			return bitIf(bitQueueURL, d.stringField(&in.QueueUrl))
		case "ReceiptHandle":
			return bitIf(1, d.stringPtr(&in.ReceiptHandle))
		}
		return 0
	})
}

func (d *fastDecoder) deleteMessageBatch(in *deleteMessageBatchInput) bool {
	return d.object(func(name []byte) uint32 {
		switch string(name) {
		case "QueueUrl":
			return bitIf(bitQueueURL, d.stringField(&in.QueueUrl))
		case "Entries":
			return entries(d, &in.Entries, func(e *deleteBatchEntry, name []byte) uint32 {
				switch string(name) {
				case "Id":
					return bitIf(1, d.stringField(&e.Id))
				case "ReceiptHandle":
					return bitIf(2, d.stringPtr(&e.ReceiptHandle))
				}
				return 0
			})
		}
		return 0
	})
}

func (d *fastDecoder) changeVisibility(in *changeVisibilityInput) bool {
	return d.object(func(name []byte) uint32 {
		switch string(name) {
		case "QueueUrl":
			return bitIf(bitQueueURL, d.stringField(&in.QueueUrl))
		case "ReceiptHandle":
			return bitIf(1, d.stringPtr(&in.ReceiptHandle))
		case "VisibilityTimeout":
			return bitIf(2, d.numberPtr(&in.VisibilityTimeout))
		}
		return 0
	})
}

func (d *fastDecoder) changeVisibilityBatch(in *changeVisibilityBatchInput) bool {
	return d.object(func(name []byte) uint32 {
		switch string(name) {
		case "QueueUrl":
			return bitIf(bitQueueURL, d.stringField(&in.QueueUrl))
		case "Entries":
			return entries(d, &in.Entries, func(e *visibilityBatchEntry, name []byte) uint32 {
				switch string(name) {
				case "Id":
					return bitIf(1, d.stringField(&e.Id))
				case "ReceiptHandle":
					return bitIf(2, d.stringPtr(&e.ReceiptHandle))
				case "VisibilityTimeout":
					return bitIf(4, d.numberPtr(&e.VisibilityTimeout))
				}
				return 0
			})
		}
		return 0
	})
}
