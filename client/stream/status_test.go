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
	pub, err := e.c.Publisher(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
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
