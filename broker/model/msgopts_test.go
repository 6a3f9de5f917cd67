package model

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseMessageOptions(t *testing.T) {
	t.Parallel()
	std := QueueConfig{}
	redriven := QueueConfig{Redrive: &RedrivePolicy{DeadLetterQueue: "dlq", MaxReceiveCount: 3}}
	fifo := QueueConfig{Fifo: true, Redrive: redriven.Redrive}
	num := func(v string) MessageAttribute { return MessageAttribute{DataType: "Number", StringValue: v} }
	str := func(v string) MessageAttribute { return MessageAttribute{DataType: "String", StringValue: v} }
	for _, c := range []struct {
		name  string
		c     QueueConfig
		attrs map[string]MessageAttribute
		want  MessageOptions
	}{
		{"none", std, nil, MessageOptions{}},
		{"other attributes only", std, map[string]MessageAttribute{"x": str("1"), "Sluice": str("not a Sluice.* name"), "SluiceX": str("nor this")}, MessageOptions{}},
		{"priority", std, map[string]MessageAttribute{MsgAttrPriority: num("42")}, MessageOptions{Priority: 42}},
		{"priority bounds", std, map[string]MessageAttribute{MsgAttrPriority: num("-100")}, MessageOptions{Priority: -100}},
		{"priority spelt freely", std, map[string]MessageAttribute{MsgAttrPriority: {DataType: "Number.level", StringValue: "+07"}}, MessageOptions{Priority: 7}},
		{"max attempts", redriven, map[string]MessageAttribute{MsgAttrMaxAttempts: num("1000")}, MessageOptions{MaxAttempts: 1000}},
		{"both", redriven, map[string]MessageAttribute{MsgAttrMaxAttempts: num("1"), MsgAttrPriority: num("100")}, MessageOptions{Priority: 100, MaxAttempts: 1}},
		{"correlation id", std, map[string]MessageAttribute{MsgAttrCorrelationID: {DataType: "String.x", StringValue: strings.Repeat("c", MaxCorrelationIDBytes)}}, MessageOptions{}},
		{"FIFO max attempts", fifo, map[string]MessageAttribute{MsgAttrMaxAttempts: num("2")}, MessageOptions{MaxAttempts: 2}},
		{"traceparent is not a Sluice option", std, map[string]MessageAttribute{MsgAttrTraceParent: str("00-x-y-01")}, MessageOptions{}},
	} {
		got, err := ParseMessageOptions(c.c, c.attrs)
		if err != nil || got != c.want {
			t.Errorf("%s: ParseMessageOptions = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name  string
		c     QueueConfig
		attrs map[string]MessageAttribute
	}{
		{"unknown Sluice name", std, map[string]MessageAttribute{"Sluice.Unknown": str("x")}},
		{"Sluice name in another case", std, map[string]MessageAttribute{"sluice.priority": num("1")}},
		{"SLUICE prefix", std, map[string]MessageAttribute{"SLUICE.Priority": num("1")}},
		{"priority as a String", std, map[string]MessageAttribute{MsgAttrPriority: str("1")}},
		{"priority as Binary", std, map[string]MessageAttribute{MsgAttrPriority: {DataType: "Binary", BinaryValue: []byte{1}}}},
		{"priority too high", std, map[string]MessageAttribute{MsgAttrPriority: num("101")}},
		{"priority too low", std, map[string]MessageAttribute{MsgAttrPriority: num("-101")}},
		{"priority not an integer", std, map[string]MessageAttribute{MsgAttrPriority: num("1.5")}},
		{"priority in exponent form", std, map[string]MessageAttribute{MsgAttrPriority: num("1e1")}},
		{"priority on FIFO", fifo, map[string]MessageAttribute{MsgAttrPriority: num("0")}},
		{"max attempts without a RedrivePolicy", std, map[string]MessageAttribute{MsgAttrMaxAttempts: num("3")}},
		{"max attempts 0", redriven, map[string]MessageAttribute{MsgAttrMaxAttempts: num("0")}},
		{"max attempts 1001", redriven, map[string]MessageAttribute{MsgAttrMaxAttempts: num("1001")}},
		{"max attempts as a String", redriven, map[string]MessageAttribute{MsgAttrMaxAttempts: str("3")}},
		{"correlation id as a Number", std, map[string]MessageAttribute{MsgAttrCorrelationID: num("3")}},
		{"correlation id too long", std, map[string]MessageAttribute{MsgAttrCorrelationID: str(strings.Repeat("c", MaxCorrelationIDBytes+1))}},
	} {
		if _, err := ParseMessageOptions(c.c, c.attrs); !errors.Is(err, ErrInvalidParameterValue) {
			t.Errorf("%s: ParseMessageOptions = %v, want ErrInvalidParameterValue", c.name, err)
		}
	}
}

func TestDepthErrorText(t *testing.T) {
	t.Parallel()
	msg := (&DepthError{Queue: "orders", Depth: 99, Limit: 100}).Error()
	for _, want := range []string{"orders", "full", "99", "MaxDepth", "100"} {
		if !strings.Contains(msg, want) {
			t.Errorf("DepthError text %q lacks %q", msg, want)
		}
	}
	msg = (&DepthError{Queue: "orders", Depth: 50, Limit: 50, LowPriority: true}).Error()
	if !strings.Contains(msg, "LowPriorityMaxDepth") || !strings.Contains(msg, "50") {
		t.Errorf("low-priority DepthError text %q", msg)
	}
}

func TestCutReason(t *testing.T) {
	t.Parallel()
	if got := CutReason("short"); got != "short" {
		t.Errorf("CutReason(short) = %q", got)
	}
	exact := strings.Repeat("a", MaxReasonBytes)
	if got := CutReason(exact); got != exact {
		t.Error("a reason of exactly MaxReasonBytes was cut")
	}
	if got := CutReason(exact + "b"); got != exact {
		t.Errorf("CutReason of %d bytes = %d bytes", MaxReasonBytes+1, len(got))
	}
	// A multi-byte character across the boundary is dropped whole.
	for _, r := range []string{"é", "€", "😀"} {
		s := strings.Repeat("a", MaxReasonBytes-1) + r
		got := CutReason(s)
		if !utf8.ValidString(got) || len(got) > MaxReasonBytes || !strings.HasPrefix(s, got) || len(got) < MaxReasonBytes-3 {
			t.Errorf("CutReason(… + %q) = %d bytes, valid UTF-8 %v", r, len(got), utf8.ValidString(got))
		}
	}
	if got := CutReason(strings.Repeat("😀", MaxReasonBytes)); len(got) != MaxReasonBytes || !utf8.ValidString(got) {
		t.Errorf("CutReason of 4-byte runes = %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}

func TestBrowseFilterMatch(t *testing.T) {
	t.Parallel()
	m := &Message{
		Attributes: map[string]MessageAttribute{
			"kind": {DataType: "String", StringValue: "order"},
			"n":    {DataType: "Number", StringValue: "5"},
			"blob": {DataType: "Binary", BinaryValue: []byte("order")},
		},
		FailureReason: "timeout talking to the db",
	}
	for _, c := range []struct {
		f    BrowseFilter
		want bool
	}{
		{BrowseFilter{}, true},
		{BrowseFilter{Attribute: "kind"}, true},
		{BrowseFilter{Attribute: "kind", Value: "order"}, true},
		{BrowseFilter{Attribute: "kind", Value: "Order"}, false},
		{BrowseFilter{Attribute: "kind", Value: "ord"}, false},
		{BrowseFilter{Attribute: "n", Value: "5"}, true},
		{BrowseFilter{Attribute: "blob"}, true},
		{BrowseFilter{Attribute: "blob", Value: "order"}, false}, // a binary value never equals a string
		{BrowseFilter{Attribute: "missing"}, false},
		{BrowseFilter{Value: "order"}, true}, // a value without a name filters nothing
		{BrowseFilter{Reason: "timeout"}, true},
		{BrowseFilter{Reason: "the db"}, true},
		{BrowseFilter{Reason: "Timeout"}, false},
		{BrowseFilter{Reason: "json"}, false},
		{BrowseFilter{Attribute: "kind", Value: "order", Reason: "db"}, true},
		{BrowseFilter{Attribute: "kind", Value: "order", Reason: "json"}, false},
		{BrowseFilter{Attribute: "kind", Value: "other", Reason: "db"}, false},
	} {
		if got := c.f.Match(m); got != c.want {
			t.Errorf("%+v.Match = %v, want %v", c.f, got, c.want)
		}
	}
	// A message that never failed matches no reason filter.
	if (BrowseFilter{Reason: "x"}).Match(&Message{}) {
		t.Error("a message without a failure matches a reason filter")
	}
	if !(BrowseFilter{}).Match(&Message{}) {
		t.Error("the zero filter does not match a bare message")
	}
}
