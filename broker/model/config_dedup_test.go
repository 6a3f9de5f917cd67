package model

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDedupAttributes(t *testing.T) {
	t.Parallel()
	// Unset: the defaults, and nothing in All.
	plain, err := ParseAttributes("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.DedupWindowOf() != 5*time.Minute || plain.DedupUntilSettled() {
		t.Fatalf("defaults: window %v, settled %v", plain.DedupWindowOf(), plain.DedupUntilSettled())
	}
	for _, name := range []string{AttrDeduplicationWindowSeconds, AttrDeduplicationUntil} {
		if _, ok := plain.Attributes()[name]; ok {
			t.Errorf("a plain queue's All lists %s", name)
		}
		if !IsSluiceAttribute(name) || !IsQueueAttributeName(name) {
			t.Errorf("%s is not a known attribute name", name)
		}
	}
	if SluiceAttributeDefault(AttrDeduplicationWindowSeconds) != "300" || SluiceAttributeDefault(AttrDeduplicationUntil) != "window" {
		t.Error("the defaults asked for by name")
	}

	c, err := ParseAttributes("q", map[string]string{AttrDeduplicationWindowSeconds: "86400", AttrDeduplicationUntil: "settled"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DedupWindowOf() != 24*time.Hour || !c.DedupUntilSettled() {
		t.Fatalf("parsed %+v", c)
	}
	a := c.Attributes()
	if a[AttrDeduplicationWindowSeconds] != "86400" || a[AttrDeduplicationUntil] != "settled" {
		t.Fatalf("All = %v", a)
	}
	if c.ConflictingAttribute("q", map[string]string{AttrDeduplicationWindowSeconds: "86400"}) != "" ||
		c.ConflictingAttribute("q", map[string]string{AttrDeduplicationWindowSeconds: "60"}) != AttrDeduplicationWindowSeconds {
		t.Error("ConflictingAttribute compares the window")
	}
	// Back to the defaults: unset again.
	c, err = ApplyAttributes(c, map[string]string{AttrDeduplicationWindowSeconds: "300", AttrDeduplicationUntil: "window"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{AttrDeduplicationWindowSeconds, AttrDeduplicationUntil} {
		if _, ok := c.Attributes()[name]; ok {
			t.Errorf("%s at its default is in All", name)
		}
	}
	c, err = ApplyAttributes(c, map[string]string{AttrDeduplicationWindowSeconds: "60"})
	if err != nil || c.DedupWindowOf() != time.Minute {
		t.Fatalf("the minimum: %v, %v", c.DedupWindowOf(), err)
	}

	for _, tc := range []struct {
		name  string
		attrs map[string]string
		says  string
	}{
		{"q", map[string]string{AttrDeduplicationWindowSeconds: "59"}, "between 60 and 86400"},
		{"q", map[string]string{AttrDeduplicationWindowSeconds: "86401"}, "between 60 and 86400"},
		{"q", map[string]string{AttrDeduplicationWindowSeconds: "0"}, "between 60 and 86400"},
		{"q", map[string]string{AttrDeduplicationWindowSeconds: "5m"}, "between 60 and 86400"},
		{"q", map[string]string{AttrDeduplicationUntil: "forever"}, "must be window or settled"},
		{"q", map[string]string{AttrDeduplicationUntil: "Settled"}, "must be window or settled"},
		{"q.fifo", map[string]string{AttrFifoQueue: "true", AttrDeduplicationWindowSeconds: "600"}, "standard queues only"},
		{"q.fifo", map[string]string{AttrFifoQueue: "true", AttrDeduplicationWindowSeconds: "300"}, "standard queues only"},
		{"q.fifo", map[string]string{AttrFifoQueue: "true", AttrDeduplicationUntil: "settled"}, "standard queues only"},
	} {
		_, err := ParseAttributes(tc.name, tc.attrs)
		if !errors.Is(err, ErrInvalidAttributeValue) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s %v: %v; want InvalidAttributeValue saying %q", tc.name, tc.attrs, err, tc.says)
		}
	}
	// A FIFO queue keeps SQS's rule: DeduplicationUntil=window is its only
	// rule, accepted and not listed; its window is 5 minutes.
	f, err := ParseAttributes("q.fifo", map[string]string{AttrFifoQueue: "true", AttrDeduplicationUntil: "window"})
	if err != nil || f.DedupUntilSettled() || f.DedupWindowOf() != DedupWindow {
		t.Fatalf("FIFO with window: %+v, %v", f, err)
	}
	if _, ok := f.Attributes()[AttrDeduplicationUntil]; ok {
		t.Error("a FIFO queue lists DeduplicationUntil")
	}
}
