package sqs

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// referenceMD5OfAttributes is AWS's documented algorithm for
// MD5OfMessageAttributes, written out plainly for the fuzz target to compare
// against: sort the attributes by name (ascending); for each, append the
// name's length as 4 big-endian bytes and the name's UTF-8 bytes, the data
// type's length and bytes, one transport byte (1 for String and Number
// types, 2 for Binary types, a custom type "Binary.x" being Binary), and the
// value's length and bytes; the digest is the lower-case hex MD5 of all of
// it. No attributes: no digest ("").
func referenceMD5OfAttributes(attrs map[string]model.MessageAttribute) string {
	if len(attrs) == 0 {
		return ""
	}
	var names []string
	for n := range attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	put := func(b []byte) {
		n := len(b)
		buf.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		buf.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		put([]byte(n))
		put([]byte(a.DataType))
		if a.DataType == "Binary" || strings.HasPrefix(a.DataType, "Binary.") {
			buf.WriteByte(2)
			put(a.BinaryValue)
		} else {
			buf.WriteByte(1)
			put([]byte(a.StringValue))
		}
	}
	sum := md5.Sum(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// fuzzAttrs makes attributes of fuzz bytes: fields separated by 0xff, taken
// three at a time as name, data type and value (at most 64 attributes).
func fuzzAttrs(b []byte) map[string]model.MessageAttribute {
	fields := bytes.Split(b, []byte{0xff})
	attrs := map[string]model.MessageAttribute{}
	for i := 0; i+2 < len(fields) && len(attrs) < 64; i += 3 {
		a := model.MessageAttribute{DataType: string(fields[i+1])}
		if a.IsBinary() {
			a.BinaryValue = fields[i+2]
		} else {
			a.StringValue = string(fields[i+2])
		}
		attrs[string(fields[i])] = a
	}
	return attrs
}

// FuzzMD5OfAttributes: MD5OfAttributes never panics and agrees with the
// reference implementation of AWS's algorithm on any attributes.
func FuzzMD5OfAttributes(f *testing.F) {
	f.Add([]byte("a\xffString\xffv"))
	f.Add([]byte("b\xffBinary\xff\x00\x01\xffa\xffNumber.int\xff42"))
	f.Add([]byte("x\xffBinary.png\xff\xff\xffBinaryish\xff"))
	f.Add([]byte("\xc3\xa9\xffString\xff\xed\xa0\x80")) // UTF-8 name, invalid UTF-8 value
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		attrs := fuzzAttrs(b)
		if got, want := MD5OfAttributes(attrs), referenceMD5OfAttributes(attrs); got != want {
			t.Fatalf("MD5OfAttributes(%q) = %q, reference %q", attrs, got, want)
		}
		body := string(b)
		sum := md5.Sum(b)
		if got := MD5OfBody(body); got != hex.EncodeToString(sum[:]) {
			t.Fatalf("MD5OfBody(%q) = %s", body, got)
		}
	})
}
