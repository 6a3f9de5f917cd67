package embedded

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// metaRecord is what a metadata record stores of a msg, flattened so that
// two can be compared (the index fields pos, agePos and turn are memory only;
// the rare fields live behind msg.x).
type metaRecord struct {
	key, lease, seq                                     uint64
	visibleAt, sentAt, firstReceiveAt, lastReceiveAt    int64
	receiveCount, priority, size, attempts, maxAttempts int32
	state                                               msgState
	id, groupID, dedupID, deadLetterSource, failure     string
	expiresAt                                           int64
	history                                             string // the failure history, printed
}

func metaFields(m *msg) metaRecord {
	return metaRecord{key: m.key, lease: m.lease, seq: m.seq(),
		visibleAt: m.visibleAt, sentAt: m.sentAt, firstReceiveAt: m.firstReceiveAt(), lastReceiveAt: m.lastReceiveAt(),
		receiveCount: m.receiveCount, priority: m.priority, size: m.size, attempts: m.attempts, maxAttempts: m.maxAttempts,
		state: m.state, id: m.id(), groupID: m.groupID(), dedupID: m.dedupID(), deadLetterSource: m.deadLetterSource(), failure: m.failureReason(),
		expiresAt: m.expiresAt(), history: historyOf(m)}
}

// historyOf prints m's failure history ("" for none).
func historyOf(m *msg) string {
	h := m.extra().failures
	if h == nil {
		return ""
	}
	return fmt.Sprintf("%d %+v", h.count, h.list)
}

// testMsg builds an index entry with every field of a metadata record set.
func testMsg(state msgState, visibleAt int64, lease uint64, receiveCount int32, first, sent int64, priority int32, seq uint64, size int32,
	group, dedup, dlSource string, attempts, maxAttempts int32, last int64, reason, id string) *msg {
	m := &msg{key: 9, state: state, visibleAt: visibleAt, lease: lease, receiveCount: receiveCount, sentAt: sent,
		priority: priority, size: size, attempts: attempts, maxAttempts: maxAttempts, pos: -1, agePos: -1}
	m.setSeq(seq)
	m.setGroupID(group)
	m.setDedupID(dedup)
	m.setDeadLetterSource(dlSource)
	m.setFailureReason(reason)
	m.setIDBytes([]byte(id))
	m.setReceiveTimes(first, last)
	return m
}

// FuzzDecodeMeta: decoding arbitrary bytes as a metadata record never
// panics, and a record that decodes encodes (as version 2) to one that
// decodes to the same message.
func FuzzDecodeMeta(f *testing.F) {
	m := testMsg(stateInflight, 1e18, 3, 2, -5, 1, -1, 7, 100, "g", "d", "src", 2, 5, 4, "boom", "id")
	f.Add(encodeMeta(m))
	f.Add(encodeMeta(&msg{state: stateReady}))
	f.Add(encodeMeta(testMsg(stateReady, 1, 0, 0, 0, 1, 0, 0, 1, "", "", "", 0, 0, 0, "", "0f8fad5b-d9cb-469f-a165-70867728950e")))
	withHistory := testMsg(stateBackoff, 5, 1, 3, 1, 1, 0, 0, 4, "", "", "", 3, 0, 2, "", "h")
	withHistory.setExpiresAt(77)
	for i := range 12 {
		withHistory.addFailure(fmt.Sprint("fail ", i), int64(i))
	}
	f.Add(encodeMeta(withHistory))
	v1 := encodeMeta(m)
	v1[0] = metaV1
	f.Add(v1)
	f.Add([]byte{metaV2, byte(stateReady), 0x80}) // a truncated varint
	f.Add([]byte{metaV2, 0xff})                   // an unknown state
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeMeta(9, b)
		if err != nil {
			return
		}
		again, err := decodeMeta(9, encodeMeta(got))
		if err != nil {
			t.Fatalf("re-encoded record of %+v does not decode: %v", got, err)
		}
		if metaFields(again) != metaFields(got) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", metaFields(got), metaFields(again))
		}
	})
}

// FuzzDecodeBody: decoding arbitrary bytes as a body record never panics,
// and a record that decodes encodes to one that decodes to the same message.
func FuzzDecodeBody(f *testing.F) {
	e := &model.SendEntry{Body: "héllo", SenderID: "s",
		Attributes: map[string]model.MessageAttribute{
			"s": {DataType: "String", StringValue: "v"},
			"b": {DataType: "Binary.x", BinaryValue: []byte{0, 1, 2}},
		},
		SystemAttributes: map[string]model.MessageAttribute{"AWSTraceHeader": {DataType: "String", StringValue: "t"}}}
	f.Add(encodeBody("id", e))
	f.Add(encodeBody("", &model.SendEntry{Body: "x"}))
	f.Add([]byte{bodyV1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}) // a huge attribute count
	f.Add([]byte{bodyV1, 5, 'a'})                                // a string past the end
	f.Fuzz(func(t *testing.T, b []byte) {
		var got model.Message
		if err := decodeBody(b, &got); err != nil {
			return
		}
		re := encodeBody(got.ID, &model.SendEntry{Body: got.Body, SenderID: got.SenderID,
			Attributes: got.Attributes, SystemAttributes: got.SystemAttributes})
		var again model.Message
		if err := decodeBody(re, &again); err != nil {
			t.Fatalf("re-encoded record of %+v does not decode: %v", got, err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", got, again)
		}
	})
}

// TestMetaRoundTrip: every field of a metadata record survives encoding.
func TestMetaRoundTrip(t *testing.T) {
	t.Parallel()
	m := testMsg(stateBackoff, -1, 1<<62, 1<<30, 1, 2, 9, 3, 4, "g\x00", "\xff", "s", 6, 7, 8, "r", "i")
	got, err := decodeMeta(9, encodeMeta(m))
	if err != nil {
		t.Fatal(err)
	}
	if metaFields(got) != metaFields(m) {
		t.Fatalf("round trip:\n%+v\n%+v", metaFields(m), metaFields(got))
	}
}

// TestMetaFailures: a failure history survives encoding, bounded to the last
// model.MaxFailures with its count; a record written before histories
// existed (ending at expiresAt) decodes with none; a truncated or
// inconsistent history is corrupt.
func TestMetaFailures(t *testing.T) {
	t.Parallel()
	m := testMsg(stateBackoff, 1, 0, 12, 1, 2, 0, 0, 4, "", "", "", 12, 0, 8, "", "i")
	for i := range 12 {
		m.addFailure(string(rune('a'+i)), int64(100+i))
	}
	enc := encodeMeta(m)
	before, x := *m, *m.x // m as written before histories existed
	x.failures, before.x = nil, &x
	old := encodeMeta(&before)
	got, err := decodeMeta(9, enc)
	if err != nil {
		t.Fatal(err)
	}
	h, n := got.failureHistory()
	if n != 12 || len(h) != model.MaxFailures || h[0].Reason != "c" || h[0].At.UnixNano() != 102 || got.failureReason() != "l" || h[9].Reason != "l" {
		t.Fatalf("decoded history %+v (count %d, reason %q), want c…l of 12, reason l", h, n, got.failureReason())
	}
	if !bytes.Equal(enc[:len(old)], old) {
		t.Fatalf("the history is not a suffix of the record: %x, %x", enc, old)
	}
	if d, err := decodeMeta(9, old); err != nil || d.x.failures != nil {
		t.Fatalf("a record without a history decodes to %+v, %v", d.x, err)
	}
	for _, bad := range [][]byte{enc[:len(enc)-1], append(append([]byte{}, old...), 0, 0), append(append([]byte{}, old...), 1, 2)} {
		if _, err := decodeMeta(9, bad); !errors.Is(err, errCorrupt) {
			t.Errorf("decodeMeta(%x) = %v, want errCorrupt", bad, err)
		}
	}
}
