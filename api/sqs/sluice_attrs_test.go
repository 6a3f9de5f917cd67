package sqs_test

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The Sluice queue attributes (RetryPolicy, MaxDepth, LowPriorityMaxDepth,
// Paused, DeliveryMode, DeadLetterWebhook, DeduplicationWindowSeconds,
// DeduplicationUntil, HealthDepth, HealthAge, MaxInFlight,
// MaxReceivesPerSecond) through CreateQueue,
// DeduplicationUntil, HealthDepth, HealthAge, MessageTimeToLive,
// ExpiredMessageAction, ArchiveExpired) through CreateQueue,
// SetQueueAttributes and GetQueueAttributes, in both protocols: JSON with
// aws-sdk-go-v2, query with raw form requests.

// sluiceDefaults is what GetQueueAttributes answers for each Sluice attribute
// asked for by name on a queue where it is unset.
var sluiceDefaults = map[string]string{
	"RetryPolicy":                "",
	"MaxDepth":                   "0",
	"LowPriorityMaxDepth":        "0",
	"Paused":                     "false",
	"DeliveryMode":               "at-least-once",
	"DeadLetterWebhook":          "",
	"DeduplicationWindowSeconds": "300",
	"DeduplicationUntil":         "window",
	"HealthDepth":                "",
	"HealthAge":                  "",
	"MaxInFlight":                "",
	"MaxReceivesPerSecond":       "",
	"MessageTimeToLive":          "0",
	"ExpiredMessageAction":       "drop",
	"ArchiveExpired":             "false",
}

// sluiceSet are Sluice attributes as a client might write them (keys of the
// policy out of order, a number as a string), and setWant what they read as.
var (
	sluiceSet = map[string]string{
		"RetryPolicy":                `{"jitter":"none","baseSeconds":"2"}`,
		"MaxDepth":                   "10",
		"LowPriorityMaxDepth":        "5",
		"Paused":                     "true",
		"DeadLetterWebhook":          "https://hooks.example.com/dlq?x=1",
		"DeduplicationWindowSeconds": " 3600",
		"DeduplicationUntil":         "settled",
		"HealthDepth":                " 5 , 50",
		"HealthAge":                  "60,300",
		"MaxInFlight":                " 100",
		"MaxReceivesPerSecond":       "0.50",
		"MessageTimeToLive":          " 3600",
		"ExpiredMessageAction":       "drop",
		"ArchiveExpired":             "TRUE",
	}
	sluiceWant = map[string]string{
		"RetryPolicy":                `{"baseSeconds":2,"maxSeconds":300,"jitter":"none"}`,
		"MaxDepth":                   "10",
		"LowPriorityMaxDepth":        "5",
		"Paused":                     "true",
		"DeadLetterWebhook":          "https://hooks.example.com/dlq?x=1",
		"DeduplicationWindowSeconds": "3600",
		"DeduplicationUntil":         "settled",
		"HealthDepth":                "5,50",
		"HealthAge":                  "60,300",
		"MaxInFlight":                "100",
		"MaxReceivesPerSecond":       "0.5",
		"MessageTimeToLive":          "3600",
		"ExpiredMessageAction":       "drop",
		"ArchiveExpired":             "true",
	}
)

// sluiceNames are the Sluice attribute names, in a fixed order.
var sluiceNames = []string{"RetryPolicy", "MaxDepth", "LowPriorityMaxDepth", "Paused", "DeliveryMode", "DeadLetterWebhook",
	"DeduplicationWindowSeconds", "DeduplicationUntil", "HealthDepth", "HealthAge", "MaxInFlight", "MaxReceivesPerSecond",
	"MessageTimeToLive", "ExpiredMessageAction"}

// sluiceRefusals are attribute sets every protocol must refuse with
// InvalidAttributeValue.
var sluiceRefusals = []map[string]string{
	{"RetryPolicy": `{"baseSeconds":2,"jitter":"some"}`},
	{"RetryPolicy": `{"baseSeconds":0}`},
	{"RetryPolicy": `{"baseSeconds":10,"maxSeconds":5}`},
	{"RetryPolicy": `{"maxSeconds":5}`},
	{"RetryPolicy": `{"baseSeconds":2,"tries":3}`},
	{"RetryPolicy": `{"delays":[10,60],"baseSeconds":2}`}, // both forms
	{"RetryPolicy": `{"delays":[]}`},
	{"RetryPolicy": `{"delays":[10,0]}`},
	{"RetryPolicy": `{"delays":[-5]}`},
	{"RetryPolicy": `{"delays":[43201]}`},
	{"RetryPolicy": `{"delays":[10],"jitter":"down"}`},
	{"MaxDepth": "-1"},
	{"MaxDepth": "ten"},
	{"MaxDepth": "5", "LowPriorityMaxDepth": "6"},
	{"Paused": "maybe"},
	{"DeliveryMode": "exactly-once"},
	{"DeliveryMode": "at-most-once", "RetryPolicy": `{"baseSeconds":2}`},
	{"DeadLetterWebhook": "ftp://hooks.example.com/"},
	{"DeadLetterWebhook": "https://user:pw@hooks.example.com/"},
	{"DeduplicationWindowSeconds": "59"},
	{"DeduplicationWindowSeconds": "86401"},
	{"DeduplicationWindowSeconds": "5m"},
	{"DeduplicationUntil": "forever"},
	{"HealthDepth": "1000"},
	{"HealthDepth": "50,5"},
	{"HealthDepth": "-1,5"},
	{"HealthAge": "1m,5m"},
	{"HealthAge": "60,1209601"},
	{"MaxInFlight": "0"},
	{"MaxInFlight": "-5"},
	{"MaxInFlight": "120001"},
	{"MaxInFlight": "ten"},
	{"MaxInFlight": "3", "DeliveryMode": "at-most-once"},
	{"MaxReceivesPerSecond": "0"},
	{"MaxReceivesPerSecond": "-1"},
	{"MaxReceivesPerSecond": "100000.5"},
	{"MaxReceivesPerSecond": "1e2"},
	{"MaxReceivesPerSecond": "0.0000001"},
	{"MaxReceivesPerSecond": "fast"},
	{"MessageTimeToLive": "1209601"},
	{"MessageTimeToLive": "345601"}, // past the default retention
	{"MessageTimeToLive": "-1"},
	{"ExpiredMessageAction": "dead-letter"}, // no RedrivePolicy
	{"ExpiredMessageAction": "keep"},
}

func TestSluiceAttributesJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	get := func(url string, names ...string) map[string]string {
		t.Helper()
		ns := make([]types.QueueAttributeName, len(names))
		for i, n := range names {
			ns[i] = types.QueueAttributeName(n)
		}
		out, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: ns})
		if err != nil {
			t.Fatalf("GetQueueAttributes %v: %v", names, err)
		}
		return out.Attributes
	}

	// A plain queue reads exactly as before in All; by name, the defaults.
	plain := e.queue("plain", nil)
	all := get(plain, "All")
	for _, n := range sluiceNames {
		if v, ok := all[n]; ok {
			t.Errorf("All on a plain queue has %s=%q", n, v)
		}
	}
	if len(all) != 12 {
		t.Errorf("All on a plain queue has %d attributes, want the 12 SQS ones: %v", len(all), all)
	}
	named := get(plain, sluiceNames...)
	for _, n := range sluiceNames {
		if v, ok := named[n]; !ok || v != sluiceDefaults[n] {
			t.Errorf("%s by name on a plain queue = %q (present %v), want %q", n, v, ok, sluiceDefaults[n])
		}
	}
	// All with a Sluice name: the SQS ones, and that one with its default.
	allPaused := get(plain, "All", "Paused")
	if len(allPaused) != 13 || allPaused["Paused"] != "false" {
		t.Errorf("All and Paused on a plain queue: %d attributes, Paused %q; want the 12 SQS ones and Paused=false", len(allPaused), allPaused["Paused"])
	}
	// Asking for the defaults at creation is asking for the queue as it is.
	if again := e.queue("plain", map[string]string{"MaxDepth": "0", "Paused": "false", "DeliveryMode": "at-least-once", "RetryPolicy": ""}); again != plain {
		t.Fatalf("re-create with the defaults answered %s", again)
	}

	// Set at creation: All includes them, normalized.
	set := e.queue("set", sluiceSet)
	all = get(set, "All")
	for n, want := range sluiceWant {
		if all[n] != want {
			t.Errorf("All: %s = %q, want %q", n, all[n], want)
		}
	}
	if _, ok := all["DeliveryMode"]; ok {
		t.Errorf("All has the unset DeliveryMode: %v", all)
	}
	// CreateQueue compares parsed values: reordered keys and 2 for "2" match.
	same := map[string]string{"RetryPolicy": `{"maxSeconds":300, "baseSeconds":2,"jitter":"none"}`, "MaxDepth": " 10", "Paused": "true"}
	if again := e.queue("set", same); again != set {
		t.Fatalf("re-create with equal parsed values answered %s", again)
	}
	for attr, v := range map[string]string{
		"RetryPolicy": `{"baseSeconds":2,"maxSeconds":300,"jitter":"full"}`, "MaxDepth": "11", "Paused": "false",
		"DeliveryMode": "at-most-once", "DeadLetterWebhook": "https://hooks.example.com/other", "HealthDepth": "6,60",
		"MaxInFlight": "99", "MaxReceivesPerSecond": "0.25",
	} {
		_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("set"), Attributes: map[string]string{attr: v}})
		var exists *types.QueueNameExists
		if !errors.As(err, &exists) || !strings.Contains(exists.ErrorMessage(), attr) {
			t.Errorf("re-create with a different %s: %v", attr, err)
		}
	}

	// SetQueueAttributes changes them; back to the default, All drops them.
	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &set, Attributes: map[string]string{
		"Paused": "false", "LowPriorityMaxDepth": "0", "MaxDepth": "7", "RetryPolicy": `{"baseSeconds":1,"maxSeconds":"8"}`, "DeadLetterWebhook": "",
		"HealthAge": "", "HealthDepth": "0,20", "MaxInFlight": "", "MaxReceivesPerSecond": "20",
	}}); err != nil {
		t.Fatal(err)
	}
	all = get(set, "All")
	if all["HealthDepth"] != "0,20" || all["MaxReceivesPerSecond"] != "20" {
		t.Errorf("HealthDepth and MaxReceivesPerSecond after SetQueueAttributes: %q %q, want 0,20 and 20", all["HealthDepth"], all["MaxReceivesPerSecond"])
	}
	for _, n := range []string{"Paused", "LowPriorityMaxDepth", "DeadLetterWebhook", "HealthAge", "MaxInFlight"} {
		if _, ok := all[n]; ok {
			t.Errorf("All after resetting %s still has it: %v", n, all)
		}
	}
	if all["MaxDepth"] != "7" || all["RetryPolicy"] != `{"baseSeconds":1,"maxSeconds":8,"jitter":"full"}` {
		t.Errorf("All after SetQueueAttributes: %v", all)
	}
	named = get(set, "Paused", "MaxDepth", "VisibilityTimeout")
	if len(named) != 3 || named["Paused"] != "false" || named["MaxDepth"] != "7" || named["VisibilityTimeout"] != "30" {
		t.Errorf("by name after SetQueueAttributes: %v", named)
	}

	// At-most-once: a standard queue without a redrive or retry policy.
	amo := e.queue("amo", map[string]string{"DeliveryMode": "at-most-once"})
	if got := get(amo, "All")["DeliveryMode"]; got != "at-most-once" {
		t.Errorf("DeliveryMode = %q", got)
	}
	_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("amo.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "DeliveryMode": "at-most-once"}})
	var badValue *types.InvalidAttributeValue
	if !errors.As(err, &badValue) {
		t.Errorf("at-most-once FIFO queue: %v", err)
	}
	_, err = e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &amo, Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + qarn("plain") + `","maxReceiveCount":3}`}})
	if !errors.As(err, &badValue) {
		t.Errorf("RedrivePolicy on an at-most-once queue: %v", err)
	}

	for i, attrs := range sluiceRefusals {
		_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bad" + strconv.Itoa(i)), Attributes: attrs})
		if !errors.As(err, &badValue) {
			t.Errorf("CreateQueue %v: %v, want InvalidAttributeValue", attrs, err)
		}
		_, err = e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &plain, Attributes: attrs})
		if !errors.As(err, &badValue) {
			t.Errorf("SetQueueAttributes %v: %v, want InvalidAttributeValue", attrs, err)
		}
	}
	if got := get(plain, "All"); len(got) != 12 {
		t.Errorf("refused settings changed the plain queue: %v", got)
	}
}

// queryAttrs appends Attribute.N.Name/Value pairs to v in a fixed order.
func queryAttrs(v url.Values, attrs map[string]string) url.Values {
	// Any order works; sorted keeps failures reproducible.
	names := slices.Sorted(maps.Keys(attrs))
	for i, n := range names {
		p := "Attribute." + strconv.Itoa(i+1)
		v.Set(p+".Name", n)
		v.Set(p+".Value", attrs[n])
	}
	return v
}

func TestSluiceAttributesQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	create := func(name string, attrs map[string]string) (int, string) {
		t.Helper()
		resp, body := e.form("/", queryAttrs(vals("Action", "CreateQueue", "QueueName", name), attrs))
		return resp.StatusCode, body
	}
	get := func(name string, names ...string) map[string]string {
		t.Helper()
		v := vals("Action", "GetQueueAttributes", "QueueUrl", e.URL+"/"+acct+"/"+name)
		for i, n := range names {
			v.Set("AttributeName."+strconv.Itoa(i+1), n)
		}
		resp, body := e.form("/", v)
		var out struct {
			Attributes []nameValue `xml:"GetQueueAttributesResult>Attribute"`
		}
		decode(t, body, "GetQueueAttributesResponse", &out)
		if resp.StatusCode != 200 {
			t.Fatalf("GetQueueAttributes %v: %d %s", names, resp.StatusCode, body)
		}
		m := map[string]string{}
		for _, a := range out.Attributes {
			if _, dup := m[a.Name]; dup {
				t.Fatalf("attribute %s twice: %s", a.Name, body)
			}
			m[a.Name] = a.Value
		}
		return m
	}

	if st, body := create("qplain", nil); st != 200 {
		t.Fatalf("CreateQueue: %d %s", st, body)
	}
	all := get("qplain", "All")
	for _, n := range sluiceNames {
		if _, ok := all[n]; ok {
			t.Errorf("All on a plain queue has %s: %v", n, all)
		}
	}
	named := get("qplain", sluiceNames...)
	for _, n := range sluiceNames {
		if v, ok := named[n]; !ok || v != sluiceDefaults[n] {
			t.Errorf("%s by name on a plain queue = %q (present %v), want %q", n, v, ok, sluiceDefaults[n])
		}
	}
	// The empty defaults are empty <Value/> elements, as SQS writes an empty
	// attribute, not absent ones.
	_, body := e.form("/", vals("Action", "GetQueueAttributes", "QueueUrl", e.URL+"/"+acct+"/qplain", "AttributeName.1", "RetryPolicy"))
	if !strings.Contains(body, "<Name>RetryPolicy</Name><Value></Value>") && !strings.Contains(body, "<Name>RetryPolicy</Name><Value/>") {
		t.Errorf("RetryPolicy by name: %s", body)
	}

	if st, body := create("qset", sluiceSet); st != 200 {
		t.Fatalf("CreateQueue with Sluice attributes: %d %s", st, body)
	}
	all = get("qset", "All")
	for n, want := range sluiceWant {
		if all[n] != want {
			t.Errorf("All: %s = %q, want %q", n, all[n], want)
		}
	}
	if st, body := create("qset", map[string]string{"RetryPolicy": `{"baseSeconds":2,"jitter":"none","maxSeconds":"300"}`, "LowPriorityMaxDepth": "5"}); st != 200 {
		t.Errorf("re-create with equal parsed values: %d %s", st, body)
	}
	resp, body := e.form("/", queryAttrs(vals("Action", "CreateQueue", "QueueName", "qset"), map[string]string{"MaxDepth": "9"}))
	if er := expectError(t, resp, body, 400, "QueueAlreadyExists"); !strings.Contains(er.Message, "MaxDepth") {
		t.Errorf("re-create with a different MaxDepth: %+v", er)
	}

	resp, body = e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", e.URL+"/"+acct+"/qset"),
		map[string]string{"Paused": "false", "MaxDepth": "20", "DeliveryMode": "at-least-once"}))
	if resp.StatusCode != 200 {
		t.Fatalf("SetQueueAttributes: %d %s", resp.StatusCode, body)
	}
	all = get("qset", "All")
	if _, ok := all["Paused"]; ok || all["MaxDepth"] != "20" || all["LowPriorityMaxDepth"] != "5" {
		t.Errorf("All after SetQueueAttributes: %v", all)
	}

	for i, attrs := range sluiceRefusals {
		resp, body := e.form("/", queryAttrs(vals("Action", "CreateQueue", "QueueName", "qbad"+strconv.Itoa(i)), attrs))
		expectError(t, resp, body, 400, "InvalidAttributeValue")
		resp, body = e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", e.URL+"/"+acct+"/qplain"), attrs))
		expectError(t, resp, body, 400, "InvalidAttributeValue")
	}
}

// The schedule form of RetryPolicy ({"delays":[...]}) and jitter up, set and
// read in both protocols: normalized on the way back, compared parsed by
// CreateQueue, refused with InvalidAttributeValue and a reason that says the
// limits.
var (
	scheduleSet  = `{ "delays": [10, "60", 300] }`
	scheduleWant = `{"delays":[10,60,300],"jitter":"none"}`
	scheduleUp   = `{"jitter":"up","delays":[5,30]}`
	upWant       = `{"delays":[5,30],"jitter":"up"}`
	// scheduleRefusals and the text each error must hold.
	scheduleRefusals = map[string]string{
		`{"delays":[10,60],"maxSeconds":300}`: "delays cannot be given with baseSeconds or maxSeconds",
		`{"delays":[]}`:                       "delays must be a list of 1 to 25 integers.",
		`{"delays":[10,43201]}`:               "Invalid value for delays: each must be an integer from 1 to 43200.",
	}
)

func TestRetryScheduleJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	get := func(url string) string {
		t.Helper()
		out, err := e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes["RetryPolicy"]
	}
	q := e.queue("sched", map[string]string{"RetryPolicy": scheduleSet})
	if got := get(q); got != scheduleWant {
		t.Errorf("RetryPolicy after CreateQueue = %s, want %s", got, scheduleWant)
	}
	if again := e.queue("sched", map[string]string{"RetryPolicy": scheduleWant}); again != q {
		t.Errorf("re-create with the normalized schedule answered %s", again)
	}
	_, err := e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("sched"),
		Attributes: map[string]string{"RetryPolicy": `{"delays":[10,60]}`}})
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) || !strings.Contains(exists.ErrorMessage(), "RetryPolicy") {
		t.Errorf("re-create with another schedule: %v", err)
	}
	if _, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &q,
		Attributes: map[string]string{"RetryPolicy": scheduleUp}}); err != nil {
		t.Fatal(err)
	}
	if got := get(q); got != upWant {
		t.Errorf("RetryPolicy after SetQueueAttributes = %s, want %s", got, upWant)
	}
	for v, reason := range scheduleRefusals {
		_, err := e.client.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &q,
			Attributes: map[string]string{"RetryPolicy": v}})
		var bad *types.InvalidAttributeValue
		if !errors.As(err, &bad) || !strings.Contains(bad.ErrorMessage(), reason) || !strings.Contains(bad.ErrorMessage(), "RetryPolicy") {
			t.Errorf("SetQueueAttributes RetryPolicy=%s: %v, want InvalidAttributeValue saying %q", v, err, reason)
		}
	}
	if got := get(q); got != upWant {
		t.Errorf("refused schedules changed the queue: RetryPolicy = %s", got)
	}
}

func TestRetryScheduleQuery(t *testing.T) {
	t.Parallel()
	e := setup(t)
	qurl := e.URL + "/" + acct + "/qsched"
	get := func() string {
		t.Helper()
		resp, body := e.form("/", vals("Action", "GetQueueAttributes", "QueueUrl", qurl, "AttributeName.1", "RetryPolicy"))
		var out struct {
			Attributes []nameValue `xml:"GetQueueAttributesResult>Attribute"`
		}
		decode(t, body, "GetQueueAttributesResponse", &out)
		if resp.StatusCode != 200 || len(out.Attributes) != 1 || out.Attributes[0].Name != "RetryPolicy" {
			t.Fatalf("GetQueueAttributes RetryPolicy: %d %s", resp.StatusCode, body)
		}
		return out.Attributes[0].Value
	}
	resp, body := e.form("/", queryAttrs(vals("Action", "CreateQueue", "QueueName", "qsched"), map[string]string{"RetryPolicy": scheduleSet}))
	if resp.StatusCode != 200 {
		t.Fatalf("CreateQueue: %d %s", resp.StatusCode, body)
	}
	if got := get(); got != scheduleWant {
		t.Errorf("RetryPolicy after CreateQueue = %s, want %s", got, scheduleWant)
	}
	resp, body = e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", qurl), map[string]string{"RetryPolicy": scheduleUp}))
	if resp.StatusCode != 200 {
		t.Fatalf("SetQueueAttributes: %d %s", resp.StatusCode, body)
	}
	if got := get(); got != upWant {
		t.Errorf("RetryPolicy after SetQueueAttributes = %s, want %s", got, upWant)
	}
	for v, reason := range scheduleRefusals {
		resp, body := e.form("/", queryAttrs(vals("Action", "SetQueueAttributes", "QueueUrl", qurl), map[string]string{"RetryPolicy": v}))
		if er := expectError(t, resp, body, 400, "InvalidAttributeValue"); !strings.Contains(er.Message, reason) {
			t.Errorf("SetQueueAttributes RetryPolicy=%s: %q, want it to say %q", v, er.Message, reason)
		}
	}
	if got := get(); got != upWant {
		t.Errorf("refused schedules changed the queue: RetryPolicy = %s", got)
	}
}
