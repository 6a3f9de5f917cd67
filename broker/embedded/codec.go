package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"time"
	"unique"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluicemq/sluice/broker/model"
)

// Key layout (all integers big-endian so that byte order is numeric order):
//
//	0x01 "qid"                      next queue id (uint64)
//	0x01 "key"                      message key ceiling (uint64): no key below it was ever handed out
//	0x01 "rkey"                     receipt key (32 random bytes, receiptkey.go)
//	0x02 <name>                     queue record (JSON queueRecord)
//	0x03 <qid:8> 0x01 <key:8>       message metadata (metaRecord, small)
//	0x03 <qid:8> 0x02 <key:8>       message body (bodyRecord: id, body, attributes, sender)
//	0x03 <qid:8> 0x03 <dedup key>   dedup window entry (dedup.go)
//	0x03 <qid:8> 0x04 <attempt id>  FIFO receive-attempt cache entry (fifo.go)
//	0x03 <qid:8> 0x06 <message id>  a message's record after it left (records.go)
//	0x03 <qid:8> 0x07 <due:8> <id>  that record's due time, for the sweeper (records.go)
//	0x04 <seq:8>                    move task record (movetask.go)
//	0x05 <name>                     schedule record (or <account>:<name>; schedule.go)
//
// Everything a queue owns lies in [0x03 qid, 0x03 qid+1), so deleting a
// queue is one range delete; its messages' metadata lies apart from their
// bodies, so the restart scan reads metadata only, and a purge is the range
// delete of all four kinds.
const (
	pfxCounter byte = 0x01
	pfxQueue   byte = 0x02
	pfxData    byte = 0x03

	kindMeta byte = 0x01
	kindBody byte = 0x02
)

var (
	keyNextQueueID = []byte{pfxCounter, 'q', 'i', 'd'}
	keyKeyCeiling  = []byte{pfxCounter, 'k', 'e', 'y'}
)

// queueKey is the key of a queue record: the name alone for the broker's
// own account (as before accounts existed), "<account>:<name>" for another
// (':' is in no queue name).
func queueKey(r model.QueueRef) []byte {
	k := []byte{pfxQueue}
	if r.Account != "" {
		k = append(append(k, r.Account...), ':')
	}
	return append(k, r.Name...)
}

// ref is the queue's account and name.
func (r *queueRecord) ref() model.QueueRef { return model.QueueRef{Account: r.Account, Name: r.Name} }

func dataPrefix(qid uint64) []byte {
	k := make([]byte, 9, 18)
	k[0] = pfxData
	binary.BigEndian.PutUint64(k[1:], qid)
	return k
}

// queueRange is [start, end) of everything queue qid owns.
func queueRange(qid uint64) (start, end []byte) {
	return dataPrefix(qid), dataPrefix(qid + 1)
}

// kindRange is [start, end) of one kind of record (metadata or bodies) of queue qid.
func kindRange(qid uint64, kind byte) (start, end []byte) {
	return append(dataPrefix(qid), kind), append(dataPrefix(qid), kind+1)
}

func msgKey(qid uint64, kind byte, key uint64) []byte {
	k := append(dataPrefix(qid), kind)
	return binary.BigEndian.AppendUint64(k, key)
}

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func u64Bytes(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// queueRecord is the stored form of a queue.
type queueRecord struct {
	ID uint64 `json:"id"`
	// Account owns the queue ("" = the broker's own, see model.QueueRef).
	Account    string            `json:"account,omitempty"`
	Name       string            `json:"name"`
	Config     model.QueueConfig `json:"config"`
	Tags       map[string]string `json:"tags,omitempty"`
	CreatedAt  time.Time         `json:"created"`
	ModifiedAt time.Time         `json:"modified"`
	// LastPurge is the purge watermark for StrictPurge (zero: never purged).
	LastPurge time.Time `json:"lastPurge,omitzero"`
}

func (r *queueRecord) encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // only plain data: cannot fail
	}
	return b
}

var errCorrupt = errors.New("embedded: corrupt record")

// Metadata record format, version 3 (written since issue 25's time to live):
//
//	ver(1)=3 state(1) visibleAt(varint ns) lease(uvarint) receiveCount(uvarint)
//	firstReceiveAt(varint ns) sentAt(varint ns) priority(varint) seq(uvarint)
//	size(uvarint) groupID(str) dedupID(str) deadLetterSource(str)
//	attempts(uvarint) maxAttempts(uvarint) lastReceiveAt(varint ns)
//	failureReason(str) messageID(str) expiresAt(varint ns; 0 = none)
//	[failureCount(uvarint) n(uvarint) n × (at(varint ns) reason(str))]
//
// The bracketed failure history (issue 26) is written only for a message
// that failed, and is not a version of its own: a record without it (all
// those written before it existed) decodes with no history, and a Sluice
// of before it, whose decoder stops after expiresAt, reads a record with
// it as the same message without its history. So it needs neither a new
// record version nor a new data directory format.
//
// where str is uvarint length + bytes. Times are wall-clock instants from the
// injected clock (Unix nanoseconds), so a lease keeps its deadline across a
// restart. The message id is kept here (it is also in the body record) so that
// the index knows it without reading bodies: the backoff's jitter is seeded
// by it, and DeleteMessages finds messages by it.
//
// Version 2 (written since issue 8) is version 3 without expiresAt: it
// decodes as a message without a time to live, as every message stored
// before one could be set was; it is read as it is, and rewritten as
// version 3 by the next change of the message. Version 1 is version 2's
// first thirteen fields; a version-1 record decodes with attempts =
// receiveCount, maxAttempts 0, lastReceiveAt zero, no reason and no message
// id (recover reads the id from the body and rewrites the record as the
// current version).
const (
	metaV1 = 1
	metaV2 = 2
	metaV3 = 3
)

func encodeMeta(m *msg) []byte {
	x := m.extra()
	id := m.id()
	b := make([]byte, 0, 64+len(id)+len(x.groupID)+len(x.dedupID)+len(x.deadLetterSource)+len(x.failureReason))
	b = append(b, metaV3, byte(m.state))
	b = binary.AppendVarint(b, m.visibleAt)
	b = binary.AppendUvarint(b, m.lease)
	b = binary.AppendUvarint(b, uint64(m.receiveCount))
	b = binary.AppendVarint(b, x.firstReceiveAt)
	b = binary.AppendVarint(b, m.sentAt)
	b = binary.AppendVarint(b, int64(m.priority))
	b = binary.AppendUvarint(b, x.seq)
	b = binary.AppendUvarint(b, uint64(m.size))
	b = appendStr(b, x.groupID)
	b = appendStr(b, x.dedupID)
	b = appendStr(b, x.deadLetterSource)
	b = binary.AppendUvarint(b, uint64(m.attempts))
	b = binary.AppendUvarint(b, uint64(m.maxAttempts))
	b = binary.AppendVarint(b, x.lastReceiveAt)
	b = appendStr(b, x.failureReason)
	b = appendStr(b, id)
	b = binary.AppendVarint(b, x.expiresAt)
	if h := x.failures; h != nil {
		b = binary.AppendUvarint(b, uint64(h.count))
		b = binary.AppendUvarint(b, uint64(len(h.list)))
		for _, f := range h.list {
			b = binary.AppendVarint(b, f.at)
			b = appendStr(b, f.reason.Value())
		}
	}
	return b
}

// decodeMeta decodes a metadata record of version 1, 2 or 3. It copies no
// string it does not keep, and allocates the extra fields only when the
// record sets one (a plain queued message decodes into one allocation).
func decodeMeta(key uint64, b []byte) (*msg, error) {
	if len(b) < 2 || b[0] < metaV1 || b[0] > metaV3 {
		return nil, errCorrupt
	}
	d := decoder{b: b[2:]}
	m := &msg{key: key, state: msgState(b[1]), pos: -1, agePos: -1}
	switch m.state {
	case stateReady, stateDelayed, stateInflight, stateBackoff:
	default:
		return nil, errCorrupt
	}
	m.visibleAt = d.varint()
	m.lease = d.uvarint()
	m.receiveCount = int32(d.uvarint())
	first := d.varint()
	m.sentAt = d.varint()
	m.priority = int32(d.varint())
	m.setSeq(d.uvarint())
	m.size = int32(d.uvarint())
	m.setGroupID(d.str())
	m.setDedupID(d.str())
	m.setDeadLetterSource(d.str())
	var last int64
	if b[0] == metaV1 {
		m.attempts = m.receiveCount
	} else {
		m.attempts = int32(d.uvarint())
		m.maxAttempts = int32(d.uvarint())
		last = d.varint()
		m.setFailureReason(d.str())
		m.setIDBytes(d.bytes())
		if b[0] == metaV3 {
			m.setExpiresAt(d.varint())
			if d.err == nil && len(d.b) > 0 {
				d.failures(m)
			}
		}
	}
	m.setReceiveTimes(first, last)
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// Body record format, version 1:
//
//	ver(1) messageID(str) body(str) senderID(str) attrs systemAttrs
//
// where attrs is uvarint count + (name, dataType, stringValue, binaryValue) strs.
const bodyV1 = 1

func encodeBody(id string, e *model.SendEntry) []byte {
	n := 16 + len(id) + len(e.Body) + len(e.SenderID)
	for k, a := range e.Attributes {
		n += 16 + len(k) + len(a.DataType) + len(a.StringValue) + len(a.BinaryValue)
	}
	for k, a := range e.SystemAttributes {
		n += 16 + len(k) + len(a.DataType) + len(a.StringValue) + len(a.BinaryValue)
	}
	b := make([]byte, 0, n)
	b = append(b, bodyV1)
	b = appendStr(b, id)
	b = appendStr(b, e.Body)
	b = appendStr(b, e.SenderID)
	b = appendAttrs(b, e.Attributes)
	b = appendAttrs(b, e.SystemAttributes)
	return b
}

// decodeBody fills the body part of msg.
func decodeBody(b []byte, out *model.Message) error {
	if len(b) < 1 || b[0] != bodyV1 {
		return errCorrupt
	}
	d := decoder{b: b[1:]}
	out.ID = d.str()
	out.Body = d.str()
	out.SenderID = d.str()
	out.Attributes = d.attrs()
	out.SystemAttributes = d.attrs()
	return d.err
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendAttrs(b []byte, attrs map[string]model.MessageAttribute) []byte {
	b = binary.AppendUvarint(b, uint64(len(attrs)))
	for k, a := range attrs {
		b = appendStr(b, k)
		b = appendStr(b, a.DataType)
		b = appendStr(b, a.StringValue)
		b = binary.AppendUvarint(b, uint64(len(a.BinaryValue)))
		b = append(b, a.BinaryValue...)
	}
	return b
}

// failures reads a metadata record's failure history into m.
func (d *decoder) failures(m *msg) {
	count, n := d.uvarint(), d.uvarint()
	if d.err == nil && (count == 0 || n > model.MaxFailures || n > count || count > math.MaxInt32) {
		d.err = errCorrupt
	}
	if d.err != nil {
		return
	}
	h := &failures{count: int32(count), list: make([]failure, n)}
	for i := range h.list {
		h.list[i].at = d.varint()
		h.list[i].reason = unique.Make(d.str())
	}
	m.ext().failures = h
}

// decoder reads the fields above, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.err = errCorrupt
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// str reads a string; an empty one allocates nothing.
func (d *decoder) str() string {
	v := d.bytes()
	if len(v) == 0 {
		return ""
	}
	return string(v)
}

func (d *decoder) attrs() map[string]model.MessageAttribute {
	n := d.uvarint()
	if d.err != nil || n == 0 {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	m := make(map[string]model.MessageAttribute, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.str()
		a := model.MessageAttribute{DataType: d.str(), StringValue: d.str()}
		if bv := d.bytes(); len(bv) > 0 {
			a.BinaryValue = append([]byte(nil), bv...)
		}
		m[k] = a
	}
	return m
}

// deleteMessageRecords deletes a message's metadata and body records. The
// body record is written once, under a key never reused, and never changed
// (a move writes a new key), so it is deleted with a single delete: when the
// set and the single delete meet in a flush or a compaction both vanish,
// whereas a delete's tombstone is carried down the levels. A message sent
// and deleted within one memtable's life thus leaves no body bytes in any
// table file. (Were a body key ever set twice, a single delete would
// uncover the older value: a body without metadata, which nothing indexes
// or delivers and a purge or the queue's deletion removes: space, never a
// message.)
// The metadata record is rewritten by every receive, so it takes an
// ordinary delete.
func deleteMessageRecords(batch *pebble.Batch, qid, key uint64) {
	_ = batch.Delete(msgKey(qid, kindMeta, key), nil)
	_ = batch.SingleDelete(msgKey(qid, kindBody, key), nil)
}
