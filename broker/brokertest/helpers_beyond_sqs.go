package brokertest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// Helpers of the Sluice cases (issue 8: retries, attempts, consumer
// controls, backpressure, pause, at-most-once, priorities, browsing).

// retryPolicy is a RetryPolicy attribute value.
func retryPolicy(base, max int, jitter string) string {
	return fmt.Sprintf(`{"baseSeconds":%d,"maxSeconds":%d,"jitter":%q}`, base, max, jitter)
}

// retrySchedule is a RetryPolicy attribute value of the schedule form.
func retrySchedule(jitter string, delays ...int) string {
	b, _ := json.Marshal(delays)
	return fmt.Sprintf(`{"delays":%s,"jitter":%q}`, b, jitter)
}

// numAttr is a Number message attribute.
func numAttr(n int) model.MessageAttribute {
	return model.MessageAttribute{DataType: "Number", StringValue: strconv.Itoa(n)}
}

// withPriority is a send entry of body with Sluice.Priority p.
func withPriority(body string, p int) model.SendEntry {
	return model.SendEntry{Body: body, Attributes: map[string]model.MessageAttribute{model.MsgAttrPriority: numAttr(p)}}
}

// changeLease applies one consumer control and returns its entry's error.
func (e *env) changeLease(queue string, le model.LeaseEntry) error {
	e.t.Helper()
	errs, err := e.b.ChangeLeases(e.ctx, queue, []model.LeaseEntry{le})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		e.t.Fatalf("ChangeLeases of 1 entry returned %d results", len(errs))
	}
	return errs[0]
}

func (e *env) mustChangeLease(queue string, le model.LeaseEntry) {
	e.t.Helper()
	if err := e.changeLease(queue, le); err != nil {
		e.t.Fatalf("ChangeLeases(kind %d, timeout %v, reason %q) on %s: %v", le.Kind, le.Timeout, le.Reason, queue, err)
	}
}

// nack nacks a lease with reason, after delay when delay is not nil.
func (e *env) nack(queue, receipt, reason string, delay *time.Duration) {
	e.t.Helper()
	e.mustChangeLease(queue, model.LeaseEntry{Receipt: receipt, Kind: model.Nack, Reason: reason, Delay: delay})
}

// snooze hands a lease back for d without counting an attempt (0: release).
func (e *env) snooze(queue, receipt string, d time.Duration) {
	e.t.Helper()
	e.mustChangeLease(queue, model.LeaseEntry{Receipt: receipt, Kind: model.Snooze, Timeout: d})
}

// wantCounts checks a delivery's attempts and receive count.
func wantCounts(t testing.TB, what string, d model.Delivery, attempts, receiveCount int) {
	t.Helper()
	if d.Attempts != attempts || d.ReceiveCount != receiveCount {
		t.Fatalf("%s: %q has Attempts %d, ReceiveCount %d; want %d, %d", what, d.Body, d.Attempts, d.ReceiveCount, attempts, receiveCount)
	}
}

// browseAll pages through a queue with req (its Limit per page) and
// returns every message, failing on an error or a page past its limit.
func (e *env) browseAll(queue string, req model.BrowseRequest) []model.BrowsedMessage {
	e.t.Helper()
	limit := req.Limit
	if limit == 0 {
		limit = 20
	}
	var out []model.BrowsedMessage
	for pages := 0; ; pages++ {
		if pages > 1000 {
			e.t.Fatalf("Browse(%s) still has a next page after 1000 pages", queue)
		}
		p, err := e.b.Browse(e.ctx, queue, req)
		if err != nil {
			e.t.Fatalf("Browse(%s, %+v): %v", queue, req, err)
		}
		if len(p.Messages) > limit {
			e.t.Fatalf("Browse(%s, limit %d) returned a page of %d", queue, limit, len(p.Messages))
		}
		out = append(out, p.Messages...)
		if p.Next == "" {
			return out
		}
		if p.Next == req.After {
			e.t.Fatalf("Browse(%s) returned the cursor it was given (%q): it would loop", queue, p.Next)
		}
		req.After = p.Next
	}
}

// browsed returns the browsed message id of queue (it must be there).
func (e *env) browsed(queue, id string) model.BrowsedMessage {
	e.t.Helper()
	for _, m := range e.browseAll(queue, model.BrowseRequest{Limit: model.MaxBrowse}) {
		if m.ID == id {
			return m
		}
	}
	e.t.Fatalf("Browse(%s) does not show message %s", queue, id)
	return model.BrowsedMessage{}
}

func browsedBodies(ms []model.BrowsedMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Body
	}
	return out
}
