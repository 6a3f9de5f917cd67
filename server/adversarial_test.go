package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicemq/sluice/server"
)

// hostile is one request an attacker or a broken client might send.
type hostile struct {
	name   string
	proto  string // "json", "query", "native": the error shape expected
	method string
	path   string // "" is "/"
	target string // X-Amz-Target (json)
	header map[string]string
	body   func() []byte
	status int // the exact status expected; 0: any 4xx
	// tolerated: a 2xx is a right answer too (SQS ignores parameters it
	// does not know, and sets no cap on some lists); only the memory
	// bound and "no 5xx" apply.
	tolerated bool
}

// Shapes of the three protocols' errors.
func jsonShaped(b []byte) bool {
	var v struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	return json.Unmarshal(b, &v) == nil && v.Type != ""
}

func queryShaped(b []byte) bool {
	return bytes.Contains(b, []byte("<ErrorResponse")) && bytes.Contains(b, []byte("<Code>"))
}

func nativeShaped(b []byte) bool {
	var v struct{ Code, Message string }
	return json.Unmarshal(b, &v) == nil && v.Code != "" && v.Message != ""
}

// heapPeak samples HeapInuse every few milliseconds until stop is called;
// peak and stop return the highest sample so far.
func heapPeak() (peak func() uint64, stop func() uint64) {
	var max atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > max.Load() {
				max.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return max.Load, func() uint64 { close(done); wg.Wait(); return max.Load() }
}

// adversarialHeapBound is the most heap the whole hostile run may use at
// once: a few copies of the largest body allowed, and the decoded form of
// what fits in it.
const adversarialHeapBound = 96 << 20

// TestAdversarialRequests throws hostile requests at a real server on an
// embedded broker, across both SQS protocols and the native API. Each gets a
// 4xx in its protocol's error shape (never a 5xx nor a dropped connection),
// the server stays up, and the heap stays under adversarialHeapBound. It is
// not parallel, so that the heap it measures is its own.
func TestAdversarialRequests(t *testing.T) {
	e := setup(t, func(c *server.Config) { c.ReadHeaderTimeout = time.Second })
	qurl := e.queue("adv")
	cfg := server.DefaultConfig()
	maxBody := int(cfg.MaxBodyBytes)

	rep := func(s string, n int) string { return strings.Repeat(s, n) }
	js := func(s string) func() []byte { return func() []byte { return []byte(s) } }
	jsq := func(s string) func() []byte { // s with %q replaced by the queue URL
		return js(strings.ReplaceAll(s, "%q", `"`+qurl+`"`))
	}
	form := func(kv ...string) func() []byte {
		return func() []byte {
			v := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				v.Add(kv[i], kv[i+1])
			}
			return []byte(v.Encode())
		}
	}
	manyAttrsJSON := func() []byte {
		var b strings.Builder
		b.WriteString(`{"QueueUrl":"` + qurl + `","MessageBody":"x","MessageAttributes":{`)
		for i := range 10000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"a%d":{"DataType":"String","StringValue":"v"}`, i)
		}
		b.WriteString("}}")
		return []byte(b.String())
	}
	manyAttrsQuery := func() []byte {
		v := url.Values{"Action": {"SendMessage"}, "QueueUrl": {qurl}, "MessageBody": {"x"}}
		for i := 1; i <= 10000; i++ {
			v.Set(fmt.Sprintf("MessageAttribute.%d.Name", i), fmt.Sprintf("a%d", i))
			v.Set(fmt.Sprintf("MessageAttribute.%d.Value.DataType", i), "String")
			v.Set(fmt.Sprintf("MessageAttribute.%d.Value.StringValue", i), "v")
		}
		return []byte(v.Encode())
	}
	manyAttrsNative := func() []byte {
		var b strings.Builder
		b.WriteString(`{"body":"x","attributes":{`)
		for i := range 10000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"a%d":"v"`, i)
		}
		b.WriteString("}}")
		return []byte(b.String())
	}
	bigBatchJSON := func() []byte {
		var b strings.Builder
		b.WriteString(`{"QueueUrl":"` + qurl + `","Entries":[`)
		for i := range 5000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"Id":"e%d","MessageBody":"x"}`, i)
		}
		b.WriteString("]}")
		return []byte(b.String())
	}
	bigBatchQuery := func() []byte {
		v := url.Values{"Action": {"SendMessageBatch"}, "QueueUrl": {qurl}}
		for i := 1; i <= 5000; i++ {
			v.Set(fmt.Sprintf("SendMessageBatchRequestEntry.%d.Id", i), fmt.Sprintf("e%d", i))
			v.Set(fmt.Sprintf("SendMessageBatchRequestEntry.%d.MessageBody", i), "x")
		}
		return []byte(v.Encode())
	}
	bigBatchNative := func() []byte {
		return []byte(`{"messages":[` + strings.TrimSuffix(rep(`{"id":"e","body":"x"},`, 5000), ",") + `]}`)
	}
	// A body just under the limit of empty batch entries: ~1M entries.
	emptyEntries := func(prefix, suffix string) func() []byte {
		return func() []byte {
			n := (maxBody - len(prefix) - len(suffix) - 16) / 3
			return []byte(prefix + strings.TrimSuffix(rep("{},", n), ",") + suffix)
		}
	}
	oversize := func(prefix string) func() []byte {
		return func() []byte { return []byte(prefix + rep("x", maxBody+1)) }
	}
	deep := func(open string, n int) func() []byte { return js(rep(open, n)) }

	var cases []hostile
	addJSON := func(name, target, body string, status int) {
		cases = append(cases, hostile{name: "json/" + name, proto: "json", target: target, body: jsq(body), status: status})
	}
	addQuery := func(name string, body func() []byte, status int) {
		cases = append(cases, hostile{name: "query/" + name, proto: "query", body: body, status: status})
	}
	addNative := func(name, method, path string, body func() []byte, status int) {
		cases = append(cases, hostile{name: "native/" + name, proto: "native", method: method, path: path, body: body, status: status})
	}

	// AWS JSON 1.0.
	cases = append(cases,
		hostile{name: "json/oversize body", proto: "json", target: "AmazonSQS.SendMessage", body: oversize(`{"MessageBody":"`), status: 413},
		hostile{name: "json/100k [", proto: "json", target: "AmazonSQS.SendMessage", body: deep("[", 100000)},
		hostile{name: "json/100k {", proto: "json", target: "AmazonSQS.SendMessage", body: deep(`{"a":`, 100000)},
		hostile{name: "json/huge array", proto: "json", target: "AmazonSQS.ReceiveMessage", tolerated: true,
			body: func() []byte {
				return []byte(`{"QueueUrl":"` + qurl + `","MessageAttributeNames":[` + strings.TrimSuffix(rep(`"a",`, maxBody/5), ",") + `]}`)
			}},
		hostile{name: "json/10000 attributes", proto: "json", target: "AmazonSQS.SendMessage", body: manyAttrsJSON},
		hostile{name: "json/5000 entries", proto: "json", target: "AmazonSQS.SendMessageBatch", body: bigBatchJSON},
		hostile{name: "json/3 MiB of {} entries", proto: "json", target: "AmazonSQS.SendMessageBatch",
			body: emptyEntries(`{"QueueUrl":"`+qurl+`","Entries":[`, "]}")},
		hostile{name: "json/3 MiB of {} delete entries", proto: "json", target: "AmazonSQS.DeleteMessageBatch",
			body: emptyEntries(`{"QueueUrl":"`+qurl+`","Entries":[`, "]}")},
		hostile{name: "json/invalid utf-8 body", proto: "json", target: "AmazonSQS.SendMessage",
			body: js(`{"QueueUrl":"` + qurl + "\",\"MessageBody\":\"a\xff\xfeb\"}")},
	)
	for _, c := range []struct{ name, target, body string }{
		{"NUL in body", "SendMessage", `{"QueueUrl":%q,"MessageBody":"a\u0000b"}`},
		{"U+FFFE in body", "SendMessage", `{"QueueUrl":%q,"MessageBody":"a\ufffeb"}`},
		{"unpaired surrogate", "SendMessage", `{"QueueUrl":%q,"MessageBody":"a\ud800b"}`},
		{"bad attribute name", "SendMessage", `{"QueueUrl":%q,"MessageBody":"x","MessageAttributes":{"a b\u0000":{"DataType":"String","StringValue":"v"}}}`},
		{"bad queue name", "CreateQueue", `{"QueueName":"a/b\u0000c"}`},
		{"QueueUrl number", "SendMessage", `{"QueueUrl":5,"MessageBody":"x"}`},
		{"MessageBody array", "SendMessage", `{"QueueUrl":%q,"MessageBody":[]}`},
		{"DelaySeconds string", "SendMessage", `{"QueueUrl":%q,"MessageBody":"x","DelaySeconds":"x"}`},
		{"DelaySeconds 1e400", "SendMessage", `{"QueueUrl":%q,"MessageBody":"x","DelaySeconds":1e400}`},
		{"MessageAttributes string", "SendMessage", `{"QueueUrl":%q,"MessageBody":"x","MessageAttributes":"x"}`},
		{"StringValue object", "SendMessage", `{"QueueUrl":%q,"MessageBody":"x","MessageAttributes":{"a":{"DataType":"String","StringValue":{}}}}`},
		{"BinaryValue not base64", "SendMessage", `{"QueueUrl":%q,"MessageBody":"x","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"!!"}}}`},
		{"Entries object", "SendMessageBatch", `{"QueueUrl":%q,"Entries":{}}`},
		{"Entries of numbers", "SendMessageBatch", `{"QueueUrl":%q,"Entries":[1,2]}`},
		{"MaxNumberOfMessages string", "ReceiveMessage", `{"QueueUrl":%q,"MaxNumberOfMessages":"ten"}`},
		{"MaxNumberOfMessages -1", "ReceiveMessage", `{"QueueUrl":%q,"MaxNumberOfMessages":-1}`},
		{"WaitTimeSeconds bool", "ReceiveMessage", `{"QueueUrl":%q,"WaitTimeSeconds":true}`},
		{"VisibilityTimeout object", "ReceiveMessage", `{"QueueUrl":%q,"VisibilityTimeout":{}}`},
		{"Attributes array", "SetQueueAttributes", `{"QueueUrl":%q,"Attributes":[]}`},
		{"ReceiptHandle number", "DeleteMessage", `{"QueueUrl":%q,"ReceiptHandle":1}`},
		{"ReceiptHandle with CRLF", "DeleteMessage", `{"QueueUrl":%q,"ReceiptHandle":"AgeAgICAgC\r\nADZn2myroFVbvvLN00c3CdIg"}`},
		{"ReceiptHandle 200 KiB", "DeleteMessage", `{"QueueUrl":%q,"ReceiptHandle":"` + rep("A", 200<<10) + `"}`},
		{"Tags array", "TagQueue", `{"QueueUrl":%q,"Tags":[]}`},
		{"body null", "SendMessage", `null`},
		{"body array", "SendMessage", `[]`},
		{"body string", "SendMessage", `"x"`},
		{"body empty", "SendMessage", ``},
		{"trailing garbage", "SendMessage", `{"QueueUrl":%q,"MessageBody":"x"}}}garbage`},
		{"missing queue", "SendMessage", `{"QueueUrl":"http://x/000000000000/nope","MessageBody":"x"}`},
	} {
		addJSON(c.name, "AmazonSQS."+c.target, c.body, 0)
	}
	addJSON("unknown action", "AmazonSQS.Frobnicate", `{}`, 400)
	addJSON("unknown target service", "Frob.SendMessage", `{}`, 400)
	addJSON("huge target", "AmazonSQS."+rep("A", 4000), `{}`, 400)

	// Query (form-encoded, XML answers).
	cases = append(cases, hostile{name: "query/oversize body", proto: "query", body: oversize("Action=SendMessage&MessageBody="), status: 413})
	addQuery("10000 attributes", manyAttrsQuery, 0)
	addQuery("3 MiB of empty parameters", func() []byte {
		var b strings.Builder
		b.WriteString("Action=SendMessage")
		for i := 0; b.Len() < maxBody-16; i++ {
			fmt.Fprintf(&b, "&%x=", i)
		}
		return []byte(b.String())
	}, 0)
	addQuery("3 MiB of one repeated parameter", func() []byte {
		return []byte("Action=SendMessage&QueueUrl=" + url.QueryEscape(qurl) + rep("&MessageBody=", (maxBody-200)/13))
	}, 0)
	addQuery("5000 entries", bigBatchQuery, 0)
	addQuery("unknown action", form("Action", "Frobnicate"), 400)
	addQuery("no action", form("QueueUrl", qurl), 0)
	addQuery("invalid utf-8 body", func() []byte {
		return []byte("Action=SendMessage&QueueUrl=" + url.QueryEscape(qurl) + "&MessageBody=a%FF%FEb")
	}, 0)
	addQuery("NUL in body", form("Action", "SendMessage", "QueueUrl", qurl, "MessageBody", "a\x00b"), 0)
	addQuery("bad percent escape", func() []byte {
		return []byte("Action=SendMessage&QueueUrl=" + url.QueryEscape(qurl) + "&MessageBody=%zz")
	}, 0)
	addQuery("entry index 2^40", form("Action", "SendMessageBatch", "QueueUrl", qurl,
		"SendMessageBatchRequestEntry.1099511627776.Id", "a", "SendMessageBatchRequestEntry.1099511627776.MessageBody", "x"), 0)
	addQuery("entry index -1", form("Action", "SendMessageBatch", "QueueUrl", qurl,
		"SendMessageBatchRequestEntry.-1.Id", "a", "SendMessageBatchRequestEntry.-1.MessageBody", "x"), 0)
	addQuery("DelaySeconds abc", form("Action", "SendMessage", "QueueUrl", qurl, "MessageBody", "x", "DelaySeconds", "abc"), 0)
	addQuery("MaxNumberOfMessages 1e9", form("Action", "ReceiveMessage", "QueueUrl", qurl, "MaxNumberOfMessages", "1000000000"), 0)
	addQuery("WaitTimeSeconds -1", form("Action", "ReceiveMessage", "QueueUrl", qurl, "WaitTimeSeconds", "-1"), 0)
	cases = append(cases, hostile{name: "query/attribute index 1e30", proto: "query", tolerated: true, body: form("Action", "SendMessage", "QueueUrl", qurl, "MessageBody", "x",
		"MessageAttribute.1000000000000000000000000000000.Name", "a")})
	addQuery("bad queue name", form("Action", "CreateQueue", "QueueName", "a b"), 0)
	addQuery("receipt handle garbage", form("Action", "DeleteMessage", "QueueUrl", qurl, "ReceiptHandle", "\r\n\x00"), 0)
	cases = append(cases, hostile{name: "query/GET unknown action", proto: "query", method: http.MethodGet, path: "/?Action=Frobnicate", status: 400})

	// Native API.
	send := "/v1/queues/adv/messages"
	cases = append(cases, hostile{name: "native/oversize body", proto: "native", method: http.MethodPost, path: send, body: oversize(`{"body":"`), status: 413})
	addNative("100k [", http.MethodPost, send, deep("[", 100000), 0)
	addNative("100k {", http.MethodPost, send, deep(`{"a":`, 100000), 0)
	addNative("huge ids array", http.MethodPost, "/v1/queues/adv/messages/delete",
		func() []byte { return []byte(`{"ids":[` + strings.TrimSuffix(rep(`"a",`, maxBody/5), ",") + `]}`) }, 0)
	addNative("10000 attributes", http.MethodPost, send, manyAttrsNative, 0)
	addNative("5000 entries", http.MethodPost, send+"/batch", bigBatchNative, 0)
	addNative("3 MiB of {} entries", http.MethodPost, send+"/batch", emptyEntries(`{"messages":[`, "]}"), 0)
	addNative("invalid utf-8", http.MethodPost, send, js("{\"body\":\"a\xffb\"}"), 400)
	addNative("unpaired surrogate", http.MethodPost, send, js(`{"body":"a\ud800b"}`), 400)
	addNative("NUL in body", http.MethodPost, send, js(`{"body":"a\u0000b"}`), 0)
	addNative("body number", http.MethodPost, send, js(`{"body":1}`), 400)
	addNative("messages object", http.MethodPost, send+"/batch", js(`{"messages":{}}`), 400)
	addNative("max string", http.MethodPost, "/v1/queues/adv/receive", js(`{"max":"x"}`), 400)
	addNative("waitSeconds string", http.MethodPost, "/v1/queues/adv/receive", js(`{"waitSeconds":"1"}`), 400)
	addNative("visibilitySeconds bool", http.MethodPost, "/v1/queues/adv/receive", js(`{"visibilitySeconds":true}`), 400)
	addNative("unknown field", http.MethodPost, send, js(`{"body":"x","frob":1}`), 400)
	addNative("ack garbage receipt", http.MethodPost, "/v1/queues/adv/ack", js(`{"receipt":"\r\n"}`), 0)
	addNative("unknown route", http.MethodGet, "/v1/frobnicate", nil, 404)
	addNative("wrong method", http.MethodPut, send, js(`{}`), 405)
	addNative("bad queue name", http.MethodPost, "/v1/queues/a%00b/messages", js(`{"body":"x"}`), 0)
	addNative("missing queue", http.MethodPost, "/v1/queues/nope/messages", js(`{"body":"x"}`), 404)
	addNative("trailing garbage", http.MethodPost, send, js(`{"body":"x"} {}`), 400)

	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	runtime.GC()
	peak, stop := heapPeak()
	var lastPeak uint64
	for _, c := range cases {
		var body io.Reader
		if c.body != nil {
			body = bytes.NewReader(c.body())
		}
		method := c.method
		if method == "" {
			method = http.MethodPost
		}
		path := c.path
		if path == "" {
			path = "/"
		}
		req, err := http.NewRequest(method, e.URL+path, body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch c.proto {
		case "json":
			req.Header.Set("Content-Type", "application/x-amz-json-1.0")
			req.Header.Set("X-Amz-Target", c.target)
		case "query":
			if method == http.MethodPost {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
		case "native":
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: %v (the connection was dropped)", c.name, err)
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		shaped := map[string]func([]byte) bool{"json": jsonShaped, "query": queryShaped, "native": nativeShaped}[c.proto]
		if peakNow := peak(); peakNow > lastPeak+32<<20 {
			t.Logf("%s: heap in use rose to %.1f MiB", c.name, float64(peakNow)/(1<<20))
			lastPeak = peakNow
		}
		switch {
		case c.tolerated && resp.StatusCode >= 200 && resp.StatusCode < 300:
		case c.status != 0 && resp.StatusCode != c.status,
			c.status == 0 && (resp.StatusCode < 400 || resp.StatusCode > 499):
			t.Errorf("%s: status %d, want %s: %.300s", c.name, resp.StatusCode, wantStatus(c.status), b)
		case !shaped(b):
			t.Errorf("%s: %d answer not in the %s error shape: %.300s", c.name, resp.StatusCode, c.proto, b)
		}
	}
	final := stop()
	t.Logf("%d hostile requests; heap in use peaked at %.1f MiB (bound %d MiB)", len(cases), float64(final)/(1<<20), adversarialHeapBound>>20)
	if final > adversarialHeapBound {
		t.Errorf("heap in use peaked at %.1f MiB, over the bound of %d MiB", float64(final)/(1<<20), adversarialHeapBound>>20)
	}
	if status, body, _ := e.call(nil, "ListQueues", `{}`); status != 200 {
		t.Fatalf("after the hostile requests: ListQueues %d %s", status, body)
	}
}

func wantStatus(s int) string {
	if s == 0 {
		return "a 4xx"
	}
	return fmt.Sprint(s)
}

// TestAdversarialConnections: a client whose headers are oversize gets 431;
// one that trickles its headers (slowloris) is cut off after
// ReadHeaderTimeout; one that disconnects in the middle of its body leaves
// the server serving.
func TestAdversarialConnections(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *server.Config) { c.ReadHeaderTimeout = time.Second; c.MaxHeaderBytes = 8 << 10 })
	addr := strings.TrimPrefix(e.URL, "http://")

	t.Run("oversize headers", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.URL+"/", strings.NewReader("Action=ListQueues"))
		req.Header.Set("X-Big", strings.Repeat("z", 16<<10))
		client := &http.Client{Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", resp.StatusCode)
		}
	})

	t.Run("slowloris", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: localhost\r\n"); err != nil {
			t.Fatal(err)
		}
		// Trickle a header byte at a time until the server hangs up; it
		// must do so soon after ReadHeaderTimeout (1 s), long before the
		// trickle would end.
		deadline := start.Add(15 * time.Second)
		closed := false
		for time.Now().Before(deadline) && !closed {
			if _, err := conn.Write([]byte("X")); err != nil {
				closed = true
				break
			}
			_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			var buf [1]byte
			if _, err := conn.Read(buf[:]); err != nil {
				if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
					closed = true
				}
			}
		}
		if !closed {
			t.Fatalf("the server still reads headers trickled for %v", time.Since(start))
		}
		t.Logf("a trickling client was cut off after %v", time.Since(start).Round(10*time.Millisecond))
	})

	t.Run("disconnect mid-body", func(t *testing.T) {
		for i := range 5 {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\n"+
				"X-Amz-Target: AmazonSQS.SendMessage\r\nContent-Length: %d\r\n\r\n{\"QueueUrl\":\"adv\",\"MessageBody\":\"%s", 1<<20, strings.Repeat("x", 1000*i))
			conn.Close()
		}
		// A chunked body that stops half way.
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/queues HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n{\"name\":")
		conn.Close()
		// The server still answers, on a fresh connection and on a kept one.
		conn, err = net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		for range 2 {
			fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.ListQueues\r\nContent-Length: 2\r\n\r\n{}")
		}
		br := bufio.NewReader(conn)
		for i := range 2 {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("answer %d after the disconnects: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("answer %d after the disconnects: %d", i, resp.StatusCode)
			}
		}
	})
}
