package model

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTTLAttributes(t *testing.T) {
	t.Parallel()
	redrive := `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":3}`
	// Unset: no default time to live, expired messages dropped, nothing in All.
	plain, err := ParseAttributes("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.TimeToLive != 0 || plain.ExpiredActionOf() != ExpiredDrop || plain.ExpiredToDeadLetter() {
		t.Fatalf("defaults: ttl %v, action %s", plain.TimeToLive, plain.ExpiredActionOf())
	}
	for _, name := range []string{AttrMessageTimeToLive, AttrExpiredMessageAction} {
		if _, ok := plain.Attributes()[name]; ok {
			t.Errorf("a plain queue's All lists %s", name)
		}
		if !IsSluiceAttribute(name) || !IsQueueAttributeName(name) {
			t.Errorf("%s is not a known attribute name", name)
		}
	}
	if plain.DefaultOf(AttrMessageTimeToLive) != "0" || plain.DefaultOf(AttrExpiredMessageAction) != "drop" {
		t.Error("the defaults asked for by name on a queue without a RedrivePolicy")
	}
	// With a RedrivePolicy the default action is dead-letter, still unset.
	dl, err := ParseAttributes("q", map[string]string{AttrRedrivePolicy: redrive})
	if err != nil {
		t.Fatal(err)
	}
	if dl.ExpiredActionOf() != ExpiredDeadLetter || !dl.ExpiredToDeadLetter() || dl.DefaultOf(AttrExpiredMessageAction) != "dead-letter" {
		t.Fatalf("with a RedrivePolicy: %s", dl.ExpiredActionOf())
	}
	if _, ok := dl.Attributes()[AttrExpiredMessageAction]; ok {
		t.Error("the default action is listed in All")
	}

	c, err := ParseAttributes("q", map[string]string{AttrMessageTimeToLive: " 3600", AttrExpiredMessageAction: "drop", AttrRedrivePolicy: redrive})
	if err != nil {
		t.Fatal(err)
	}
	if c.TimeToLive != time.Hour || c.ExpiredActionOf() != ExpiredDrop || c.ExpiredToDeadLetter() {
		t.Fatalf("parsed %+v", c)
	}
	if a := c.Attributes(); a[AttrMessageTimeToLive] != "3600" || a[AttrExpiredMessageAction] != "drop" {
		t.Fatalf("All = %v", a)
	}
	if c.ConflictingAttribute("q", map[string]string{AttrMessageTimeToLive: "3600"}) != "" ||
		c.ConflictingAttribute("q", map[string]string{AttrMessageTimeToLive: "60"}) != AttrMessageTimeToLive {
		t.Error("ConflictingAttribute compares the time to live")
	}
	// The longest: the longest retention, on a queue that keeps it.
	long, err := ParseAttributes("q", map[string]string{AttrMessageRetentionPeriod: "1209600", AttrMessageTimeToLive: "1209600"})
	if err != nil || long.TimeToLive != MaxTimeToLive {
		t.Fatalf("the longest time to live: %v, %v", long.TimeToLive, err)
	}
	// Unset again with 0 and "".
	for _, v := range []string{"0", ""} {
		u, err := ApplyAttributes(c, map[string]string{AttrMessageTimeToLive: v, AttrExpiredMessageAction: ""})
		if err != nil || u.TimeToLive != 0 || u.ExpiredAction != "" {
			t.Fatalf("unset with %q: %+v, %v", v, u, err)
		}
		if _, ok := u.Attributes()[AttrMessageTimeToLive]; ok {
			t.Errorf("MessageTimeToLive %q is listed in All", v)
		}
	}

	// Refusals, with the reason in the text.
	for _, r := range []struct {
		attrs  map[string]string
		reason string
	}{
		{map[string]string{AttrMessageTimeToLive: "-1"}, "between 0 and 1209600"},
		{map[string]string{AttrMessageTimeToLive: "1209601"}, "between 0 and 1209600"},
		{map[string]string{AttrMessageTimeToLive: "1h"}, "between 0 and 1209600"},
		// Longer than the retention (4 days by default, or as set).
		{map[string]string{AttrMessageTimeToLive: "345601"}, "longer than the queue's MessageRetentionPeriod (345600 seconds)"},
		{map[string]string{AttrMessageTimeToLive: "120", AttrMessageRetentionPeriod: "60"}, "longer than the queue's MessageRetentionPeriod (60 seconds)"},
		// Not longer than the queue's delay: every message would expire unseen.
		{map[string]string{AttrMessageTimeToLive: "60", AttrDelaySeconds: "60"}, "not longer than the queue's DelaySeconds (60)"},
		{map[string]string{AttrExpiredMessageAction: "keep"}, "must be dead-letter or drop"},
		{map[string]string{AttrExpiredMessageAction: "dead-letter"}, "needs a RedrivePolicy"},
	} {
		_, err := ParseAttributes("q", r.attrs)
		if !errors.Is(err, ErrInvalidAttributeValue) || !strings.Contains(err.Error(), r.reason) {
			t.Errorf("ParseAttributes(%v) = %v, want InvalidAttributeValue saying %q", r.attrs, err, r.reason)
		}
	}
	// The rules hold across changes: lowering the retention or raising the
	// delay past the time to live, or removing the RedrivePolicy of a queue
	// that dead-letters its expired messages, is refused.
	q, err := ParseAttributes("q", map[string]string{AttrMessageTimeToLive: "600", AttrRedrivePolicy: redrive, AttrExpiredMessageAction: "dead-letter"})
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range []map[string]string{
		{AttrMessageRetentionPeriod: "599"},
		{AttrDelaySeconds: "600"},
		{AttrRedrivePolicy: ""},
	} {
		if _, err := ApplyAttributes(q, change); !errors.Is(err, ErrInvalidAttributeValue) {
			t.Errorf("ApplyAttributes(%v) = %v, want InvalidAttributeValue", change, err)
		}
	}
	if _, err := ApplyAttributes(q, map[string]string{AttrMessageRetentionPeriod: "600", AttrDelaySeconds: "599"}); err != nil {
		t.Errorf("a retention equal to the time to live and a shorter delay: %v", err)
	}
	if u, err := ApplyAttributes(q, map[string]string{AttrRedrivePolicy: "", AttrExpiredMessageAction: "drop"}); err != nil || u.ExpiredActionOf() != ExpiredDrop {
		t.Errorf("removing the RedrivePolicy with the action: %v", err)
	}
}

func TestExpired(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	if Expired(time.Time{}, at) {
		t.Error("a message without an expiry expired")
	}
	if Expired(at, at.Add(-time.Nanosecond)) || !Expired(at, at) || !Expired(at, at.Add(time.Second)) {
		t.Error("the expiry instant is expired, the instant before is not")
	}
}

func TestTimeToLiveOption(t *testing.T) {
	t.Parallel()
	num := func(v string) MessageAttribute { return MessageAttribute{DataType: "Number", StringValue: v} }
	o := ParseMessageOptions(map[string]MessageAttribute{MsgAttrTimeToLive: num("1209600")})
	if o.Err != nil || !o.TTLGiven || o.TTL != MaxTimeToLive {
		t.Fatalf("the longest: %+v", o)
	}
	o = ParseMessageOptions(map[string]MessageAttribute{MsgAttrTimeToLive: num(" 1")})
	if o.Err != nil || o.TTL != time.Second {
		t.Fatalf("the shortest: %+v", o)
	}
	for _, a := range []MessageAttribute{num("0"), num("1209601"), num("1.5"), num("-3"), {DataType: "String", StringValue: "60"}} {
		o := ParseMessageOptions(map[string]MessageAttribute{MsgAttrTimeToLive: a})
		if !errors.Is(o.Err, ErrInvalidParameterValue) || !o.TTLGiven || o.TTL != 0 {
			t.Errorf("Sluice.TimeToLive %+v: %+v, want InvalidParameterValue", a, o)
		}
	}
	o = ParseMessageOptions(map[string]MessageAttribute{"Sluice.Ttl": num("5")})
	if o.Err == nil || !strings.Contains(o.Err.Error(), MsgAttrTimeToLive) {
		t.Errorf("an unknown Sluice.* name: %v, want the list of names with %s", o.Err, MsgAttrTimeToLive)
	}
}
