package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

// TestMessageOptions: a message's Sluice options as the front parses them
// (model.ParseMessageOptions) and the planner checks them against the queue
// (CheckOptions).
func TestMessageOptions(t *testing.T) {
	t.Parallel()
	std := model.QueueConfig{}
	redriven := model.QueueConfig{Redrive: &model.RedrivePolicy{DeadLetterQueue: "dlq", MaxReceiveCount: 3}}
	fifo := model.QueueConfig{Fifo: true, Redrive: redriven.Redrive}
	num := func(v string) model.MessageAttribute {
		return model.MessageAttribute{DataType: "Number", StringValue: v}
	}
	str := func(v string) model.MessageAttribute {
		return model.MessageAttribute{DataType: "String", StringValue: v}
	}
	for _, c := range []struct {
		name  string
		c     model.QueueConfig
		attrs map[string]model.MessageAttribute
		want  model.MessageOptions
	}{
		{"none", std, nil, model.MessageOptions{}},
		{"other attributes only", std, map[string]model.MessageAttribute{"x": str("1"), "Sluice": str("not a Sluice.* name"), "SluiceX": str("nor this")}, model.MessageOptions{}},
		{"priority", std, map[string]model.MessageAttribute{model.MsgAttrPriority: num("42")}, model.MessageOptions{Priority: 42}},
		{"priority bounds", std, map[string]model.MessageAttribute{model.MsgAttrPriority: num("-100")}, model.MessageOptions{Priority: -100}},
		{"priority spelt freely", std, map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Number.level", StringValue: "+07"}}, model.MessageOptions{Priority: 7}},
		{"max attempts", redriven, map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: num("1000")}, model.MessageOptions{MaxAttempts: 1000}},
		{"both", redriven, map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: num("1"), model.MsgAttrPriority: num("100")}, model.MessageOptions{Priority: 100, MaxAttempts: 1}},
		{"correlation id", std, map[string]model.MessageAttribute{model.MsgAttrCorrelationID: {DataType: "String.x", StringValue: strings.Repeat("c", model.MaxCorrelationIDBytes)}}, model.MessageOptions{}},
		{"FIFO max attempts", fifo, map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: num("2")}, model.MessageOptions{MaxAttempts: 2}},
		{"traceparent is not a Sluice option", std, map[string]model.MessageAttribute{model.MsgAttrTraceParent: str("00-x-y-01")}, model.MessageOptions{}},
	} {
		got, err := parseOptions(c.c, c.attrs)
		if err != nil || got != c.want {
			t.Errorf("%s: ParseMessageOptions = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		c     model.QueueConfig
		attrs map[string]model.MessageAttribute
	}{
		{"unknown Sluice name", std, map[string]model.MessageAttribute{"Sluice.Unknown": str("x")}},
		{"Sluice name in another case", std, map[string]model.MessageAttribute{"sluice.priority": num("1")}},
		{"SLUICE prefix", std, map[string]model.MessageAttribute{"SLUICE.Priority": num("1")}},
		{"priority as a String", std, map[string]model.MessageAttribute{model.MsgAttrPriority: str("1")}},
		{"priority as Binary", std, map[string]model.MessageAttribute{model.MsgAttrPriority: {DataType: "Binary", BinaryValue: []byte{1}}}},
		{"priority too high", std, map[string]model.MessageAttribute{model.MsgAttrPriority: num("101")}},
		{"priority too low", std, map[string]model.MessageAttribute{model.MsgAttrPriority: num("-101")}},
		{"priority not an integer", std, map[string]model.MessageAttribute{model.MsgAttrPriority: num("1.5")}},
		{"priority in exponent form", std, map[string]model.MessageAttribute{model.MsgAttrPriority: num("1e1")}},
		{"priority on FIFO", fifo, map[string]model.MessageAttribute{model.MsgAttrPriority: num("0")}},
		{"max attempts without a model.RedrivePolicy", std, map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: num("3")}},
		{"max attempts 0", redriven, map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: num("0")}},
		{"max attempts 1001", redriven, map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: num("1001")}},
		{"max attempts as a String", redriven, map[string]model.MessageAttribute{model.MsgAttrMaxAttempts: str("3")}},
		{"correlation id as a Number", std, map[string]model.MessageAttribute{model.MsgAttrCorrelationID: num("3")}},
		{"correlation id too long", std, map[string]model.MessageAttribute{model.MsgAttrCorrelationID: str(strings.Repeat("c", model.MaxCorrelationIDBytes+1))}},
	} {
		if _, err := parseOptions(c.c, c.attrs); !errors.Is(err, model.ErrInvalidParameterValue) {
			t.Errorf("%s: ParseMessageOptions = %v, want model.ErrInvalidParameterValue", c.name, err)
		}
	}
}

// parseOptions parses attrs as the front does and checks them against a
// queue with settings c as a send's planner does: the values, or the error.
func parseOptions(c model.QueueConfig, attrs map[string]model.MessageAttribute) (model.MessageOptions, error) {
	o := model.ParseMessageOptions(attrs)
	if err := CheckOptions(c, attrs, o); err != nil {
		return model.MessageOptions{}, err
	}
	return model.MessageOptions{Priority: o.Priority, MaxAttempts: o.MaxAttempts}, nil
}
