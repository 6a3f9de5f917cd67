package sqs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// fastCase is one input struct of the fast path, with a fresh value maker.
type fastCase struct {
	action string
	new    func() any
	gen    func(g *reqGen)
}

var fastCases = []fastCase{
	{"SendMessage", func() any { return new(sendMessageInput) }, func(g *reqGen) { g.object(g.sendMembers(true)) }},
	{"SendMessageBatch", func() any { return new(sendMessageBatchInput) }, func(g *reqGen) {
		g.object([]member{g.queueURL(), {"Entries", func() { g.list(func() { g.object(g.sendMembers(false)) }) }}})
	}},
	{"ReceiveMessage", func() any { return new(receiveMessageInput) }, func(g *reqGen) {
		g.object([]member{g.queueURL(),
			{"AttributeNames", g.stringList}, {"MessageSystemAttributeNames", g.stringList}, {"MessageAttributeNames", g.stringList},
			{"MaxNumberOfMessages", g.number}, {"VisibilityTimeout", g.number}, {"WaitTimeSeconds", g.number},
			{"ReceiveRequestAttemptId", g.str}})
	}},
	{"DeleteMessage", func() any { return new(deleteMessageInput) }, func(g *reqGen) {
		g.object([]member{g.queueURL(), {"ReceiptHandle", g.str}})
	}},
	{"DeleteMessageBatch", func() any { return new(deleteMessageBatchInput) }, func(g *reqGen) {
		g.object([]member{g.queueURL(), {"Entries", func() {
			g.list(func() { g.object([]member{{"Id", g.str}, {"ReceiptHandle", g.str}}) })
		}}})
	}},
	{"ChangeMessageVisibility", func() any { return new(changeVisibilityInput) }, func(g *reqGen) {
		g.object([]member{g.queueURL(), {"ReceiptHandle", g.str}, {"VisibilityTimeout", g.number}})
	}},
	{"ChangeMessageVisibilityBatch", func() any { return new(changeVisibilityBatchInput) }, func(g *reqGen) {
		g.object([]member{g.queueURL(), {"Entries", func() {
			g.list(func() { g.object([]member{{"Id", g.str}, {"ReceiptHandle", g.str}, {"VisibilityTimeout", g.number}}) })
		}}})
	}},
}

// reqGen writes a random JSON request body. odd is set when it wrote
// something the fast path must refuse (an unknown or miscased member name,
// a member twice, a wrong type, text that is not valid Unicode in a string
// field, a syntax error …); without it the fast path must accept the body.
type reqGen struct {
	r    *rand.Rand
	b    bytes.Buffer
	odd  bool
	rare int // 1 in rare of the odd choices are taken
}

type member struct {
	name  string
	value func()
}

func (g *reqGen) chance(n int) bool { return g.r.IntN(n) == 0 }

// oddly is true, rarely, and marks the body odd when it is.
func (g *reqGen) oddly() bool {
	if g.chance(g.rare) {
		g.odd = true
		return true
	}
	return false
}

func (g *reqGen) ws() {
	switch g.r.IntN(6) {
	case 0:
		g.b.WriteString(" ")
	case 1:
		g.b.WriteString("\n\t \r")
	}
}

func (g *reqGen) object(members []member) {
	g.ws()
	g.b.WriteByte('{')
	g.r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	first := true
	for _, m := range members {
		if g.chance(3) {
			continue // absent
		}
		times := 1
		if g.oddly() {
			times = 2 // a member twice
		}
		for range times {
			if !first {
				g.ws()
				g.b.WriteByte(',')
			}
			first = false
			g.ws()
			name := m.name
			switch {
			case g.oddly():
				name = strings.ToLower(name) // encoding/json matches it anyway
			case g.oddly():
				name = "Unknown" + name
			case g.oddly():
				name = `\u00` + fmt.Sprintf("%x", name[0]) + name[1:] // an escaped name
			}
			g.b.WriteString(`"` + name + `"`)
			g.ws()
			g.b.WriteByte(':')
			g.ws()
			switch {
			case g.chance(12):
				g.b.WriteString("null")
			case g.oddly():
				g.wrongValue()
			default:
				m.value()
			}
		}
	}
	g.ws()
	g.b.WriteByte('}')
}

func (g *reqGen) wrongValue() {
	vals := []string{"true", "false", "12", "-1.5e3", "{}", "[]", `{"a":1}`, `["x"]`, `"x"`}
	g.b.WriteString(vals[g.r.IntN(len(vals))])
}

func (g *reqGen) list(elem func()) {
	g.b.WriteByte('[')
	for i := range g.r.IntN(5) {
		if i > 0 {
			g.ws()
			g.b.WriteByte(',')
		}
		g.ws()
		if g.chance(10) {
			g.b.WriteString("null")
		} else {
			elem()
		}
	}
	g.ws()
	g.b.WriteByte(']')
}

func (g *reqGen) stringList() { g.list(g.str) }

func (g *reqGen) queueURL() member { return member{"QueueUrl", g.str} }

func (g *reqGen) sendMembers(top bool) []member {
	ms := []member{
		{"Id", g.str}, {"MessageBody", g.text}, {"DelaySeconds", g.number},
		{"MessageAttributes", g.attrMap}, {"MessageSystemAttributes", g.attrMap},
		{"MessageDeduplicationId", g.str}, {"MessageGroupId", g.str},
	}
	if top {
		ms = append(ms, g.queueURL())
	}
	return ms
}

func (g *reqGen) attrMap() {
	g.b.WriteByte('{')
	n := g.r.IntN(4)
	names := map[string]bool{}
	for i := range n {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.ws()
		start := g.b.Len()
		if i > 0 && g.chance(8) {
			g.b.WriteString(`"a0"`) // perhaps a name twice
		} else {
			g.str()
		}
		// A name twice (as written, or once decoded) is refused both ways.
		var name string
		if json.Unmarshal(g.b.Bytes()[start:], &name) == nil && names[name] {
			g.odd = true
		}
		names[name] = true
		g.ws()
		g.b.WriteByte(':')
		if g.chance(10) {
			g.b.WriteString("null")
			continue
		}
		types := []string{"String", "Number", "Binary", "String.custom", "Binary.x"}
		g.object([]member{
			{"DataType", func() { g.b.WriteString(`"` + types[g.r.IntN(len(types))] + `"`) }},
			{"StringValue", g.text},
			{"BinaryValue", g.blob},
		})
	}
	g.b.WriteByte('}')
}

// pieces of string literals: valid text, text that is not valid Unicode
// (kept by the text fields, replaced by U+FFFD in the others), and
// invalid JSON.
var (
	validPieces = []string{"a", "Z", "0", " ", `\"`, `\\`, `\/`, "/", `\b`, `\f`, `\n`, `\r`, `\t`, `\u0000`, `\u001f`,
		`\u00e9`, `\u00E9`, "é", "☃", "😀", `\ud83d\ude00`, `\uD83D\uDE00`, `\u2028`, "\u2028", `\ufffd`, "\ufffd",
		"<>&", `\u003c`, "{}[],:", "null", `\\ud800`, "\x7f", `\u0041`}
	invalidUnicodePieces = []string{`\ud800`, `\udc00`, `\ud83d\u0041`, `\uD83D\uD83D`, `\ude00\ud83d`, "\xff", "\xed\xa0\x80", "\xe2\x82", "\xc3", "\x80"}
	invalidJSONPieces    = []string{"\x01", "\n", `\x`, `\u12`, `\'`, "\t"}
)

// literal writes a string literal; textField says whether text that is not
// valid Unicode is taken as sent (message contents) or is odd.
func (g *reqGen) literal(textField bool) {
	g.b.WriteByte('"')
	for range g.r.IntN(12) {
		switch {
		case textField && g.chance(8), !textField && g.oddly():
			g.b.WriteString(invalidUnicodePieces[g.r.IntN(len(invalidUnicodePieces))])
		case g.oddly():
			g.b.WriteString(invalidJSONPieces[g.r.IntN(len(invalidJSONPieces))])
		default:
			g.b.WriteString(validPieces[g.r.IntN(len(validPieces))])
		}
	}
	g.b.WriteByte('"')
}

func (g *reqGen) str()  { g.literal(false) }
func (g *reqGen) text() { g.literal(true) }

func (g *reqGen) number() {
	plain := []string{"0", "10", "-1", "1.5", "1e3", "-0", "0.5E-2", "99999999999999999999", "2147483648", "-2147483649",
		`"10"`, `" 5 "`, `"abc"`, `""`, `"1.5"`, `"é"`, `"-7"`, `"+3"`}
	odd := []string{`"\u0031"`, "01", "1.", "-", "1e", "+1", ".5", `"` + "\xff" + `"`}
	if g.oddly() {
		g.b.WriteString(odd[g.r.IntN(len(odd))])
		return
	}
	g.b.WriteString(plain[g.r.IntN(len(plain))])
}

func (g *reqGen) blob() {
	switch {
	case g.oddly():
		odd := []string{`"!!"`, `"YQ"`, `"YQ\u003d\u003d"`, `"YQ=\n="`, `"é"`}
		g.b.WriteString(odd[g.r.IntN(len(odd))])
	case g.chance(8):
		g.b.WriteString(`""`)
	default:
		raw := make([]byte, g.r.IntN(20))
		for i := range raw {
			raw[i] = byte(g.r.IntN(256))
		}
		g.b.WriteString(`"` + base64.StdEncoding.EncodeToString(raw) + `"`)
	}
}

// body writes one request body of c.
func (g *reqGen) body(c fastCase) []byte {
	g.b.Reset()
	g.odd = false
	switch {
	case g.chance(200):
		g.b.WriteString("null")
		g.odd = true
	case g.chance(200):
		g.b.WriteString("[]")
		g.odd = true
	default:
		c.gen(g)
	}
	g.ws()
	if g.oddly() {
		g.b.WriteString([]string{"x", "{}", ",", "}"}[g.r.IntN(4)])
	}
	return bytes.Clone(g.b.Bytes())
}

// slowFromJSON is the decoding of a JSON body before the fast path.
func slowFromJSON(c fastCase, body []byte) (any, error) {
	in := c.new()
	if len(bytes.TrimSpace(body)) == 0 {
		return in, nil
	}
	if err := decodeJSON(body, in); err != nil {
		return nil, err
	}
	return in, nil
}

// checkFastJSON asserts that the fast path, when it accepts body, gives
// what encoding/json gives, and that the action's decoder (fast path then
// fallback) answers exactly as the decoder before the fast path did.
func checkFastJSON(t *testing.T, c fastCase, body []byte) (accepted bool) {
	t.Helper()
	fast := c.new()
	accepted = decodeJSONFast(body, fast)
	want, wantErr := slowFromJSON(c, body)
	if accepted {
		if wantErr != nil {
			t.Fatalf("%s %q: the fast path accepted what encoding/json refuses: %v", c.action, body, wantErr)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%s %q:\nfast path     %#v\nencoding/json %#v", c.action, body, fast, want)
		}
	}
	got, gotErr := operations[c.action].fromJSON(body)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s %q: error %v, want %v", c.action, body, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %q:\ngot  %#v\nwant %#v", c.action, body, got, want)
	}
	return accepted
}

// TestFastJSONMatchesEncodingJSON decodes thousands of random requests of
// each action of the fast path both ways: every escape, invalid Unicode in
// contents and in other strings, attributes of every type, absent and null
// members, empty lists and maps, numbers as numbers and strings, and, in
// some, what the fast path must refuse (a member name in another case or
// unknown, a member or attribute name twice, a wrong type, a syntax error,
// trailing data).
func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, c := range fastCases {
		t.Run(c.action, func(t *testing.T) {
			t.Parallel()
			g := &reqGen{r: rand.New(rand.NewPCG(11, uint64(len(c.action)))), rare: 80}
			var plain, accepted, odd int
			for range 4000 {
				body := g.body(c)
				ok := checkFastJSON(t, c, body)
				if ok {
					accepted++
				}
				if g.odd {
					odd++
					continue
				}
				plain++
				if !ok {
					t.Fatalf("%s %q: the fast path refused a body in its shape", c.action, body)
				}
			}
			t.Logf("%d bodies in the fast path's shape, %d odd; %d accepted", plain, odd, accepted)
			if plain < 1000 || odd < 500 {
				t.Errorf("the generator's mix is off: %d plain, %d odd", plain, odd)
			}
		})
	}
}

// TestFastJSONEdges: hand-picked bodies, each decoded both ways.
func TestFastJSONEdges(t *testing.T) {
	t.Parallel()
	bodies := map[string][]string{
		"SendMessage": {
			`{}`, ` {} `, `null`, `{"QueueUrl":"q","MessageBody":"a"}`, `{"MessageBody":null}`, `{"MessageBody":""}`,
			`{"MessageBody":"a\ud800b"}`, `{"MessageBody":"` + "\xff" + `"}`, `{"QueueUrl":"` + "\xff" + `"}`,
			`{"queueurl":"q"}`, `{"QueueUrl":"a","QueueUrl":"b"}`, `{"MessageBody":1}`, `{"DelaySeconds":"5"}`,
			`{"DelaySeconds":5}`, `{"DelaySeconds":"x"}`, `{"DelaySeconds":true}`, `{"DelaySeconds":01}`,
			`{"MessageAttributes":{}}`, `{"MessageAttributes":{"a":null}}`, `{"MessageAttributes":{"a":{}}}`,
			`{"MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":""}}}`,
			`{"MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"!!"}}}`,
			`{"MessageAttributes":{"a":{"DataType":"String","StringValue":"x"},"a":{"DataType":"Number","StringValue":"1"}}}`,
			`{"MessageAttributes":{"a":{"DataType":"String","StringListValues":[]}}}`,
			`{"MessageBody":"a"} x`, `{"MessageBody":"a"`, `{"MessageBody":"a",}`, `{,}`, `{"MessageBody" "a"}`,
			"{\"MessageBody\":\"a\"}\n", `{"MessageBody":"\u00e9\ud83d\ude00"}`,
		},
		"ReceiveMessage": {
			`{"AttributeNames":[]}`, `{"AttributeNames":null}`, `{"AttributeNames":[null,"All"]}`, `{"AttributeNames":["a",]}`,
			`{"MaxNumberOfMessages":10,"WaitTimeSeconds":20}`, `{"MaxNumberOfMessages":1e1}`, `{"MaxNumberOfMessages":-0}`,
			`{"AttributeNames":"All"}`, `{"AttributeNames":[1]}`,
			`{"AttributeNames":[` + strings.Repeat(`"a",`, maxFastArray) + `"a"]}`,
		},
		"SendMessageBatch": {
			`{"Entries":[]}`, `{"Entries":[null]}`, `{"Entries":[{}]}`, `{"Entries":[{"Id":"a","MessageBody":"b"},{"Id":"c"}]}`,
			`{"Entries":{}}`, `{"Entries":[{"Id":"a","Id":"b"}]}`,
		},
		"DeleteMessage":           {`{"ReceiptHandle":""}`, `{"ReceiptHandle":null}`, `{"ReceiptHandle":"r\u0000"}`},
		"ChangeMessageVisibility": {`{"ReceiptHandle":"r","VisibilityTimeout":"30"}`, `{"VisibilityTimeout":" 30 "}`},
	}
	// Bodies at the size cap: contents of every escape and multi-byte text.
	big := strings.Repeat(strings.Join(validPieces, ""), 256<<10/len(strings.Join(validPieces, "")))
	bodies["SendMessage"] = append(bodies["SendMessage"], `{"QueueUrl":"q","MessageBody":"`+big+`"}`,
		`{"QueueUrl":"q","MessageBody":"`+big+strings.Join(invalidUnicodePieces, "")+`"}`)
	for _, c := range fastCases {
		for _, b := range bodies[c.action] {
			checkFastJSON(t, c, []byte(b))
		}
	}
}

// FuzzJSONRequestDecode: whenever the fast path accepts a body, it decodes
// it as encoding/json does, and the action's decoder answers as before.
func FuzzJSONRequestDecode(f *testing.F) {
	g := &reqGen{r: rand.New(rand.NewPCG(5, 7)), rare: 80}
	for i, c := range fastCases {
		for range 4 {
			f.Add(uint8(i), g.body(c))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		checkFastJSON(t, fastCases[int(which)%len(fastCases)], body)
	})
}

// BenchmarkDecodeFastVsSlow compares the two decoders on the bench bodies.
func BenchmarkDecodeFastVsSlow(b *testing.B) {
	body := []byte(`{"QueueUrl":"http://127.0.0.1:9324/000000000000/bench","MessageBody":` + quoteJSON(strings.Repeat("body <&> \"quoted\" ", 14)) +
		`,"MessageAttributes":{"trace":{"DataType":"String","StringValue":"abc-123"}}}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !decodeJSONFast(body, new(sendMessageInput)) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := decodeJSON(body, new(sendMessageInput)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
