package brokertest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// The receipt tests check that receipt handles are signed with the store's
// key (model.ReceiptCodec): a handle can be neither forged, nor altered,
// nor used on another queue, and the key survives a restart.
var receiptTests = []testCase{
	{"ForgedHandle", testReceiptForged},
	{"AlteredHandle", testReceiptAltered},
	{"OtherQueueHandle", testReceiptOtherQueue},
	{"KeySurvivesRestart", testReceiptKeySurvivesRestart},
}

// wantHandleRefused checks that handle neither deletes nor changes a
// message of queue: the queue's counts stay as they were.
func (e *env) wantHandleRefused(queue, what, handle string) {
	e.t.Helper()
	st := e.stats(queue)
	wantErr(e.t, "Delete with "+what, e.deleteErr(queue, handle), model.ErrReceiptHandleInvalid)
	wantErr(e.t, "ChangeVisibility with "+what, e.changeVisErr(queue, handle, 0), model.ErrReceiptHandleInvalid)
	e.wantStats(queue, st.Visible, st.InFlight, st.Delayed)
}

// rawHandle returns the bytes of a handle.
func rawHandle(t *testing.T, h string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		t.Fatalf("handle %q is not base64url: %v", h, err)
	}
	return b
}

// testReceiptForged: a handle with the fields of a real lease and a random
// MAC is refused.
func testReceiptForged(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	d := e.receiveOne("q")
	raw := rawHandle(t, d.Receipt)
	if len(raw) < 17 {
		t.Fatalf("handle %q has %d bytes: no room for a 16-byte MAC", d.Receipt, len(raw))
	}
	_, _ = rand.Read(raw[len(raw)-16:])
	e.wantHandleRefused("q", "a forged handle", base64.RawURLEncoding.EncodeToString(raw))
	e.mustDelete("q", d.Receipt)
}

// testReceiptAltered: a real handle with one field changed and encoded
// again without the key (the MAC kept) is refused; so is the handle of the
// next lease of the message, made the same way, which would otherwise fence
// the lease the real holder has.
func testReceiptAltered(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	e.sendBody("q", "b")
	d := e.receiveOne("q")
	d2 := e.receiveOne("q")
	r, err := e.be.Receipts().Decode(d.Receipt)
	if err != nil {
		t.Fatalf("the backend's own handle does not decode: %v", err)
	}
	raw := rawHandle(t, d.Receipt)
	mac := raw[len(raw)-16:]
	enc := func(r model.Receipt) string {
		b := []byte{raw[0]}
		for _, v := range []uint64{r.QueueID, r.Key, r.Lease} {
			b = binary.AppendUvarint(b, v)
		}
		return base64.RawURLEncoding.EncodeToString(append(b, mac...))
	}
	if enc(r) != d.Receipt {
		t.Fatalf("re-encoding the handle's own fields gave %q, not %q: the test's layout is wrong", enc(r), d.Receipt)
	}
	for what, alt := range map[string]model.Receipt{
		"the next lease":   {QueueID: r.QueueID, Key: r.Key, Lease: r.Lease + 1},
		"another message":  {QueueID: r.QueueID, Key: r.Key + 1, Lease: r.Lease},
		"another queue id": {QueueID: r.QueueID + 1, Key: r.Key, Lease: r.Lease},
		"an earlier lease": {QueueID: r.QueueID, Key: r.Key, Lease: r.Lease - 1},
	} {
		e.wantHandleRefused("q", "a handle altered to "+what, enc(alt))
	}
	e.wantStats("q", 0, 2, 0)
	e.mustDelete("q", d.Receipt)
	e.mustDelete("q", d2.Receipt)
}

// testReceiptOtherQueue: the handle of a lease on queue A is refused on
// queue B, and changes nothing on either.
func testReceiptOtherQueue(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("a", nil)
	e.createQueue("b", nil)
	e.sendBody("a", "x")
	e.sendBody("b", "y")
	da := e.receiveOne("a")
	e.receiveOne("b")
	e.wantHandleRefused("b", "a handle of queue a", da.Receipt)
	e.wantStats("a", 0, 1, 0)
	e.mustDelete("a", da.Receipt)
	e.wantStats("a", 0, 0, 0)
}

// testReceiptKeySurvivesRestart: handles issued before a restart still
// delete and change their leases after it, and the backend signs alike.
func testReceiptKeySurvivesRestart(t *testing.T, s suite) {
	e := s.setup(t)
	e.requireReopen()
	e.createQueue("q", nil)
	e.sendBody("q", "a")
	e.sendBody("q", "b")
	d1 := e.receiveOneFor("q", time.Hour)
	d2 := e.receiveOneFor("q", time.Hour)
	probe := model.Receipt{QueueID: 1, Key: 2, Lease: 3}
	before := e.be.Receipts().Encode(probe)
	e.reopen()
	if after := e.be.Receipts().Encode(probe); after != before {
		t.Fatalf("the reopened backend signs %v as %q, before the restart %q: the key was not kept", probe, after, before)
	}
	e.mustChangeVis("q", d1.Receipt, 2*time.Hour)
	e.mustDelete("q", d2.Receipt)
	e.mustDelete("q", d1.Receipt)
	e.wantStats("q", 0, 0, 0)
}
