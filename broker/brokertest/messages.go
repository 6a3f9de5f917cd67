package brokertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

var messageTests = []testCase{
	{"SendReceiveDelete", testSendReceiveDelete},
	{"SingleSendWithoutID", testSingleSendWithoutID},
	{"MessageIDsUnique", testMessageIDsUnique},
	{"MissingQueue", testMessageOpsOnMissingQueue},
	{"BodyCharacters", testBodyCharacters},
	{"EmptyBody", testEmptyBody},
	{"MaximumMessageSize", testMaximumMessageSize},
	{"OneMiBBody", testOneMiBBody},
	{"MessageAttributeLimits", testMessageAttributeLimits},
	{"Counters", testCounters},
	{"QueueDelay", testQueueDelay},
	{"MessageDelay", testMessageDelay},
}

// traceHeader is a well-formed X-Ray header, the one settable system attribute.
const traceHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

func sampleAttributes() map[string]model.MessageAttribute {
	return map[string]model.MessageAttribute{
		"s":       {DataType: "String", StringValue: "héllo wörld"},
		"n":       {DataType: "Number", StringValue: "-1.5e3"},
		"b":       {DataType: "Binary", BinaryValue: []byte{0, 1, 2, 0xff}},
		"f":       {DataType: "Number.float", StringValue: "3.14"},
		"png":     {DataType: "Binary.png", BinaryValue: []byte("\x89PNG\r\n")},
		"a.b-c_d": {DataType: "String.custom-label", StringValue: "x"},
		"unicode": {DataType: "String", StringValue: "😀 ünïcödé"}, // names are ASCII; values need not be
	}
}

func sampleSystemAttributes() map[string]model.MessageAttribute {
	return map[string]model.MessageAttribute{"AWSTraceHeader": {DataType: "String", StringValue: traceHeader}}
}

// wantSameMessage checks that a delivery carries what was sent.
func wantSameMessage(t testing.TB, d model.Delivery, id string, sent model.SendEntry, sentAt time.Time) {
	t.Helper()
	if d.ID != id {
		t.Fatalf("delivered message id %s, want %s", d.ID, id)
	}
	if d.Body != sent.Body {
		t.Fatalf("delivered body %q, want %q", d.Body, sent.Body)
	}
	if !sameAttrs(d.Attributes, sent.Attributes) {
		t.Fatalf("delivered attributes %v, want %v", d.Attributes, sent.Attributes)
	}
	if got, want := d.SystemAttributes["AWSTraceHeader"], sent.SystemAttributes["AWSTraceHeader"]; !sameAttrs(
		map[string]model.MessageAttribute{"x": got}, map[string]model.MessageAttribute{"x": want}) {
		t.Fatalf("delivered AWSTraceHeader %+v, want %+v", got, want)
	}
	if d.SenderID != sent.SenderID {
		t.Fatalf("delivered SenderID %q, want %q", d.SenderID, sent.SenderID)
	}
	wantTime(t, "delivered SentAt", d.SentAt, sentAt)
}

func testSendReceiveDelete(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.advance(3 * time.Second)
	sentAt := e.clock.Now()
	entry := model.SendEntry{
		ID:               "m1",
		Body:             "héllo wörld 😀 \t\r\n <xml>&amp; \uFFFD",
		Attributes:       sampleAttributes(),
		SystemAttributes: sampleSystemAttributes(),
		SenderID:         "AIDAEXAMPLE",
	}
	res := e.send("q", entry)[0]
	if res.SequenceNumber != "" {
		t.Fatalf("standard queue send returned SequenceNumber %q", res.SequenceNumber)
	}
	e.wantStats("q", 1, 0, 0)

	e.advance(2 * time.Second)
	receivedAt := e.clock.Now()
	d := e.receiveOne("q")
	wantSameMessage(t, d, res.MessageID, entry, sentAt)
	if d.ReceiveCount != 1 {
		t.Fatalf("first delivery ReceiveCount = %d, want 1", d.ReceiveCount)
	}
	wantTime(t, "FirstReceiveAt", d.FirstReceiveAt, receivedAt)
	if d.DeadLetterSource != "" || d.GroupID != "" || d.SequenceNumber != "" {
		t.Fatalf("standard delivery has DeadLetterSource %q GroupID %q SequenceNumber %q", d.DeadLetterSource, d.GroupID, d.SequenceNumber)
	}
	e.wantStats("q", 0, 1, 0)

	e.mustDelete("q", d.Receipt)
	e.wantStats("q", 0, 0, 0)
	// A deleted message never comes back, not even after its lease would have ended.
	e.advance(time.Hour)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 0)
}

func testSingleSendWithoutID(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	res, err := e.trySend("q", model.SendEntry{Body: "x"})
	if err != nil || res[0].Err != nil {
		t.Fatalf("single send without an entry id: %v %v", err, res[0].Err)
	}
	if d := e.receiveOne("q"); d.ID != res[0].MessageID {
		t.Fatalf("received %s, want %s", d.ID, res[0].MessageID)
	}
}

func testMessageIDsUnique(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	seen := map[string]bool{}
	for round := 0; round < 3; round++ {
		var entries []model.SendEntry
		for i := 0; i < 10; i++ {
			entries = append(entries, model.SendEntry{Body: fmt.Sprint(round, i)})
		}
		for _, r := range e.send("q", entries...) {
			if seen[r.MessageID] {
				t.Fatalf("message id %s returned twice", r.MessageID)
			}
			seen[r.MessageID] = true
		}
	}
	for _, d := range e.receiveN(model.ReceiveRequest{Queue: "q"}, 30) {
		if !seen[d.ID] {
			t.Fatalf("received unknown message id %s", d.ID)
		}
		delete(seen, d.ID)
	}
}

func testMessageOpsOnMissingQueue(t *testing.T, s suite) {
	e := s.setup(t)
	q := e.createQueue("q", nil)
	_, err := e.b.Send(e.ctx, "missing", []model.SendEntry{{ID: "a", Body: "x"}})
	wantErr(t, "Send to a missing queue", err, model.ErrQueueDoesNotExist)
	_, err = e.receive(model.ReceiveRequest{Queue: "missing", WaitTime: dur(0)})
	wantErr(t, "short poll of a missing queue", err, model.ErrQueueDoesNotExist)
	_, err = e.receive(model.ReceiveRequest{Queue: "missing", WaitTime: dur(20 * time.Second)})
	wantErr(t, "long poll of a missing queue", err, model.ErrQueueDoesNotExist)
	receipt := e.be.Receipts().Encode(model.Receipt{QueueID: q.ID, Key: 1, Lease: 1})
	wantErr(t, "Delete on a missing queue", e.deleteErr("missing", receipt), model.ErrQueueDoesNotExist)
	wantErr(t, "ChangeVisibility on a missing queue", e.changeVisErr("missing", receipt, 0), model.ErrQueueDoesNotExist)
}

func testBodyCharacters(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	valid := []string{"\t\n\r", " ", "\uD7FF", "\uE000", "\uFFFD\uFFFD", "\U0010FFFF", "😀", "a\rb"}
	for _, body := range valid {
		e.sendBody("q", body)
		if d := e.receiveOne("q"); d.Body != body {
			t.Fatalf("body %q came back as %q", body, d.Body)
		} else {
			e.mustDelete("q", d.Receipt)
		}
	}
	invalid := []string{"\x00", "a\x08b", "\x1f", "\uFFFE", "\uFFFF", "\xff", "ok\xc3", "\xed\xa0\x80"}
	for _, body := range invalid {
		err := e.sendErr("q", model.SendEntry{Body: body})
		wantErr(t, fmt.Sprintf("Send body %q", body), err, model.ErrInvalidMessageContents)
	}
	e.wantStats("q", 0, 0, 0)
}

func testEmptyBody(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	wantErr(t, "Send with an empty body", e.sendErr("q", model.SendEntry{}), model.ErrMissingParameter)
	e.wantStats("q", 0, 0, 0)
}

func testMaximumMessageSize(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrMaximumMessageSize: "1024"})
	ok := []model.SendEntry{
		{Body: strings.Repeat("a", 1024)},
		// 1000 + len("k") + len("String") + 17 = 1024
		{Body: strings.Repeat("b", 1000), Attributes: map[string]model.MessageAttribute{"k": {DataType: "String", StringValue: strings.Repeat("v", 17)}}},
		// AWSTraceHeader does not count toward the size.
		{Body: strings.Repeat("c", 1024), SystemAttributes: sampleSystemAttributes()},
		// Multi-byte characters count in UTF-8 bytes: 512 × 2 bytes.
		{Body: strings.Repeat("é", 512)},
	}
	for i, entry := range ok {
		if err := e.sendErr("q", entry); err != nil {
			t.Fatalf("message %d of exactly 1024 bytes refused: %v", i, err)
		}
	}
	tooBig := []model.SendEntry{
		{Body: strings.Repeat("a", 1025)},
		{Body: strings.Repeat("b", 1000), Attributes: map[string]model.MessageAttribute{"k": {DataType: "String", StringValue: strings.Repeat("v", 18)}}},
		{Body: strings.Repeat("b", 1000), Attributes: map[string]model.MessageAttribute{"k": {DataType: "Binary", BinaryValue: make([]byte, 18)}}},
		{Body: strings.Repeat("é", 512) + "x"},
	}
	for i, entry := range tooBig {
		wantErr(t, fmt.Sprintf("message %d of 1025 bytes", i), e.sendErr("q", entry), model.ErrInvalidParameterValue)
	}
	e.wantStats("q", int64(len(ok)), 0, 0)
}

// testOneMiBBody: the default MaximumMessageSize is 1 MiB, and such a body
// round-trips intact.
func testOneMiBBody(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	var sb strings.Builder
	for sb.Len() < model.MaxMessageBytes {
		fmt.Fprintf(&sb, "%08d", sb.Len())
	}
	body := sb.String()[:model.MaxMessageBytes]
	e.sendBody("q", body)
	if d := e.receiveOne("q"); d.Body != body {
		t.Fatalf("1 MiB body came back with %d bytes, or altered", len(d.Body))
	}
	wantErr(t, "body of 1 MiB + 1", e.plainSendErr("q", model.SendEntry{Body: body + "x"}), model.ErrInvalidParameterValue)
}

func testMessageAttributeLimits(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	str := func(v string) model.MessageAttribute {
		return model.MessageAttribute{DataType: "String", StringValue: v}
	}
	ten := map[string]model.MessageAttribute{}
	for i := 0; i < 10; i++ {
		ten[fmt.Sprintf("a%d", i)] = str("v")
	}
	if err := e.sendErr("q", model.SendEntry{Body: "x", Attributes: ten}); err != nil {
		t.Fatalf("10 attributes refused: %v", err)
	}
	eleven := map[string]model.MessageAttribute{"a10": str("v")}
	for k, v := range ten {
		eleven[k] = v
	}
	bad := map[string]map[string]model.MessageAttribute{
		"11 attributes":        eleven,
		"AWS. prefix":          {"AWS.x": str("v")},
		"amazon. prefix":       {"amazon.y": str("v")},
		"leading dot":          {".a": str("v")},
		"trailing dot":         {"a.": str("v")},
		"double dot":           {"a..b": str("v")},
		"space in name":        {"a b": str("v")},
		"non-ASCII name":       {"öther": str("v")},
		"empty name":           {"": str("v")},
		"unknown type":         {"a": {DataType: "Foo", StringValue: "v"}},
		"empty type":           {"a": {DataType: "", StringValue: "v"}},
		"Stringy type":         {"a": {DataType: "Stringy", StringValue: "v"}},
		"empty string value":   {"a": str("")},
		"empty binary value":   {"a": {DataType: "Binary"}},
		"not a number":         {"a": {DataType: "Number", StringValue: "abc"}},
		"bad chars in a value": {"a": str("\x00")},
	}
	for what, attrs := range bad {
		wantErr(t, "Send with "+what, e.sendErr("q", model.SendEntry{Body: "x", Attributes: attrs}), model.ErrInvalidParameterValue)
	}
	badSys := map[string]map[string]model.MessageAttribute{
		"unknown system attribute": {"SenderId": str("me")},
		"binary AWSTraceHeader":    {"AWSTraceHeader": {DataType: "Binary", BinaryValue: []byte("x")}},
		"empty AWSTraceHeader":     {"AWSTraceHeader": str("")},
	}
	for what, attrs := range badSys {
		wantErr(t, "Send with "+what, e.sendErr("q", model.SendEntry{Body: "x", SystemAttributes: attrs}), model.ErrInvalidParameterValue)
	}
	e.wantStats("q", 1, 0, 0)
}

// testCounters checks Visible/InFlight/Delayed after each step.
func testCounters(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.wantStats("q", 0, 0, 0)
	e.send("q", model.SendEntry{Body: "r1"}, model.SendEntry{Body: "r2"}, model.SendEntry{Body: "r3"})
	e.wantStats("q", 3, 0, 0)
	e.send("q", model.SendEntry{Body: "d1", Delay: dur(30 * time.Second)}, model.SendEntry{Body: "d2", Delay: dur(30 * time.Second)})
	e.wantStats("q", 3, 0, 2)
	ds := e.receiveN(model.ReceiveRequest{Queue: "q"}, 2)
	e.wantStats("q", 1, 2, 2)
	e.mustDelete("q", ds[0].Receipt)
	e.wantStats("q", 1, 1, 2)
	e.mustChangeVis("q", ds[1].Receipt, 0)
	e.wantStats("q", 2, 0, 2)
	e.advance(30 * time.Second)
	e.eventuallyStats("q", 4, 0, 0)
	ds = e.receiveN(model.ReceiveRequest{Queue: "q", Visibility: dur(10 * time.Second)}, 4)
	if got := bodies(ds); strings.Join(got, ",") != "d1,d2,r2,r3" && strings.Join(got, ",") != "d1,d2,r1,r3" && strings.Join(got, ",") != "d1,d2,r1,r2" {
		t.Fatalf("received %v", got)
	}
	e.wantStats("q", 0, 4, 0)
	e.advance(10 * time.Second)
	e.eventuallyStats("q", 4, 0, 0)
	ds = e.receiveN(model.ReceiveRequest{Queue: "q"}, 4)
	for _, d := range ds {
		e.mustDelete("q", d.Receipt)
	}
	e.wantStats("q", 0, 0, 0)
}

func testQueueDelay(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", map[string]string{model.AttrDelaySeconds: "10"})
	e.sendBody("q", "a")
	e.wantStats("q", 0, 0, 1)
	e.receiveNone("q")
	e.advance(9 * time.Second)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 1)
	e.advance(time.Second)
	e.eventuallyStats("q", 1, 0, 0)
	if d := e.receiveOne("q"); d.Body != "a" {
		t.Fatalf("received %q", d.Body)
	} else {
		e.mustDelete("q", d.Receipt)
	}
	// A per-message delay of 0 overrides the queue's delay; 5 s shortens it.
	e.send("q", model.SendEntry{Body: "now", Delay: dur(0)}, model.SendEntry{Body: "soon", Delay: dur(5 * time.Second)})
	e.wantStats("q", 1, 0, 1)
	if d := e.receiveOne("q"); d.Body != "now" {
		t.Fatalf("received %q, want the undelayed message", d.Body)
	}
	e.advance(5 * time.Second)
	e.eventuallyStats("q", 1, 1, 0)
	if d := e.receiveOne("q"); d.Body != "soon" {
		t.Fatalf("received %q, want the 5 s message", d.Body)
	}
}

func testMessageDelay(t *testing.T, s suite) {
	e := s.setup(t)
	e.createQueue("q", nil)
	e.send("q", model.SendEntry{Body: "max", Delay: dur(model.MaxDelay)}, model.SendEntry{Body: "short", Delay: dur(3 * time.Second)})
	e.wantStats("q", 0, 0, 2)
	for _, bad := range []time.Duration{model.MaxDelay + time.Second, -time.Second} {
		wantErr(t, fmt.Sprintf("per-message delay %v", bad), e.sendErr("q", model.SendEntry{Body: "x", Delay: dur(bad)}), model.ErrInvalidParameterValue)
	}
	e.advance(2 * time.Second)
	e.receiveNone("q")
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.Body != "short" {
		t.Fatalf("received %q, want short", d.Body)
	} else {
		e.mustDelete("q", d.Receipt)
	}
	e.advance(model.MaxDelay - 4*time.Second)
	e.receiveNone("q")
	e.wantStats("q", 0, 0, 1)
	e.advance(time.Second)
	if d := e.receiveOne("q"); d.Body != "max" {
		t.Fatalf("received %q, want max", d.Body)
	}
}
