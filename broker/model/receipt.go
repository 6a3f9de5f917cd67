package model

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"sync"
)

// Receipt identifies one lease of one message: the queue's internal id, the
// message's key within the queue, and the lease version (a counter bumped on
// every receive, the compare-and-set token backends check). Clients see it
// only as a receipt handle, the string a ReceiptCodec makes of it.
type Receipt struct {
	QueueID uint64
	Key     uint64
	Lease   uint64
}

// Receipt handle format (version 2):
//
//	base64url-unpadded( 0x02 | uvarint(QueueID) | uvarint(Key) | uvarint(Lease) | MAC )
//
// where MAC is the first 16 bytes of HMAC-SHA256(receipt key, everything
// before it). The receipt key is 32 random bytes made once per store and
// kept in it (Backend.Receipts), so every broker on one store signs and
// verifies alike, and handles survive restarts. A handle can then be neither
// forged (a guessed MAC is right with probability 2^-128) nor turned into
// another lease or another queue's (the fields are under the MAC).
//
// The encoding is canonical, so one lease has exactly one handle string:
// base64 is decoded strictly (no padding, no line breaks, no spare bits),
// and the uvarints must be minimal (Decode re-encodes and compares).
//
// Version 1 (unsigned, with 4 random pad bytes) is refused: handles issued
// before the upgrade stop working, and their messages come back when their
// visibility timeout ends.
const (
	receiptV2      = 2
	receiptMACSize = 16
	// maxReceiptHandle is longer than any handle Encode makes (64 chars):
	// a longer string is refused before it is decoded.
	maxReceiptHandle = 128
)

// ReceiptKeySize is the size in bytes of a receipt key.
const ReceiptKeySize = 32

// NewReceiptKey returns a new random receipt key, for a backend to store
// once when its store is created.
func NewReceiptKey() ([]byte, error) {
	k := make([]byte, ReceiptKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	return k, nil
}

// ReceiptCodec makes and checks receipt handles with one store's receipt
// key. It is immutable and safe for concurrent use.
type ReceiptCodec struct {
	key []byte
	// macs holds HMAC-SHA256 states keyed with key: hmac.New hashes the key
	// into its inner and outer pads on every call, a Reset of a used one
	// restores them from a copy.
	macs sync.Pool
}

// NewReceiptCodec returns the codec of key, which must be ReceiptKeySize bytes.
func NewReceiptCodec(key []byte) (*ReceiptCodec, error) {
	if len(key) != ReceiptKeySize {
		return nil, fmt.Errorf("receipt key: %d bytes, want %d", len(key), ReceiptKeySize)
	}
	c := &ReceiptCodec{key: bytes.Clone(key)}
	c.macs.New = func() any { return &receiptMAC{h: hmac.New(sha256.New, c.key)} }
	return c, nil
}

// fields appends the signed part of r's handle to b.
func (r Receipt) fields(b []byte) []byte {
	b = append(b, receiptV2)
	b = binary.AppendUvarint(b, r.QueueID)
	b = binary.AppendUvarint(b, r.Key)
	return binary.AppendUvarint(b, r.Lease)
}

// receiptMAC is a keyed HMAC-SHA256 with its buffers.
type receiptMAC struct {
	h   hash.Hash
	msg [1 + 3*binary.MaxVarintLen64]byte
	sum [sha256.Size]byte
}

// mac appends the MAC of msg (a receipt's signed fields) to b.
func (c *ReceiptCodec) mac(b, msg []byte) []byte {
	m := c.macs.Get().(*receiptMAC)
	m.h.Reset()
	// The hash is an interface: what it is handed escapes, so it is handed
	// the pooled buffers, never the caller's stack.
	m.h.Write(m.msg[:copy(m.msg[:], msg)])
	b = append(b, m.h.Sum(m.sum[:0])[:receiptMACSize]...)
	c.macs.Put(m)
	return b
}

// Encode returns r's receipt handle. The same receipt always gives the same
// handle.
func (c *ReceiptCodec) Encode(r Receipt) string {
	var arr [1 + 3*binary.MaxVarintLen64 + receiptMACSize]byte
	b := r.fields(arr[:0])
	b = c.mac(b, b)
	var out [maxReceiptHandle]byte
	n := base64.RawURLEncoding.EncodedLen(len(b))
	base64.RawURLEncoding.Encode(out[:n], b)
	return string(out[:n])
}

// strictB64 is the only base64 Decode accepts: unpadded URL alphabet with
// the spare bits zero. (Go's decoders skip '\r' and '\n' even when strict,
// so Decode checks the alphabet itself first.)
var strictB64 = base64.RawURLEncoding.Strict()

// Decode parses and verifies a receipt handle. A handle that is malformed,
// of another version, or whose MAC does not match (forged, altered, or made
// with another store's key) gives ErrReceiptHandleInvalid.
func (c *ReceiptCodec) Decode(s string) (Receipt, error) {
	r, ok := c.decode(s)
	if !ok {
		return Receipt{}, ReceiptInvalidError(s)
	}
	return r, nil
}

// decode is Decode without the error, which is built only for a handle
// that fails (its text quotes the handle).
func (c *ReceiptCodec) decode(s string) (Receipt, bool) {
	if len(s) > maxReceiptHandle {
		return Receipt{}, false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !('A' <= ch && ch <= 'Z' || 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_') {
			return Receipt{}, false
		}
	}
	var arr, src [maxReceiptHandle]byte
	n, err := strictB64.Decode(arr[:], src[:copy(src[:], s)])
	if err != nil || n < 1+3+receiptMACSize || arr[0] != receiptV2 {
		return Receipt{}, false
	}
	b := arr[:n]
	rest := b[1:]
	var r Receipt
	for _, p := range []*uint64{&r.QueueID, &r.Key, &r.Lease} {
		v, m := binary.Uvarint(rest)
		if m <= 0 {
			return Receipt{}, false
		}
		*p, rest = v, rest[m:]
	}
	if len(rest) != receiptMACSize {
		return Receipt{}, false
	}
	signed := b[:n-receiptMACSize]
	var want [1 + 3*binary.MaxVarintLen64 + receiptMACSize]byte
	canon := r.fields(want[:0])
	if !bytes.Equal(canon, signed) { // a non-minimal uvarint
		return Receipt{}, false
	}
	if !hmac.Equal(c.mac(canon[len(canon):], canon), rest) {
		return Receipt{}, false
	}
	return r, true
}

// receiptInvalidError is the answer to a receipt handle that does not
// decode or verify, or that names another queue.
func ReceiptInvalidError(handle string) error {
	return Errorf(ErrReceiptHandleInvalid, "The input receipt handle %q is not a valid receipt handle.", handle)
}

// NewMessageID returns a random UUID (version 4) as SQS message ids are.
func NewMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return FormatUUID(b)
}

// FormatUUID writes b as 8-4-4-4-12 lowercase hex digits, by hand: every
// request makes an id (its request id) and every sent message another. The
// embedded store formats the ids it keeps as 16 bytes with it too.
func FormatUUID(b [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}
