package model

import (
	"errors"
	"strings"
	"testing"
)

// TestHealthAttributes: HealthDepth and HealthAge parse "WARNING,CRITICAL",
// render canonically, are listed only when set, unset with "", and refuse
// bad values with InvalidAttributeValue naming the attribute.
func TestHealthAttributes(t *testing.T) {
	t.Parallel()
	c, err := ParseAttributes("q", map[string]string{AttrHealthDepth: " 1000 , 10000", AttrHealthAge: "60,300"})
	if err != nil {
		t.Fatal(err)
	}
	if *c.HealthDepth != (HealthLevels{1000, 10000}) || *c.HealthAge != (HealthLevels{60, 300}) {
		t.Fatalf("parsed %+v %+v", c.HealthDepth, c.HealthAge)
	}
	a := c.Attributes()
	if a[AttrHealthDepth] != "1000,10000" || a[AttrHealthAge] != "60,300" {
		t.Errorf("Attributes: %q %q", a[AttrHealthDepth], a[AttrHealthAge])
	}
	if got := c.ConflictingAttribute("q", map[string]string{AttrHealthDepth: "1000,10000"}); got != "" {
		t.Errorf("the same HealthDepth conflicts on %s", got)
	}
	if got := c.ConflictingAttribute("q", map[string]string{AttrHealthDepth: "5,10"}); got != AttrHealthDepth {
		t.Errorf("another HealthDepth: conflict %q, want HealthDepth", got)
	}
	cl := c.Clone()
	cl.HealthDepth.Warning = 1
	if c.HealthDepth.Warning != 1000 {
		t.Error("Clone shares HealthDepth")
	}
	// 0 turns one off; "0,0" is set (both off), "" unsets.
	c, err = ApplyAttributes(c, map[string]string{AttrHealthDepth: "0,0", AttrHealthAge: ""})
	if err != nil {
		t.Fatal(err)
	}
	a = c.Attributes()
	if a[AttrHealthDepth] != "0,0" {
		t.Errorf("HealthDepth 0,0 renders %q", a[AttrHealthDepth])
	}
	if _, ok := a[AttrHealthAge]; ok || c.HealthAge != nil {
		t.Errorf("HealthAge still set after \"\": %v", a[AttrHealthAge])
	}
	plain := DefaultQueueConfig(false).Attributes()
	for _, n := range []string{AttrHealthDepth, AttrHealthAge} {
		if _, ok := plain[n]; ok {
			t.Errorf("a plain queue lists %s", n)
		}
		if !IsSluiceAttribute(n) || !IsQueueAttributeName(n) || SluiceAttributeDefault(n) != "" {
			t.Errorf("%s is not a Sluice attribute with default \"\"", n)
		}
	}
	for _, bad := range []map[string]string{
		{AttrHealthDepth: "1000"},
		{AttrHealthDepth: "a,b"},
		{AttrHealthDepth: "-1,5"},
		{AttrHealthDepth: "10,5"},
		{AttrHealthDepth: "1,1000000001"},
		{AttrHealthDepth: "1,2,3"},
		{AttrHealthAge: "1m,5m"},
		{AttrHealthAge: "300,60"},
		{AttrHealthAge: "60,1209601"},
	} {
		_, err := ParseAttributes("q", bad)
		var name string
		for k := range bad {
			name = k
		}
		if !errors.Is(err, ErrInvalidAttributeValue) || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: %v, want InvalidAttributeValue naming %s", bad, err, name)
		}
	}
}
