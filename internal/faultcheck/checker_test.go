package faultcheck

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// rules returns the rules of the violations, in order.
func rules(vs []Violation) string {
	var r []string
	for _, v := range vs {
		r = append(r, v.Rule)
	}
	return strings.Join(r, ",")
}

func TestBody(t *testing.T) {
	b := Body("s-1")
	if k, ok := Key(b); !ok || k != "s-1" {
		t.Fatalf("Key(Body) = %q, %v", k, ok)
	}
	if _, ok := Key(strings.Replace(b, "x", "y", 1)); ok {
		t.Fatal("a changed body verified")
	}
	if _, ok := Key("s-1"); ok {
		t.Fatal("a bare key verified")
	}
}

// Each rule fires on a crafted history, and a clean history (with lost
// answers of every kind) has no violation.
func TestRules(t *testing.T) {
	const vis = 10 * time.Second
	cases := []struct {
		name string
		run  func(c *Checker)
		want string
	}{
		{"clean", func(c *Checker) {
			c.Sent("q", "a", "", 0, false)
			c.Sent("q", "a", "", 0, true)
			d := c.Received("q", "ma", Body("a"), false, at(1), at(1.1), vis)
			c.Deleted(d, at(2), at(2.1), true)
			// A send whose answer was lost, stored after all: expected.
			c.Sent("q", "b", "", 0, false)
			c.Received("q", "mb", Body("b"), false, at(3), at(3.1), vis)
			// A receive after the lease ended, then a delete whose answer was lost.
			c.Sent("q", "c", "", 0, true)
			c.Received("q", "mc", Body("c"), false, at(1), at(1.1), vis)
			d = c.Received("q", "mc", Body("c"), false, at(11.5), at(11.6), vis)
			c.Deleted(d, at(12), time.Time{}, false)
			// A nack ends the lease at once.
			c.Sent("q", "n", "", 0, true)
			d = c.Received("q", "mn", Body("n"), false, at(1), at(1.1), vis)
			c.VisibilityChanged(d, at(2), 0, true)
			c.Received("q", "mn", Body("n"), false, at(2.2), at(2.3), vis)
			c.StartDrain()
			c.Received("dlq", "mn", Body("n"), true, at(30), at(30.1), vis)
		}, ""},
		{"lost: acknowledged, never received", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			c.StartDrain()
		}, "lost"},
		{"lost: received, not deleted, not in the drain", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			c.Received("q", "ma", Body("a"), false, at(1), at(1.1), vis)
			c.StartDrain()
		}, "lost"},
		{"lease: received again while the lease was live", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			d := c.Received("q", "ma", Body("a"), false, at(1), at(1.1), vis)
			c.Received("q", "ma", Body("a"), false, at(5), at(5.1), vis)
			c.Deleted(d, at(6), at(6.1), true)
		}, "lease"},
		{"lease: an extension acknowledged keeps it live", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			d := c.Received("q", "ma", Body("a"), false, at(1), at(1.1), vis)
			c.VisibilityChanged(d, at(9), 20*time.Second, true)
			c.Received("q", "ma", Body("a"), false, at(15), at(15.1), vis)
			c.Deleted(d, at(16), at(16.1), true)
		}, "lease"},
		{"deleted: back after an acknowledged delete", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			d := c.Received("q", "ma", Body("a"), false, at(1), at(1.1), vis)
			c.Deleted(d, at(2), at(2.1), true)
			c.StartDrain()
			c.Received("q", "ma", Body("a"), false, at(30), at(30.1), vis)
		}, "deleted"},
		{"no deleted: the delete's lease may have ended (stale receipt)", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			d := c.Received("q", "ma", Body("a"), false, at(1), at(1.1), vis)
			c.Deleted(d, at(12), at(12.1), true)
			c.Received("q", "ma", Body("a"), false, at(30), at(30.1), vis)
		}, ""},
		{"no lease, no deleted: one body stored twice (a send retried)", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			d := c.Received("q", "m1", Body("a"), false, at(1), at(1.1), vis)
			c.Deleted(d, at(2), at(2.1), true)
			d = c.Received("q", "m2", Body("a"), false, at(1), at(1.2), vis)
			c.Deleted(d, at(3), at(3.1), true)
		}, ""},
		{"unexpected: corrupted body", func(c *Checker) {
			c.Sent("q", "a", "", 0, true)
			d := c.Received("q", "ma", Body("a")+"!", false, at(1), at(1.1), vis)
			if d != NoDelivery {
				panic("a corrupted body got a delivery")
			}
			c.Received("q", "ma", Body("a"), false, at(1), at(1.1), vis)
			c.StartDrain()
			c.Received("q", "ma", Body("a"), false, at(30), at(30.1), vis)
		}, "unexpected"},
		{"unexpected: never sent", func(c *Checker) {
			c.Received("q", "mghost", Body("ghost"), false, at(1), at(1.1), vis)
		}, "unexpected"},
		{"fifo: a group out of order", func(c *Checker) {
			for i, k := range []string{"g-0", "g-1", "g-2"} {
				c.Sent("f", k, "g", i, true)
			}
			c.Received("f", "mg-0", Body("g-0"), false, at(1), at(1.1), vis)
			c.Received("f", "mg-2", Body("g-2"), false, at(2), at(2.1), vis)
			c.Received("f", "mg-1", Body("g-1"), false, at(3), at(3.1), vis)
			c.StartDrain()
			for _, k := range []string{"g-0", "g-1", "g-2"} {
				c.Received("f", "m"+k, Body(k), false, at(40), at(40.1), vis)
			}
		}, "fifo"},
		{"no fifo: a redelivery from the start of the group", func(c *Checker) {
			for i, k := range []string{"g-0", "g-1"} {
				c.Sent("f", k, "g", i, true)
			}
			c.Received("f", "mg-0", Body("g-0"), false, at(1), at(1.1), vis)
			c.Received("f", "mg-1", Body("g-1"), false, at(1), at(1.1), vis)
			c.Received("f", "mg-0", Body("g-0"), false, at(20), at(20.1), vis)
			c.Received("f", "mg-1", Body("g-1"), false, at(20), at(20.1), vis)
			c.StartDrain()
			c.Received("f", "mg-0", Body("g-0"), false, at(40), at(40.1), vis)
			c.Received("f", "mg-1", Body("g-1"), false, at(40), at(40.1), vis)
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(500 * time.Millisecond)
			tc.run(c)
			if got := rules(c.Check()); got != tc.want {
				t.Fatalf("violations %q, want %q: %v", got, tc.want, c.Check())
			}
		})
	}
}
