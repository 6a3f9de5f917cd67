package sqs

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
	"sync"

	"github.com/sluicemq/sluice/broker/model"
)

// md5State is an MD5 hash with the buffers MD5OfBody hands it.
type md5State struct {
	h   hash.Hash
	buf [4096]byte
	sum [md5.Size]byte
}

var md5States = sync.Pool{New: func() any { return &md5State{h: md5.New()} }}

// MD5OfBody is SQS's MD5OfMessageBody: the lower-case hex MD5 of the UTF-8 body.
func MD5OfBody(body string) string {
	// The body goes to a pooled hash through a pooled buffer, a piece at a
	// time: []byte(body) would copy all of it to the heap, on every send
	// and every receive.
	s := md5States.Get().(*md5State)
	s.h.Reset()
	for len(body) > 0 {
		n := copy(s.buf[:], body)
		s.h.Write(s.buf[:n])
		body = body[n:]
	}
	var out [2 * md5.Size]byte
	hex.Encode(out[:], s.h.Sum(s.sum[:0]))
	md5States.Put(s)
	return string(out[:])
}

// MD5OfAttributes is SQS's MD5OfMessageAttributes (and, applied to system
// attributes, MD5OfMessageSystemAttributes), computed exactly as the SDKs
// verify it: for each attribute in ascending name order, the 4-byte big-endian
// length and bytes of the name, of the full data type, then a transport byte
// (1 string, 2 binary) and the length and bytes of the value. It returns ""
// for no attributes: SQS then omits the field.
func MD5OfAttributes(attrs map[string]model.MessageAttribute) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	h := md5.New()
	for _, k := range names {
		a := attrs[k]
		writeLenBytes(h, []byte(k))
		writeLenBytes(h, []byte(a.DataType))
		if a.IsBinary() {
			h.Write([]byte{2})
			writeLenBytes(h, a.BinaryValue)
		} else {
			h.Write([]byte{1})
			writeLenBytes(h, []byte(a.StringValue))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeLenBytes(h hash.Hash, b []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	h.Write(n[:])
	h.Write(b)
}
