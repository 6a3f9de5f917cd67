package broker

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// Receipt identifies one lease of one message: the queue's internal id, the
// message's key within the queue, and the lease version (a counter bumped on
// every receive, the compare-and-set token backends check). Its encoding is
// opaque to clients and versioned by its first byte, so a later version can add
// an HMAC.
type Receipt struct {
	QueueID uint64
	Key     uint64
	Lease   uint64
}

const receiptV1 = 1

// Encode returns the receipt handle string.
func (r Receipt) Encode() string {
	buf := make([]byte, 1, 1+3*binary.MaxVarintLen64+4)
	buf[0] = receiptV1
	buf = binary.AppendUvarint(buf, r.QueueID)
	buf = binary.AppendUvarint(buf, r.Key)
	buf = binary.AppendUvarint(buf, r.Lease)
	// 4 random bytes make handles of successive leases look unrelated; they
	// carry no meaning and are ignored on decode.
	var pad [4]byte
	_, _ = rand.Read(pad[:])
	buf = append(buf, pad[:]...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// DecodeReceipt parses a receipt handle. A malformed handle gives ErrReceiptHandleInvalid.
func DecodeReceipt(s string) (Receipt, error) {
	bad := receiptInvalidError(s)
	if len(s) > 1024 {
		return Receipt{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 1 || b[0] != receiptV1 {
		return Receipt{}, bad
	}
	b = b[1:]
	var r Receipt
	for _, p := range []*uint64{&r.QueueID, &r.Key, &r.Lease} {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return Receipt{}, bad
		}
		*p, b = v, b[n:]
	}
	if len(b) != 4 {
		return Receipt{}, bad
	}
	return r, nil
}

// receiptInvalidError is the answer to a receipt handle that does not
// decode, or that names another queue.
func receiptInvalidError(handle string) error {
	return Errorf(ErrReceiptHandleInvalid, "The input receipt handle %q is not a valid receipt handle.", handle)
}

// NewMessageID returns a random UUID (version 4) as SQS message ids are.
func NewMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
