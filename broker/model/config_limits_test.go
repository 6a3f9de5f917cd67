package model

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestLimitAttributes: MaxInFlight and MaxReceivesPerSecond parse, render
// canonically, are listed only when set, unset with "", and refuse bad
// values with InvalidAttributeValue naming the attribute.
func TestLimitAttributes(t *testing.T) {
	t.Parallel()
	c, err := ParseAttributes("q", map[string]string{AttrMaxInFlight: " 50", AttrMaxReceivesPerSecond: "0.50"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxInFlight != 50 || c.ReceiveRate != 500_000 || !c.Limited() {
		t.Fatalf("parsed MaxInFlight %d, rate %d, limited %v", c.MaxInFlight, c.ReceiveRate, c.Limited())
	}
	a := c.Attributes()
	if a[AttrMaxInFlight] != "50" || a[AttrMaxReceivesPerSecond] != "0.5" {
		t.Errorf("Attributes: %q %q", a[AttrMaxInFlight], a[AttrMaxReceivesPerSecond])
	}
	if got := c.ConflictingAttribute("q", map[string]string{AttrMaxReceivesPerSecond: ".5", AttrMaxInFlight: "50"}); got != "" {
		t.Errorf("the same limits conflict on %s", got)
	}
	if got := c.ConflictingAttribute("q", map[string]string{AttrMaxReceivesPerSecond: "5"}); got != AttrMaxReceivesPerSecond {
		t.Errorf("another rate: conflict %q, want MaxReceivesPerSecond", got)
	}
	c, err = ApplyAttributes(c, map[string]string{AttrMaxInFlight: "", AttrMaxReceivesPerSecond: " "})
	if err != nil {
		t.Fatal(err)
	}
	a = c.Attributes()
	for _, n := range []string{AttrMaxInFlight, AttrMaxReceivesPerSecond} {
		if _, ok := a[n]; ok {
			t.Errorf("%s still listed after \"\": %q", n, a[n])
		}
	}
	if c.Limited() {
		t.Error("a queue without limits is Limited")
	}
	plain := DefaultQueueConfig(true).Attributes()
	for _, n := range []string{AttrMaxInFlight, AttrMaxReceivesPerSecond} {
		if _, ok := plain[n]; ok {
			t.Errorf("a plain queue lists %s", n)
		}
		if !IsSluiceAttribute(n) || !IsQueueAttributeName(n) || SluiceAttributeDefault(n) != "" {
			t.Errorf("%s is not a Sluice attribute with default \"\"", n)
		}
	}
	if _, err := ParseAttributes("q.fifo", map[string]string{AttrFifoQueue: "true", AttrMaxInFlight: "120000", AttrMaxReceivesPerSecond: "100000"}); err != nil {
		t.Errorf("the largest limits on a FIFO queue: %v", err)
	}
	for _, bad := range []map[string]string{
		{AttrMaxInFlight: "0"},
		{AttrMaxInFlight: "-1"},
		{AttrMaxInFlight: "120001"},
		{AttrMaxInFlight: "ten"},
		{AttrMaxInFlight: "1.5"},
		{AttrMaxInFlight: "5", AttrDeliveryMode: DeliveryAtMostOnce},
		{AttrMaxReceivesPerSecond: "0"},
		{AttrMaxReceivesPerSecond: "0.0000001"},
		{AttrMaxReceivesPerSecond: "-1"},
		{AttrMaxReceivesPerSecond: "-0.5"},
		{AttrMaxReceivesPerSecond: "+2"},
		{AttrMaxReceivesPerSecond: "100000.000001"},
		{AttrMaxReceivesPerSecond: "1e3"},
		{AttrMaxReceivesPerSecond: "0x10"},
		{AttrMaxReceivesPerSecond: "NaN"},
		{AttrMaxReceivesPerSecond: "Inf"},
		{AttrMaxReceivesPerSecond: "."},
		{AttrMaxReceivesPerSecond: "1,5"},
		{AttrMaxReceivesPerSecond: "20/s"},
	} {
		_, err := ParseAttributes("q", bad)
		if !errors.Is(err, ErrInvalidAttributeValue) {
			t.Errorf("%v: err %v, want InvalidAttributeValue", bad, err)
			continue
		}
		for n := range bad {
			if n != AttrDeliveryMode && !strings.Contains(err.Error(), n) {
				t.Errorf("%v: %q does not name %s", bad, err, n)
			}
		}
	}
}

// TestRate: a rate's rendering, interval (rounded up: never faster than
// the rate) and burst (one second's worth, at least one).
func TestRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		str      string
		interval time.Duration
		burst    int64
	}{
		{"0.5", "0.5", 2 * time.Second, 1},
		{"20", "20", 50 * time.Millisecond, 20},
		{"3", "3", 333_333_334, 3},
		{"1.25", "1.25", 800 * time.Millisecond, 1},
		{"0.000001", "0.000001", 1_000_000 * time.Second, 1},
		{"007.100", "7.1", 140_845_071, 7},
		{"100000", "100000", 10 * time.Microsecond, 100_000},
	} {
		r, err := ParseRate(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if r.String() != tc.str || r.Interval() != tc.interval || r.Burst() != tc.burst {
			t.Errorf("%s: %q, interval %v, burst %d; want %q, %v, %d", tc.in, r.String(), r.Interval(), r.Burst(), tc.str, tc.interval, tc.burst)
		}
	}
}
