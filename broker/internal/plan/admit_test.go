package plan

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

func TestAdmitSend(t *testing.T) {
	t.Parallel()
	none := model.QueueConfig{}
	max := model.QueueConfig{MaxDepth: 10}
	both := model.QueueConfig{MaxDepth: 10, LowPriorityMaxDepth: 6}
	lowOnly := model.QueueConfig{LowPriorityMaxDepth: 6}
	for _, c := range []struct {
		c         model.QueueConfig
		depth     int64
		n, low    int
		want      *model.DepthError // nil: admitted
		wantCount string
	}{
		{none, 1 << 40, 10, 10, nil, ""},
		{max, 0, 10, 0, nil, ""},
		{max, 9, 1, 0, nil, ""},
		{max, 9, 2, 0, &model.DepthError{Queue: "q", Depth: 9, Limit: 10}, "max_depth"},
		{max, 10, 1, 0, &model.DepthError{Queue: "q", Depth: 10, Limit: 10}, "max_depth"},
		{max, 12, 0, 0, nil, ""}, // nothing to store (every entry failed on its own)
		{max, 5, 10, 10, &model.DepthError{Queue: "q", Depth: 5, Limit: 10}, "max_depth"},
		{both, 5, 1, 1, nil, ""},
		{both, 5, 2, 1, &model.DepthError{Queue: "q", Depth: 5, Limit: 6, LowPriority: true}, "low_priority_max_depth"},
		{both, 6, 1, 0, nil, ""},
		{both, 6, 1, 1, &model.DepthError{Queue: "q", Depth: 6, Limit: 6, LowPriority: true}, "low_priority_max_depth"},
		{both, 9, 2, 1, &model.DepthError{Queue: "q", Depth: 9, Limit: 10}, "max_depth"}, // MaxDepth is named first
		{lowOnly, 100, 5, 0, nil, ""},
		{lowOnly, 5, 2, 1, &model.DepthError{Queue: "q", Depth: 5, Limit: 6, LowPriority: true}, "low_priority_max_depth"},
	} {
		err := AdmitSend(c.c, "q", c.depth, c.n, c.low)
		if c.want == nil {
			if err != nil {
				t.Errorf("AdmitSend(%+v, depth %d, n %d, low %d) = %v, want admitted", c.c, c.depth, c.n, c.low, err)
			}
			continue
		}
		var de *model.DepthError
		if !errors.As(err, &de) || *de != *c.want || !errors.Is(err, model.ErrThrottled) || de.Reason() != c.wantCount {
			t.Errorf("AdmitSend(%+v, depth %d, n %d, low %d) = %v, want %+v (%s)", c.c, c.depth, c.n, c.low, err, *c.want, c.wantCount)
		}
	}
}

// TestPlanSendDepth: PlanSend counts only the entries it will store, and
// the low-priority ones, against the depth.
func TestPlanSendDepth(t *testing.T) {
	t.Parallel()
	c := model.QueueConfig{MaxDepth: 3, LowPriorityMaxDepth: 2, MaxMessageSize: model.MaxMessageBytes, Retention: model.MaxRetention}
	prio := func(body, p string) model.SendEntry {
		return model.SendEntry{ID: body, Body: body, Attributes: map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number", StringValue: p}}}
	}
	// One valid entry, one refused: depth 2 + 1 stored fits MaxDepth 3.
	plans, err := sendParsed(c, "q", 2, []model.SendEntry{prio("ok", "0"), prio("bad", "500")})
	if err != nil || plans[0].Err != nil || plans[1].Err == nil {
		t.Fatalf("PlanSend = %+v, %v; want the valid entry planned, the other refused", plans, err)
	}
	if plans[0].Priority != 0 {
		t.Errorf("planned priority %d", plans[0].Priority)
	}
	// A low-priority entry past LowPriorityMaxDepth refuses the whole send.
	_, err = sendParsed(c, "q", 2, []model.SendEntry{prio("low", "-1")})
	var de *model.DepthError
	if !errors.As(err, &de) || !de.LowPriority {
		t.Fatalf("a low-priority send at LowPriorityMaxDepth: %v", err)
	}
	// A refused low-priority entry does not count as low.
	if _, err := sendParsed(c, "q", 2, []model.SendEntry{prio("ok", "1"), prio("low", "-1000")}); err != nil {
		t.Fatalf("a send whose only low-priority entry is refused on its own: %v", err)
	}
	plans, err = sendParsed(model.QueueConfig{MaxMessageSize: model.MaxMessageBytes, Retention: model.MaxRetention}, "q", 0, []model.SendEntry{prio("p", "-7")})
	if err != nil || plans[0].Priority != -7 {
		t.Fatalf("PlanSend priority: %+v, %v", plans, err)
	}
}
