package embedded

import (
	"unique"

	"github.com/sluicemq/sluice/broker/model"
)

// msgID is a message id as the index keeps it: the 16 bytes of a canonical
// lowercase UUID (the form model.NewMessageID makes, 8-4-4-4-12 hex digits),
// which saves the index 48 bytes per message over a string. An id of another
// form (none is made today) is kept whole in the message's msgExtra.
type msgID [16]byte

// uuidHexAt are the positions of the 16 pairs of hex digits in a canonical
// UUID; the dashes sit at 8, 13, 18 and 23.
var uuidHexAt = [16]uint8{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// hexVal is the value of a lowercase hex digit, 0xff for any other byte.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// parseMsgID packs a canonical lowercase UUID; ok is false for any other id
// (upper case would not format back the same). It runs once per message on
// restart, so it decodes with a table rather than encoding/hex.
func parseMsgID[S string | []byte](s S) (id msgID, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	var bad byte
	for i, at := range uuidHexAt {
		hi, lo := hexVal[s[at]], hexVal[s[at+1]]
		bad |= hi | lo
		id[i] = hi<<4 | lo
	}
	if bad&0xf0 != 0 {
		return msgID{}, false
	}
	return id, true
}

// String formats the id as parseMsgID read it.
func (id msgID) String() string { return model.FormatUUID(id) }

// msgExtra holds the fields of an index entry that most queued messages
// never set (FIFO, receive, dead-letter and failure facts): an entry points
// to one only once one of them is set, which keeps the common entry small
// (docs/performance.md). Guarded by Backend.mu, as msg.
type msgExtra struct {
	firstReceiveAt int64  // Unix ns; 0 = never received
	lastReceiveAt  int64  // Unix ns; 0 = never received
	seq            uint64 // FIFO sequence number (0 on standard queues)
	groupID        string
	dedupID        string
	// deadLetterSource is the name of the queue the message was dead-lettered from.
	deadLetterSource string
	failureReason    string
	// failures is the message's failure history (nil: it never failed),
	// behind a pointer so that it costs the others one word.
	failures *failures
	// id is the message id when it is not a canonical UUID (msgID).
	id string
	// expiresAt is when the message's time to live passes (Unix ns; 0 =
	// none: ttl.go).
	expiresAt int64
	// ttlPos is the message's index in queue.ttl plus one; 0 when it is not
	// there.
	ttlPos int32
}

// ext returns m's extra fields, allocating them on first use.
func (m *msg) ext() *msgExtra {
	if m.x == nil {
		m.x = &msgExtra{}
	}
	return m.x
}

// noExtra is what a nil msg.x reads as.
var noExtra msgExtra

// extra returns m's extra fields for reading (zero when none was set).
func (m *msg) extra() *msgExtra {
	if m.x == nil {
		return &noExtra
	}
	return m.x
}

func (m *msg) groupID() string          { return m.extra().groupID }
func (m *msg) dedupID() string          { return m.extra().dedupID }
func (m *msg) deadLetterSource() string { return m.extra().deadLetterSource }
func (m *msg) failureReason() string    { return m.extra().failureReason }
func (m *msg) firstReceiveAt() int64    { return m.extra().firstReceiveAt }
func (m *msg) lastReceiveAt() int64     { return m.extra().lastReceiveAt }
func (m *msg) seq() uint64              { return m.extra().seq }
func (m *msg) expiresAt() int64         { return m.extra().expiresAt }

// The setters below allocate the extra fields only for a value that is not
// zero.

func (m *msg) setGroupID(s string) {
	if s != "" || m.x != nil {
		m.ext().groupID = s
	}
}

func (m *msg) setDedupID(s string) {
	if s != "" || m.x != nil {
		m.ext().dedupID = s
	}
}

func (m *msg) setDeadLetterSource(s string) {
	if s != "" || m.x != nil {
		m.ext().deadLetterSource = s
	}
}

func (m *msg) setFailureReason(s string) {
	if s != "" || m.x != nil {
		m.ext().failureReason = s
	}
}

// failures is a message's failure history: its last model.MaxFailures
// failures, oldest first, and the count of all of them.
type failures struct {
	count int32
	list  []failure
}

// failure is one entry of a message's failure history: its instant (Unix
// ns, from the injected clock) and reason. The reason is interned: a
// history keeps up to model.MaxFailures reasons of up to 1 KiB per message,
// in memory for every queued message, and when many messages fail they
// mostly fail alike (a downstream down, "lease expired"), so equal reasons
// share one copy and an entry costs 16 bytes.
type failure struct {
	at     int64
	reason unique.Handle[string]
}

// addFailure sets m's failure reason and records the failure at at in its
// history. The history is copied, not changed in place: a dead letter's
// copy of a message (moveLocked) shares it.
func (m *msg) addFailure(reason string, at int64) {
	m.setFailureReason(reason)
	x := m.ext()
	h := failures{count: 1}
	if x.failures != nil {
		h.count, h.list = x.failures.count+1, x.failures.list
	}
	h.list = model.AddFailure(h.list, failure{at: at, reason: unique.Make(reason)})
	x.failures = &h
}

// failureHistory is m's failure history as model values, and the count of
// its failures.
func (m *msg) failureHistory() ([]model.Failure, int) {
	h := m.extra().failures
	if h == nil {
		return nil, 0
	}
	l := make([]model.Failure, len(h.list))
	for i, f := range h.list {
		l[i] = model.Failure{Reason: f.reason.Value(), At: fromNanos(f.at)}
	}
	return l, int(h.count)
}

func (m *msg) setExpiresAt(v int64) {
	if v != 0 || m.x != nil {
		m.ext().expiresAt = v
	}
}

func (m *msg) setSeq(v uint64) {
	if v != 0 || m.x != nil {
		m.ext().seq = v
	}
}

func (m *msg) setReceiveTimes(first, last int64) {
	if first != 0 || last != 0 || m.x != nil {
		x := m.ext()
		x.firstReceiveAt, x.lastReceiveAt = first, last
	}
}

// setIDBytes is setID of a decoded record's bytes (no copy for a UUID).
func (m *msg) setIDBytes(b []byte) {
	if u, ok := parseMsgID(b); ok && u != (msgID{}) {
		m.uuid = u
		return
	}
	m.setID(string(b))
}

// id is the message id.
func (m *msg) id() string {
	if m.x != nil && m.x.id != "" {
		return m.x.id
	}
	if m.uuid == (msgID{}) {
		return ""
	}
	return m.uuid.String()
}

// setID sets the message id.
func (m *msg) setID(s string) {
	if u, ok := parseMsgID(s); ok && u != (msgID{}) {
		m.uuid = u
		if m.x != nil {
			m.x.id = ""
		}
		return
	}
	m.uuid = msgID{}
	if s != "" || m.x != nil {
		m.ext().id = s
	}
}
