package model

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRetryPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want RetryPolicy
	}{
		{`{"baseSeconds":2,"maxSeconds":300,"jitter":"full"}`, RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: JitterFull}},
		{`{"baseSeconds":2}`, RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: JitterFull}},                    // defaults
		{`{"baseSeconds":600}`, RetryPolicy{Base: 600 * time.Second, Max: 600 * time.Second, Jitter: JitterFull}},                // max defaults to base past 300
		{`{"baseSeconds":"5","maxSeconds":"10"}`, RetryPolicy{Base: 5 * time.Second, Max: 10 * time.Second, Jitter: JitterFull}}, // strings, as RedrivePolicy
		{`{"baseSeconds":1,"maxSeconds":1,"jitter":"none"}`, RetryPolicy{Base: time.Second, Max: time.Second, Jitter: JitterNone}},
		{`{"baseSeconds":3,"maxSeconds":43200,"jitter":"equal"}`, RetryPolicy{Base: 3 * time.Second, Max: 43200 * time.Second, Jitter: JitterEqual}},
		{`{"baseSeconds":2.0}`, RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: JitterFull}},
		{`{"baseSeconds":" 7 "}`, RetryPolicy{Base: 7 * time.Second, Max: 300 * time.Second, Jitter: JitterFull}},
		{`{"baseSeconds":2,"jitter":"up"}`, RetryPolicy{Base: 2 * time.Second, Max: 300 * time.Second, Jitter: JitterUp}},
		// The schedule form: jitter none by default.
		{`{"delays":[10,60,300]}`, RetryPolicy{Delays: secondsList(10, 60, 300), Jitter: JitterNone}},
		{`{"delays":[10,60,300],"jitter":"up"}`, RetryPolicy{Delays: secondsList(10, 60, 300), Jitter: JitterUp}},
		{`{"jitter":"full","delays":["5", 5.0, 43200]}`, RetryPolicy{Delays: secondsList(5, 5, 43200), Jitter: JitterFull}},
		{`{"delays":[1],"jitter":"equal"}`, RetryPolicy{Delays: secondsList(1), Jitter: JitterEqual}},
		{`{"delays":[300,60,10]}`, RetryPolicy{Delays: secondsList(300, 60, 10), Jitter: JitterNone}}, // any order
		{`{"delays":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]}`, RetryPolicy{Delays: secondsList(
			1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25), Jitter: JitterNone}},
	} {
		p, err := ParseRetryPolicy(c.in)
		if err != nil || p == nil || !p.Equal(c.want) {
			t.Errorf("ParseRetryPolicy(%s) = %+v, %v; want %+v", c.in, p, err, c.want)
			continue
		}
		// It renders to a value that parses to itself.
		again, err := ParseRetryPolicy(p.String())
		if err != nil || !again.Equal(*p) {
			t.Errorf("ParseRetryPolicy(%s) = %+v, %v; want %+v", p.String(), again, err, *p)
		}
	}
	if p, err := ParseRetryPolicy(""); p != nil || err != nil {
		t.Errorf(`ParseRetryPolicy("") = %v, %v; want none`, p, err)
	}
	for _, bad := range []string{
		`{`, `[]`, `"x"`, `null`,
		`{}`,                    // baseSeconds is required
		`{"maxSeconds":10}`,     // so
		`{"baseSeconds":0}`,     // 1..43200
		`{"baseSeconds":-1}`,    //
		`{"baseSeconds":43201}`, //
		`{"baseSeconds":1.5}`,   // integers only
		`{"baseSeconds":"two"}`, //
		`{"baseSeconds":true}`,  //
		`{"baseSeconds":2,"maxSeconds":0}`,
		`{"baseSeconds":2,"maxSeconds":43201}`,
		`{"baseSeconds":10,"maxSeconds":5}`, // base <= max
		`{"baseSeconds":2,"jitter":"random"}`,
		`{"baseSeconds":2,"jitter":"FULL"}`,
		`{"baseSeconds":2,"jitter":1}`,
		`{"baseSeconds":2,"jitter":null}`,
		`{"baseSeconds":2,"extra":1}`, // unknown keys
		// The schedule form.
		`{"delays":[10,60],"baseSeconds":2}`, // both forms
		`{"delays":[10,60],"maxSeconds":300}`,
		`{"delays":[10],"baseSeconds":2,"maxSeconds":300}`,
		`{"delays":[]}`, // 1..25 delays
		`{"delays":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26]}`,
		`{"delays":10}`, // a list
		`{"delays":"10,60"}`,
		`{"delays":null}`,
		`{"delays":{"a":1}}`,
		`{"delays":[10,0]}`, // each 1..43200
		`{"delays":[-10]}`,
		`{"delays":[43201]}`,
		`{"delays":[1.5]}`, // whole seconds
		`{"delays":[10,"x"]}`,
		`{"delays":[10,null]}`,
		`{"delays":[[10]]}`,
		`{"delays":[10],"jitter":"sideways"}`, // unknown jitter
		`{"delays":[10],"jitter":"UP"}`,
		`{"delays":[10],"jitter":""}`,
	} {
		if p, err := ParseRetryPolicy(bad); !errors.Is(err, ErrInvalidAttributeValue) || p != nil {
			t.Errorf("ParseRetryPolicy(%s) = %+v, %v; want ErrInvalidAttributeValue", bad, p, err)
		} else if !strings.Contains(err.Error(), "RetryPolicy") {
			t.Errorf("ParseRetryPolicy(%s): the error %q does not name RetryPolicy", bad, err)
		}
	}
}

// TestRetryPolicyErrors: the error texts name the rule broken and its limits.
func TestRetryPolicyErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"delays":[10],"baseSeconds":2}`: "Value {\"delays\":[10],\"baseSeconds\":2} for parameter RetryPolicy is invalid. " +
			"Reason: delays cannot be given with baseSeconds or maxSeconds: give either delays or baseSeconds (and maxSeconds).",
		`{"delays":[]}`:             "Reason: delays must be a list of 1 to 25 integers.",
		`{"delays":[10,0]}`:         "Reason: Invalid value for delays: each must be an integer from 1 to 43200.",
		`{"delays":[1],"jitter":1}`: "Reason: jitter must be full, equal, none or up.",
		`{"baseSeconds":0}`:         "Reason: Invalid value for baseSeconds: must be an integer from 1 to 43200.",
		`{"maxSeconds":5}`:          "Reason: Retry policy does not contain mandatory attribute: baseSeconds or delays.",
		`{"delay":[10]}`:            "Reason: Only following attributes are supported: [baseSeconds, maxSeconds, delays, jitter].",
	} {
		_, err := ParseRetryPolicy(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRetryPolicy(%s) = %v, want an error with %q", in, err, want)
		}
	}
}

// TestRetryPolicyString: the canonical forms GetQueueAttributes shows.
func TestRetryPolicyString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"baseSeconds":2}`:                     `{"baseSeconds":2,"maxSeconds":300,"jitter":"full"}`,
		`{ "delays" : ["10", 60, 300.0] }`:      `{"delays":[10,60,300],"jitter":"none"}`,
		`{"jitter":"up","delays":[10,60,300]}`:  `{"delays":[10,60,300],"jitter":"up"}`,
		`{"baseSeconds":4,"jitter":"up"}`:       `{"baseSeconds":4,"maxSeconds":300,"jitter":"up"}`,
		`{"delays":[43200,1],"jitter":"equal"}`: `{"delays":[43200,1],"jitter":"equal"}`,
	} {
		p, err := ParseRetryPolicy(in)
		if err != nil {
			t.Errorf("ParseRetryPolicy(%s): %v", in, err)
			continue
		}
		if got := p.String(); got != want {
			t.Errorf("ParseRetryPolicy(%s).String() = %s, want %s", in, got, want)
		}
	}
}

func secondsList(s ...int) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, n := range s {
		out[i] = time.Duration(n) * time.Second
	}
	return out
}

const testDLQ = `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":3}`

func TestSluiceAttributes(t *testing.T) {
	t.Parallel()
	// A plain queue reads exactly as today: no Sluice attribute in All.
	plain, err := ParseAttributes("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name := range plain.Attributes() {
		if IsSluiceAttribute(name) {
			t.Errorf("a plain queue's attributes include %s", name)
		}
	}
	set := map[string]string{
		AttrRetryPolicy:         `{"baseSeconds":2,"maxSeconds":60,"jitter":"equal"}`,
		AttrMaxDepth:            "100",
		AttrLowPriorityMaxDepth: "80",
		AttrPaused:              "TRUE",
		AttrDeadLetterWebhook:   "https://hooks.example.com/dlq?x=1",
	}
	c, err := ParseAttributes("q", set)
	if err != nil {
		t.Fatal(err)
	}
	if c.Retry == nil || !c.Retry.Equal(RetryPolicy{Base: 2 * time.Second, Max: 60 * time.Second, Jitter: JitterEqual}) ||
		c.MaxDepth != 100 || c.LowPriorityMaxDepth != 80 || !c.Paused || c.DeadLetterWebhook != set[AttrDeadLetterWebhook] || c.AtMostOnce() {
		t.Fatalf("parsed %+v", c)
	}
	got := c.Attributes()
	for name, want := range map[string]string{
		AttrRetryPolicy: `{"baseSeconds":2,"maxSeconds":60,"jitter":"equal"}`, AttrMaxDepth: "100", AttrLowPriorityMaxDepth: "80",
		AttrPaused: "true", AttrDeadLetterWebhook: "https://hooks.example.com/dlq?x=1",
	} {
		if got[name] != want {
			t.Errorf("Attributes()[%s] = %q, want %q", name, got[name], want)
		}
	}
	if _, ok := got[AttrDeliveryMode]; ok {
		t.Errorf("DeliveryMode at its default is in All: %v", got)
	}
	// Setting them back to their defaults removes them from All.
	c, err = ApplyAttributes(c, map[string]string{
		AttrRetryPolicy: "", AttrMaxDepth: "0", AttrLowPriorityMaxDepth: "0", AttrPaused: "false",
		AttrDeadLetterWebhook: "", AttrDeliveryMode: DeliveryAtLeastOnce,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range c.Attributes() {
		if IsSluiceAttribute(name) {
			t.Errorf("after resetting, the attributes include %s", name)
		}
	}
	amo, err := ParseAttributes("q", map[string]string{AttrDeliveryMode: DeliveryAtMostOnce})
	if err != nil || !amo.AtMostOnce() || amo.Attributes()[AttrDeliveryMode] != DeliveryAtMostOnce {
		t.Fatalf("at-most-once: %+v, %v", amo, err)
	}
	// The defaults asked for by name.
	for name, want := range map[string]string{
		AttrRetryPolicy: "", AttrMaxDepth: "0", AttrLowPriorityMaxDepth: "0", AttrPaused: "false",
		AttrDeliveryMode: DeliveryAtLeastOnce, AttrDeadLetterWebhook: "",
	} {
		if !IsSluiceAttribute(name) || !IsQueueAttributeName(name) {
			t.Errorf("%s is not a known attribute name", name)
		}
		if got := SluiceAttributeDefault(name); got != want {
			t.Errorf("SluiceAttributeDefault(%s) = %q, want %q", name, got, want)
		}
	}
	if IsSluiceAttribute(AttrVisibilityTimeout) || IsSluiceAttribute("Sluice.Priority") {
		t.Error("IsSluiceAttribute accepts a name that is not a Sluice queue attribute")
	}
	// The parsed copy is deep: changing the result's policy leaves the input's.
	base, _ := ParseAttributes("q", map[string]string{AttrRetryPolicy: `{"baseSeconds":2}`})
	changed, err := ApplyAttributes(base, map[string]string{AttrMaxDepth: "5"})
	if err != nil {
		t.Fatal(err)
	}
	changed.Retry.Base = time.Hour
	if base.Retry.Base != 2*time.Second {
		t.Error("ApplyAttributes shares the RetryPolicy with its input")
	}
	// So is a Clone's schedule.
	sched, _ := ParseAttributes("q", map[string]string{AttrRetryPolicy: `{"delays":[10,60]}`})
	copied := sched.Clone()
	copied.Retry.Delays[0] = time.Hour
	if sched.Retry.Delays[0] != 10*time.Second {
		t.Error("Clone shares the RetryPolicy's delays with its input")
	}
}

func TestSluiceAttributeRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []map[string]string{
		{AttrMaxDepth: "-1"},
		{AttrMaxDepth: "1000000001"},
		{AttrMaxDepth: "ten"},
		{AttrLowPriorityMaxDepth: "-1"},
		{AttrPaused: "yes"},
		{AttrDeliveryMode: "exactly-once"},
		{AttrDeliveryMode: "AT-MOST-ONCE"},
		{AttrRetryPolicy: `{"baseSeconds":0}`},
		{AttrDeadLetterWebhook: "ftp://example.com/x"},
		{AttrDeadLetterWebhook: "https://user:pw@example.com/x"},
		{AttrDeadLetterWebhook: "/relative"},
		{AttrDeadLetterWebhook: "https://example.com/" + strings.Repeat("x", 2048)},
		// The cross rules.
		{AttrMaxDepth: "10", AttrLowPriorityMaxDepth: "11"},
		{AttrDeliveryMode: DeliveryAtMostOnce, AttrRetryPolicy: `{"baseSeconds":2}`},
		{AttrDeliveryMode: DeliveryAtMostOnce, AttrRedrivePolicy: testDLQ},
	} {
		if _, err := ParseAttributes("q", c); !errors.Is(err, ErrInvalidAttributeValue) {
			t.Errorf("ParseAttributes(%v) = %v, want ErrInvalidAttributeValue", c, err)
		}
	}
	// LowPriorityMaxDepth without MaxDepth is allowed (the only limit).
	if c, err := ParseAttributes("q", map[string]string{AttrLowPriorityMaxDepth: "5"}); err != nil || c.LowPriorityMaxDepth != 5 {
		t.Errorf("LowPriorityMaxDepth alone: %+v, %v", c, err)
	}
	if _, err := ParseAttributes("q", map[string]string{AttrMaxDepth: "10", AttrLowPriorityMaxDepth: "10"}); err != nil {
		t.Errorf("LowPriorityMaxDepth equal to MaxDepth: %v", err)
	}
	// At-most-once on FIFO.
	if _, err := ParseAttributes("q.fifo", map[string]string{AttrFifoQueue: "true", AttrDeliveryMode: DeliveryAtMostOnce}); !errors.Is(err, ErrInvalidAttributeValue) {
		t.Errorf("at-most-once FIFO: %v, want ErrInvalidAttributeValue", err)
	}
}

// TestSluiceCrossRulesEitherOrder: the cross rules hold whichever setting
// comes first, across SetQueueAttributes calls.
func TestSluiceCrossRulesEitherOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		first, second map[string]string
	}{
		{"low above max, max first", map[string]string{AttrMaxDepth: "10"}, map[string]string{AttrLowPriorityMaxDepth: "11"}},
		{"low above max, low first", map[string]string{AttrLowPriorityMaxDepth: "11"}, map[string]string{AttrMaxDepth: "10"}},
		{"at-most-once then retry", map[string]string{AttrDeliveryMode: DeliveryAtMostOnce}, map[string]string{AttrRetryPolicy: `{"baseSeconds":2}`}},
		{"retry then at-most-once", map[string]string{AttrRetryPolicy: `{"baseSeconds":2}`}, map[string]string{AttrDeliveryMode: DeliveryAtMostOnce}},
		{"at-most-once then redrive", map[string]string{AttrDeliveryMode: DeliveryAtMostOnce}, map[string]string{AttrRedrivePolicy: testDLQ}},
		{"redrive then at-most-once", map[string]string{AttrRedrivePolicy: testDLQ}, map[string]string{AttrDeliveryMode: DeliveryAtMostOnce}},
	} {
		first, err := ParseAttributes("q", c.first)
		if err != nil {
			t.Fatalf("%s: the first setting alone: %v", c.name, err)
		}
		if _, err := ApplyAttributes(first, c.second); !errors.Is(err, ErrInvalidAttributeValue) {
			t.Errorf("%s: %v, want ErrInvalidAttributeValue", c.name, err)
		}
	}
	// Removing the conflicting setting in the same call is fine.
	c, _ := ParseAttributes("q", map[string]string{AttrRetryPolicy: `{"baseSeconds":2}`})
	if c, err := ApplyAttributes(c, map[string]string{AttrRetryPolicy: "", AttrDeliveryMode: DeliveryAtMostOnce}); err != nil || !c.AtMostOnce() {
		t.Errorf("at-most-once while removing the RetryPolicy: %+v, %v", c, err)
	}
	c, _ = ParseAttributes("q", map[string]string{AttrMaxDepth: "10", AttrLowPriorityMaxDepth: "5"})
	if _, err := ApplyAttributes(c, map[string]string{AttrMaxDepth: "20", AttrLowPriorityMaxDepth: "15"}); err != nil {
		t.Errorf("raising both limits together: %v", err)
	}
	// Removing MaxDepth (0) leaves LowPriorityMaxDepth alone.
	if _, err := ApplyAttributes(c, map[string]string{AttrMaxDepth: "0"}); err != nil {
		t.Errorf("removing MaxDepth: %v", err)
	}
}

// TestConflictingSluiceAttribute: CreateQueue's equal-attributes check
// compares parsed values.
func TestConflictingSluiceAttribute(t *testing.T) {
	t.Parallel()
	c, err := ParseAttributes("q", map[string]string{
		AttrRetryPolicy: `{"baseSeconds":2,"maxSeconds":300,"jitter":"full"}`, AttrMaxDepth: "100", AttrPaused: "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, same := range []map[string]string{
		{AttrRetryPolicy: `{"baseSeconds":2}`},                                           // defaults spelt out or not
		{AttrRetryPolicy: `{ "jitter" : "full", "maxSeconds":"300", "baseSeconds": 2 }`}, // key order, spacing, strings
		{AttrMaxDepth: " 100"},
		{AttrPaused: "True"},
		{AttrDeliveryMode: DeliveryAtLeastOnce},
		{AttrLowPriorityMaxDepth: "0"},
		{AttrDeadLetterWebhook: ""},
		{},
	} {
		if got := c.ConflictingAttribute("q", same); got != "" {
			t.Errorf("ConflictingAttribute(%v) = %s, want none", same, got)
		}
	}
	for want, differ := range map[string]map[string]string{
		AttrRetryPolicy:         {AttrRetryPolicy: `{"baseSeconds":2,"jitter":"none"}`},
		AttrMaxDepth:            {AttrMaxDepth: "101"},
		AttrPaused:              {AttrPaused: "false"},
		AttrDeliveryMode:        {AttrDeliveryMode: DeliveryAtMostOnce},
		AttrDeadLetterWebhook:   {AttrDeadLetterWebhook: "https://example.com/"},
		AttrLowPriorityMaxDepth: {AttrLowPriorityMaxDepth: "5"},
	} {
		if got := c.ConflictingAttribute("q", differ); got != want {
			t.Errorf("ConflictingAttribute(%v) = %q, want %s", differ, got, want)
		}
	}
	// The schedule form compares parsed values too.
	sc, err := ParseAttributes("q", map[string]string{AttrRetryPolicy: `{"delays":[10,60,300]}`})
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.ConflictingAttribute("q", map[string]string{AttrRetryPolicy: `{"jitter":"none","delays":["10",60,300]}`}); got != "" {
		t.Errorf("the same schedule spelt otherwise: %q", got)
	}
	for _, differ := range []string{
		`{"delays":[10,60]}`, `{"delays":[10,60,300,300]}`, `{"delays":[10,60,300],"jitter":"up"}`,
		`{"baseSeconds":10,"maxSeconds":300,"jitter":"none"}`,
	} {
		if got := sc.ConflictingAttribute("q", map[string]string{AttrRetryPolicy: differ}); got != AttrRetryPolicy {
			t.Errorf("schedule vs %s: %q", differ, got)
		}
	}
	// A queue without a RetryPolicy differs from one asked with it, and back.
	plain, _ := ParseAttributes("q", nil)
	if got := plain.ConflictingAttribute("q", map[string]string{AttrRetryPolicy: `{"baseSeconds":2}`}); got != AttrRetryPolicy {
		t.Errorf("plain vs a RetryPolicy: %q", got)
	}
	if got := c.ConflictingAttribute("q", map[string]string{AttrRetryPolicy: ""}); got != AttrRetryPolicy {
		t.Errorf("a RetryPolicy vs none: %q", got)
	}
}
