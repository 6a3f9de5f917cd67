package native

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
)

// The OpenAPI document against the handlers: the same routes both ways,
// every reference resolves, the documented query parameters are the ones
// the handlers take, the error codes are the table's, and real answers of
// every route validate against the documented schema of their status.

// openapi is the parsed document.
type openapi struct {
	doc map[string]any
}

func loadOpenAPI(t *testing.T) *openapi {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi version %q, want 3.1.x", v)
	}
	return &openapi{doc: doc}
}

// operations lists the documented "METHOD path" of every operation.
func (o *openapi) operations() map[string]map[string]any {
	ops := map[string]map[string]any{}
	for path, item := range o.doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			ops[strings.ToUpper(method)+" "+path] = op.(map[string]any)
		}
	}
	return ops
}

// resolve follows a local $ref ("#/components/...").
func (o *openapi) resolve(t *testing.T, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = o.doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			next, ok := cur.(map[string]any)[part]
			if !ok {
				t.Fatalf("$ref %s does not resolve", ref)
			}
			cur = next
		}
		m, _ = cur.(map[string]any)
	}
	t.Fatalf("not an object: %v", v)
	return nil
}

// validate checks v against schema, structurally: type, enum, required and
// additional properties, items, bounds, date-time format. It returns the
// problems found.
func (o *openapi) validate(t *testing.T, schema any, v any, at string) []string {
	s := o.resolve(t, schema)
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	if typ, ok := s["type"]; ok {
		types := []string{}
		switch x := typ.(type) {
		case string:
			types = append(types, x)
		case []any:
			for _, y := range x {
				types = append(types, y.(string))
			}
		}
		if !slices.ContainsFunc(types, func(ty string) bool { return jsonIs(ty, v) }) {
			bad("%v is not of type %v", v, types)
			return errs
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		bad("%v is not one of %v", v, enum)
	}
	if n, ok := v.(float64); ok {
		if lo, ok := s["minimum"].(float64); ok && n < lo {
			bad("%v < minimum %v", n, lo)
		}
		if hi, ok := s["maximum"].(float64); ok && n > hi {
			bad("%v > maximum %v", n, hi)
		}
	}
	if str, ok := v.(string); ok && s["format"] == "date-time" {
		if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
			bad("%q is not a date-time", str)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		for _, r := range asStrings(s["required"]) {
			if _, ok := obj[r]; !ok {
				bad("required property %s is missing", r)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, x := range obj {
			if ps, ok := props[k]; ok {
				errs = append(errs, o.validate(t, ps, x, at+"."+k)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					bad("property %s is not documented", k)
				}
			case map[string]any:
				errs = append(errs, o.validate(t, ap, x, at+"."+k)...)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := s["items"]; ok {
			for i, x := range arr {
				errs = append(errs, o.validate(t, items, x, at+"["+strconv.Itoa(i)+"]")...)
			}
		}
	}
	return errs
}

func jsonIs(typ string, v any) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == math.Trunc(n)
	}
	return false
}

func asStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		out = append(out, x.(string))
	}
	return out
}

// TestOpenAPIMatchesRoutes: every documented operation is routed, and every
// route is documented; each operation's references resolve.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	ops := o.operations()
	routed := map[string]bool{}
	for _, rt := range routes {
		key := rt.method + " " + rt.path
		routed[key] = true
		if _, ok := ops[key]; !ok {
			t.Errorf("route %s is not in openapi.json", key)
		}
	}
	ids := map[string]string{}
	for key, op := range ops {
		if !routed[key] {
			t.Errorf("openapi.json documents %s, which no route serves", key)
		}
		id, _ := op["operationId"].(string)
		if id == "" || ids[id] != "" {
			t.Errorf("%s: operationId %q missing or used twice", key, id)
		}
		ids[id] = key
		for _, p := range asAny(op["parameters"]) {
			o.resolve(t, p)
		}
		if rb, ok := op["requestBody"].(map[string]any); ok {
			o.resolve(t, rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
		}
		for status, r := range op["responses"].(map[string]any) {
			resp := o.resolve(t, r)
			if c, ok := resp["content"].(map[string]any); ok {
				o.resolve(t, c["application/json"].(map[string]any)["schema"])
			} else if status != "204" {
				t.Errorf("%s %s: no content schema", key, status)
			}
		}
	}
	// Each route answers its documented path (not 404 no_such_route, not
	// 405), on an existing queue.
	e := setup(t)
	e.createQueue("q", nil)
	for key := range ops {
		method, path, _ := strings.Cut(key, " ")
		path = strings.NewReplacer("{queue}", "q", "{id}", "some-id").Replace(path)
		r := e.do(method, path, "{}")
		if r.status == http.StatusMethodNotAllowed || codeOf(r) == "no_such_route" {
			t.Errorf("%s: %d %s", key, r.status, r.body)
		}
	}
}

// codeOf is the error code of an answer ("" for another answer).
func codeOf(r response) string {
	var e errorBody
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

func asAny(v any) []any {
	list, _ := v.([]any)
	return list
}

// TestOpenAPIQueryParameters: the documented query parameters of each
// operation are the ones its handler takes.
func TestOpenAPIQueryParameters(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	e := setup(t)
	e.createQueue("q", nil)
	for key, op := range o.operations() {
		method, path, _ := strings.Cut(key, " ")
		path = strings.NewReplacer("{queue}", "q", "{id}", "some-id").Replace(path)
		for _, p := range asAny(op["parameters"]) {
			param := o.resolve(t, p)
			if param["in"] != "query" {
				continue
			}
			schema := o.resolve(t, param["schema"])
			value := "x"
			switch {
			case schema["enum"] != nil:
				value = asStrings(schema["enum"])[0]
			case schema["type"] == "integer":
				value = "1"
			}
			r := e.do(method, path+"?"+param["name"].(string)+"="+value, "{}")
			if codeOf(r) == "unknown_field" {
				t.Errorf("%s: documented parameter %s is refused: %s", key, param["name"], r.body)
			}
		}
		r := e.do(method, path+"?undocumented=1", "{}")
		if codeOf(r) != "unknown_field" {
			t.Errorf("%s: an undocumented query parameter is taken: %d %s", key, r.status, r.body)
		}
	}
}

// TestOpenAPIErrorCodes: the documented ErrorCode enum is the table's codes.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	documented := asStrings(o.resolve(t, map[string]any{"$ref": "#/components/schemas/ErrorCode"})["enum"])
	codes := []string{codeQueueFull}
	for _, row := range errorTable {
		codes = append(codes, row.kind.code)
	}
	sort.Strings(documented)
	sort.Strings(codes)
	if !slices.Equal(documented, codes) {
		t.Fatalf("ErrorCode enum %v\nerror table %v", documented, codes)
	}
}

// TestOpenAPISamples drives every route, successes and errors, and checks
// each answer against the schema documented for its route and status.
func TestOpenAPISamples(t *testing.T) {
	t.Parallel()
	o := loadOpenAPI(t)
	e := setup(t)
	exercise(e)

	ops := o.operations()
	succeeded := map[string]bool{}
	for _, s := range e.samples {
		if s.route == "" {
			continue // no route: checked by TestBadRequests
		}
		op := ops[s.route]
		resp, ok := op["responses"].(map[string]any)[strconv.Itoa(s.status)]
		if !ok {
			t.Errorf("%s answered %d, which openapi.json does not document: %s", s.route, s.status, s.body)
			continue
		}
		if s.status < 300 {
			succeeded[s.route] = true
		}
		content, ok := o.resolve(t, resp)["content"].(map[string]any)
		if !ok {
			if len(s.body) != 0 {
				t.Errorf("%s %d: documented without content, answered %s", s.route, s.status, s.body)
			}
			continue
		}
		var v any
		if err := json.Unmarshal(s.body, &v); err != nil {
			t.Errorf("%s %d: not JSON: %s", s.route, s.status, s.body)
			continue
		}
		schema := content["application/json"].(map[string]any)["schema"]
		for _, p := range o.validate(t, schema, v, "answer") {
			t.Errorf("%s %d: %s\n%s", s.route, s.status, p, s.body)
		}
	}
	for _, rt := range routes {
		if key := rt.method + " " + rt.path; !succeeded[key] {
			t.Errorf("no successful answer of %s was checked: add it to exercise", key)
		}
	}
}

// exercise calls every route, with answers of each shape: a success of
// each, and the common errors.
func exercise(e *env) {
	t := e.t
	e.ok(200, "GET", "/v1/openapi.json", nil)
	e.createQueue("dlq", nil)
	e.ok(200, "POST", "/v1/queues", map[string]any{"name": "q", "tags": map[string]string{"team": "a"}, "attributes": map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":3}`,
		"RetryPolicy":   `{"baseSeconds":2,"maxSeconds":60}`, "MaxDepth": "50",
	}})
	e.createQueue("f.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	e.fails(409, "queue_exists", "POST", "/v1/queues", map[string]any{"name": "q", "attributes": map[string]string{"MaxDepth": "7"}})
	e.ok(200, "GET", "/v1/queues?limit=2", nil)
	e.ok(200, "GET", "/v1/queues/q", nil)
	e.ok(200, "PATCH", "/v1/queues/q", map[string]any{"attributes": map[string]string{"VisibilityTimeout": "20"}})
	e.ok(200, "POST", "/v1/queues/q/pause", nil)
	e.ok(200, "POST", "/v1/queues/q/resume", nil)
	e.ok(200, "GET", "/v1/queues/q/stats", nil)
	// A stream with no credit holds nothing: the list shows it, and the
	// messages below stay for the receives.
	con, err := e.b.Consume(context.Background(), broker.ConsumerConfig{Queue: "q", ClientName: "sample", RemoteAddr: "127.0.0.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	if cs := objects(t, e.ok(200, "GET", "/v1/queues/q/consumers", nil)["consumers"]); len(cs) != 1 || cs[0]["clientName"] != "sample" {
		t.Fatalf("consumers: %v", cs)
	}
	con.Close()
	e.fails(404, "queue_not_found", "GET", "/v1/queues/nope/consumers", nil)
	// In-process calls carry no caller: the list is empty here (the
	// dashboard's TestWorkersListsReceivers sees one through a server).
	e.ok(200, "GET", "/v1/queues/q/receivers", nil)
	e.fails(404, "queue_not_found", "GET", "/v1/queues/nope/receivers", nil)
	if ov := e.ok(200, "GET", "/v1/overview", nil); ov["queues"].(float64) < 1 || ov["store"].(map[string]any)["kind"] == "" {
		t.Fatalf("overview: %v", ov)
	}
	e.ok(201, "POST", "/v1/backups", map[string]any{"name": "nightly-1"})
	e.fails(409, "conflict", "POST", "/v1/backups", map[string]any{"name": "nightly-1"})
	e.fails(400, "invalid_parameter", "POST", "/v1/backups", map[string]any{"name": "../x"})

	e.ok(201, "POST", "/v1/queues/f.fifo/messages", map[string]any{"body": "f", "groupId": "g"})
	e.ok(201, "POST", "/v1/queues/q/messages", map[string]any{"body": "one", "priority": 3, "correlationId": "c1",
		"traceContext": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "maxAttempts": 2,
		"attributes": map[string]any{"k": map[string]any{"type": "String", "value": "v"}, "b": map[string]any{"type": "Binary", "value": "AA=="}}})
	e.ok(200, "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{
		map[string]any{"id": "a", "body": "two"}, map[string]any{"id": "b", "body": "three", "delaySeconds": 30},
		map[string]any{"id": "c", "body": "bad", "priority": 1000},
	}})
	e.ok(200, "POST", "/v1/queues/f.fifo/receive", nil)
	ms := objects(t, e.ok(200, "POST", "/v1/queues/q/receive", map[string]any{"max": 10, "visibilitySeconds": 60})["messages"])
	if len(ms) != 2 {
		t.Fatalf("received %d", len(ms))
	}
	r0, r1 := ms[0]["receipt"].(string), ms[1]["receipt"].(string)
	e.ok(204, "POST", "/v1/queues/q/extend", map[string]any{"receipt": r0, "visibilitySeconds": 100})
	e.ok(200, "POST", "/v1/queues/q/extend", map[string]any{"entries": []any{
		map[string]any{"id": "x", "receipt": r0, "visibilitySeconds": 100}, map[string]any{"id": "y", "receipt": "junk", "visibilitySeconds": 1},
	}})
	e.ok(204, "POST", "/v1/queues/q/snooze", map[string]any{"receipt": r1, "delaySeconds": 5})
	e.ok(200, "POST", "/v1/queues/q/nack", map[string]any{"entries": []any{map[string]any{"receipt": r0, "reason": "later", "delaySeconds": 1}}})
	e.clock.Advance(40 * time.Second)
	eventually(t, "three visible", func() bool { return e.stats("q")["visible"] == float64(3) })
	ms = objects(t, e.ok(200, "POST", "/v1/queues/q/receive", map[string]any{"max": 3})["messages"])
	e.ok(204, "POST", "/v1/queues/q/release", map[string]any{"receipt": ms[0]["receipt"]})
	e.ok(204, "POST", "/v1/queues/q/dead-letter", map[string]any{"receipt": ms[1]["receipt"], "reason": "poison"})
	e.ok(204, "POST", "/v1/queues/q/nack", map[string]any{"receipt": ms[2]["receipt"], "reason": "oops"})
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/extend", map[string]any{"receipt": ms[2]["receipt"], "visibilitySeconds": 5})
	ms = objects(t, e.ok(200, "POST", "/v1/queues/q/receive", nil)["messages"])
	if st := e.ok(200, "GET", "/v1/queues/q/messages/"+ms[0]["id"].(string), nil); st["state"] != "inFlight" {
		t.Fatalf("status of a received message: %v", st)
	}
	e.ok(204, "POST", "/v1/queues/q/ack", map[string]any{"receipt": ms[0]["receipt"], "result": "done"})
	e.ok(200, "POST", "/v1/queues/q/ack", map[string]any{"entries": []any{map[string]any{"receipt": ms[0]["receipt"], "result": "again"}}})
	e.fails(404, "message_not_found", "GET", "/v1/queues/q/messages/"+ms[0]["id"].(string), nil)
	e.fails(400, "invalid_parameter", "POST", "/v1/queues/q/ack", map[string]any{"receipt": ms[0]["receipt"], "result": strings.Repeat("r", 64*1024+1)})
	e.fails(404, "message_not_found", "GET", "/v1/queues/q/messages/not-an-id", nil)
	e.fails(404, "queue_not_found", "GET", "/v1/queues/nope/messages/"+ms[0]["id"].(string), nil)

	e.ok(200, "GET", "/v1/queues/q/messages?order=newest", nil)
	page := e.ok(200, "GET", "/v1/queues/q/messages?limit=1", nil)
	id := objects(t, page["messages"])[0]["id"].(string)
	e.ok(200, "POST", "/v1/queues/q/messages/delete", map[string]any{"ids": []string{id, "nope"}})
	e.fails(404, "message_not_found", "DELETE", "/v1/queues/q/messages/"+id, nil)
	e.send("q", map[string]any{"body": "doomed"})
	id = objects(t, e.ok(200, "GET", "/v1/queues/q/messages?order=newest&limit=1", nil)["messages"])[0]["id"].(string)
	e.ok(204, "DELETE", "/v1/queues/q/messages/"+id, nil)

	dl := objects(t, e.ok(200, "GET", "/v1/queues/q/dead-letters?reason=poison", nil)["messages"])
	if len(dl) != 1 {
		t.Fatalf("dead letters: %v", dl)
	}
	e.ok(202, "POST", "/v1/queues/q/dead-letters/replay", map[string]any{"maxPerSecond": 10})
	e.ok(200, "GET", "/v1/queues/q/dead-letters/replays", nil)
	// A dead-letter queue runs one task at a time: the edit-and-replay
	// waits for the replay to complete.
	eventually(t, "the replay completes", func() bool {
		rs := objects(t, e.ok(200, "GET", "/v1/queues/q/dead-letters/replays?limit=1", nil)["replays"])
		return len(rs) == 1 && rs[0]["status"] == "COMPLETED"
	})
	e.ok(202, "POST", "/v1/queues/q/dead-letters/replay", map[string]any{"ids": []string{"nope"}, "body": "edited",
		"attributes": map[string]any{"k": map[string]any{"type": "String", "value": "v2"}}})
	e.ok(200, "POST", "/v1/queues/q/dead-letters/delete", map[string]any{"ids": []string{"nope"}})
	e.fails(409, "conflict", "GET", "/v1/queues/dlq/dead-letters", nil)

	e.ok(200, "POST", "/v1/schedules", map[string]any{"name": "nightly", "queue": "q", "schedule": "0 2 * * *", "timeZone": "Europe/Berlin",
		"missed": "once", "message": map[string]any{"body": "report", "priority": 5, "correlationId": "c", "maxAttempts": 2,
			"traceContext": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
			"attributes":   map[string]any{"k": map[string]any{"type": "String", "value": "v"}}}})
	e.ok(200, "POST", "/v1/schedules", map[string]any{"name": "fifo", "queue": "f.fifo", "schedule": "@every 1h", "message": map[string]any{"body": "f", "groupId": "g"}})
	e.fails(400, "invalid_parameter", "POST", "/v1/schedules", map[string]any{"name": "bad", "queue": "q", "schedule": "61 * * * *", "message": map[string]any{"body": "x"}})
	e.fails(400, "invalid_parameter", "POST", "/v1/schedules", map[string]any{"name": "bad", "queue": "q", "schedule": "@daily", "timeZone": "Mars/Base", "message": map[string]any{"body": "x"}})
	e.fails(400, "missing_parameter", "POST", "/v1/schedules", map[string]any{"name": "bad", "queue": "q", "message": map[string]any{"body": "x"}})
	e.fails(404, "queue_not_found", "POST", "/v1/schedules", map[string]any{"name": "bad", "queue": "nope", "schedule": "@daily", "message": map[string]any{"body": "x"}})
	e.fails(409, "conflict", "POST", "/v1/schedules", map[string]any{"name": "nightly", "queue": "q", "schedule": "0 3 * * *", "message": map[string]any{"body": "report"}})
	e.ok(200, "GET", "/v1/schedules?limit=1", nil)
	e.ok(200, "GET", "/v1/schedules/nightly", nil)
	e.ok(200, "POST", "/v1/schedules/nightly/pause", nil)
	e.ok(200, "POST", "/v1/schedules/nightly/resume", nil)
	e.fails(404, "not_found", "GET", "/v1/schedules/nope", nil)
	e.ok(204, "DELETE", "/v1/schedules/nightly", nil)
	e.fails(404, "not_found", "DELETE", "/v1/schedules/nightly", nil)

	e.fails(400, "unknown_field", "POST", "/v1/queues/q/receive", map[string]any{"mx": 1})
	e.fails(404, "queue_not_found", "GET", "/v1/queues/nope/stats", nil)
	e.ok(200, "PATCH", "/v1/queues/q", map[string]any{"attributes": map[string]string{"MaxDepth": "1"}})
	e.fails(429, "queue_full", "POST", "/v1/queues/q/messages", map[string]any{"body": "full"})
	e.fails(429, "queue_full", "POST", "/v1/queues/q/messages/batch", map[string]any{"messages": []any{map[string]any{"body": "full"}}})
	e.ok(204, "POST", "/v1/queues/q/purge", nil)
	e.ok(204, "DELETE", "/v1/queues/f.fifo", nil)
}
