package loadgen

import (
	"errors"
	"strconv"
	"time"
)

// A message body the generator sends: "sl1 " + 16 hex digits of the
// message id + " " + 16 hex digits of the send time (Unix nanoseconds; the
// scheduled time under a fixed rate) + " ", padded with 'x' to the body
// size. Plain ASCII, so every protocol carries it unescaped. The id is the
// producer number in the top 24 bits and its sequence in the low 40.
const (
	bodyPrefix  = "sl1 "
	bodyMinSize = len(bodyPrefix) + 16 + 1 + 16 + 1
)

// MessageID makes the id of producer p's n-th message.
func MessageID(p int, n uint64) uint64 { return uint64(p)<<40 | n&(1<<40-1) }

// SplitID returns the producer and sequence of id.
func SplitID(id uint64) (p int, n uint64) { return int(id >> 40), id & (1<<40 - 1) }

// AppendBody appends a body of size bytes (at least bodyMinSize) carrying
// id and the send time t.
func AppendBody(dst []byte, id uint64, t time.Time, size int) []byte {
	size = max(size, bodyMinSize)
	start := len(dst)
	dst = append(dst, bodyPrefix...)
	dst = appendHex16(dst, id)
	dst = append(dst, ' ')
	dst = appendHex16(dst, uint64(t.UnixNano()))
	dst = append(dst, ' ')
	for len(dst)-start < size {
		dst = append(dst, 'x')
	}
	return dst
}

func appendHex16(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for s := 60; s >= 0; s -= 4 {
		dst = append(dst, digits[v>>uint(s)&0xf])
	}
	return dst
}

var errForeignBody = errors.New("loadgen: body was not written by the generator")

// ParseBody returns the id and send time a body carries.
func ParseBody(b string) (id uint64, sent time.Time, err error) {
	if len(b) < bodyMinSize || b[:len(bodyPrefix)] != bodyPrefix {
		return 0, time.Time{}, errForeignBody
	}
	p := len(bodyPrefix)
	id, err1 := strconv.ParseUint(b[p:p+16], 16, 64)
	ts, err2 := strconv.ParseUint(b[p+17:p+33], 16, 64)
	if err1 != nil || err2 != nil {
		return 0, time.Time{}, errForeignBody
	}
	return id, time.Unix(0, int64(ts)), nil
}
