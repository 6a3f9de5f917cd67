package stream

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/broker/model"
)

// FuzzFrames: whatever bytes a client sends as a frame, the conversions
// Sluice makes of it (a send's envelopes, a settle's settlements, an
// open's and a credit's values) answer a broker error, never panic, and
// what they accept is within the protocol's ranges.
func FuzzFrames(f *testing.F) {
	seeds := []proto.Message{
		&streampb.PublishRequest{Seq: 1, Queue: "q", Messages: []*streampb.Envelope{{Body: "b",
			Attributes: map[string]*streampb.Attribute{"a": {Type: "Binary", BinaryValue: []byte{1}}, "n": {Type: "Number", StringValue: "1"}},
			Priority:   proto.Int32(5), MaxAttempts: proto.Int32(3), DelaySeconds: proto.Int64(10), GroupId: "g", DedupId: "d"}}},
		&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Open{Open: &streampb.Open{Queue: "q", Credit: 10, LeaseSeconds: 30}}},
		&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Settle{Settle: &streampb.Settle{Seq: 2, Settlements: []*streampb.Settlement{
			{Receipt: "r", Action: &streampb.Settlement_Nack{Nack: &streampb.Nack{Reason: "x", DelaySeconds: proto.Uint32(5)}}},
			{Receipt: "r", Action: &streampb.Settlement_Extend{Extend: &streampb.Extend{Seconds: 60}}},
			{Receipt: "r", Action: &streampb.Settlement_DeadLetter{DeadLetter: &streampb.DeadLetter{Reason: "y"}}},
		}}}},
		&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Credit{Credit: &streampb.Credit{Credit: 1e9}}},
	}
	for _, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	brokerError := func(t *testing.T, what string, err error) {
		var be *model.Error
		if err != nil && !errors.As(err, &be) {
			t.Fatalf("%s: %T %v is no broker error", what, err, err)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var pub streampb.PublishRequest
		if proto.Unmarshal(b, &pub) == nil {
			for _, e := range pub.GetMessages() {
				entry, err := toSendEntry("messages[0]", e, now)
				brokerError(t, "envelope", err)
				if err == nil && (entry.Body != e.GetBody() || (entry.Delay != nil && *entry.Delay < 0)) {
					t.Fatalf("envelope %v became %+v", e, entry)
				}
			}
		}
		var req streampb.ConsumeRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		switch k := req.GetKind().(type) {
		case *streampb.ConsumeRequest_Open:
			n, err := creditOf(k.Open.GetCredit())
			brokerError(t, "open", err)
			if err == nil && (n < 0 || n > 10000) {
				t.Fatalf("credit %d accepted", n)
			}
		case *streampb.ConsumeRequest_Credit:
			_, err := creditOf(k.Credit.GetCredit())
			brokerError(t, "credit", err)
		case *streampb.ConsumeRequest_Settle:
			for _, st := range k.Settle.GetSettlements() {
				s, err := toSettlement(st)
				brokerError(t, "settlement", err)
				if err == nil && (s.Timeout < 0 || s.Timeout > model.MaxVisibilityTimeout || s.Receipt == "") {
					t.Fatalf("settlement %v became %+v", st, s)
				}
			}
		}
	})
}
