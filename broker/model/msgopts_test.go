package model

import (
	"strings"
	"testing"
	"unicode/utf8"
)

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
