package stream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testbroker"
)

// An ack on a consumer stream carries a result, kept with the completed
// record (a status by id shows it); past 64 KiB the settlement fails
// invalid_parameter and the message stays held.
func TestAckWithResult(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", map[string]string{model.AttrCompletedRetentionSeconds: "3600"})
	pub := e.publisher()
	defer pub.Close(e.ctx)
	res, err := pub.PublishAsync("jobs", &streampb.Envelope{Body: "render invoice 17"}).Wait(e.ctx)
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatal(err, res)
	}
	id := res[0].MessageID
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: 1})
	m, err := con.Receive(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = con.AckWithResult(e.ctx, m.GetReceipt(), strings.Repeat("x", model.MaxResultBytes+1))
	var se *stream.Error
	if !errors.As(err, &se) || se.Code != "invalid_parameter" {
		t.Fatalf("an ack with a result past 64 KiB: %v, want invalid_parameter", err)
	}
	st, found, err := e.b.Front.MessageStatus(e.ctx, "jobs", id)
	if err != nil || !found || st.State != model.JobInFlight {
		t.Fatalf("after the refused ack: %+v %v %v, want in flight", st, found, err)
	}
	if err := con.AckWithResult(e.ctx, m.GetReceipt(), `{"pdf": "invoices/17.pdf"}`); err != nil {
		t.Fatal(err)
	}
	st, found, err = e.b.Front.MessageStatus(e.ctx, "jobs", id)
	if err != nil || !found || st.State != model.JobCompleted || st.Result == nil || *st.Result != `{"pdf": "invoices/17.pdf"}` {
		t.Fatalf("after the ack: %+v %v %v, want completed with its result", st, found, err)
	}
}

// Acks with results as large as allowed, settled at once, go in frames
// under the broker's 4 MiB (a frame past it ended the stream), and a
// result past the broker's frame fails its ack alone.
func TestAckWithLargeResultsAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", map[string]string{model.AttrCompletedRetentionSeconds: "3600"})
	pub := e.publisher()
	defer pub.Close(e.ctx)
	const n = 100
	for i := 0; i < n; i++ {
		if res, err := pub.PublishAsync("jobs", &streampb.Envelope{Body: "job"}).Wait(e.ctx); err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: n})
	var receipts []string
	for len(receipts) < n {
		m, err := con.Receive(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, m.GetReceipt())
	}
	big := strings.Repeat("r", model.MaxResultBytes)
	errs := make(chan error, n)
	for _, r := range receipts[1:] {
		go func() { errs <- con.AckWithResult(e.ctx, r, big) }()
	}
	for range n - 1 {
		if err := <-errs; err != nil {
			t.Fatalf("an ack with a 64 KiB result among many: %v", err)
		}
	}
	err := con.AckWithResult(e.ctx, receipts[0], strings.Repeat("r", 5<<20))
	var se *stream.Error
	if !errors.As(err, &se) || se.Code != "invalid_parameter" {
		t.Fatalf("an ack with a 5 MiB result: %v, want invalid_parameter", err)
	}
	if err := con.Ack(e.ctx, receipts[0]); err != nil {
		t.Fatalf("the stream after the refused ack: %v", err)
	}
}
