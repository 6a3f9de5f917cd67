package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// guardReq is one request the browser guard sees: a method, a path (with
// query), a body and its content type, and headers; host replaces the Host
// header when set.
type guardReq struct {
	method, path, ctype, body string
	host                      string
	headers                   map[string]string
	cookie                    *http.Cookie
}

func (e *env) do(q guardReq) (int, string, http.Header) {
	e.t.Helper()
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	req, err := http.NewRequest(q.method, e.URL+q.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if q.ctype != "" {
		req.Header.Set("Content-Type", q.ctype)
	}
	for k, v := range q.headers {
		req.Header.Set(k, v)
	}
	if q.host != "" {
		req.Host = q.host
	}
	if q.cookie != nil {
		req.AddCookie(q.cookie)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// depth is the queue's ApproximateNumberOfMessages, asked as an SDK would.
func (e *env) depth(queueURL string) string {
	e.t.Helper()
	status, body, _ := e.call(nil, "GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["ApproximateNumberOfMessages"]}`)
	if status != 200 {
		e.t.Fatalf("GetQueueAttributes: %d %s", status, body)
	}
	var out struct{ Attributes map[string]string }
	_ = json.Unmarshal([]byte(body), &out)
	return out.Attributes["ApproximateNumberOfMessages"]
}

// crossSite are the headers a current browser adds to a request that a page
// of https://evil.example makes.
func crossSite(extra ...string) map[string]string {
	h := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// TestGuardRefusesBrowserAttacks: a page of another site, or one whose name
// was rebound to the broker's address, cannot purge or delete a queue
// through either protocol or the native API; each refusal is in the
// request's protocol, and the queue is intact after all of them.
func TestGuardRefusesBrowserAttacks(t *testing.T) {
	t.Parallel()
	e := setup(t, withDashboard(t))
	qurl := e.queue("victim")
	if status, body, _ := e.call(nil, "SendMessage", `{"QueueUrl":"`+qurl+`","MessageBody":"keep me"}`); status != 200 {
		t.Fatalf("SendMessage: %d %s", status, body)
	}
	port := strings.TrimPrefix(e.URL, "http://127.0.0.1:")
	purgeForm := "Action=PurgeQueue&QueueUrl=" + url.QueryEscape(qurl)
	const form = "application/x-www-form-urlencoded"
	const amzJSON = "application/x-amz-json-1.0"

	cases := []struct {
		name string
		req  guardReq
		// want is a piece of the refusal's body (its protocol's shape).
		want string
	}{
		{"cross-site form POST of PurgeQueue",
			guardReq{method: "POST", path: "/", ctype: form, body: purgeForm, headers: crossSite("Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")},
			"<Code>AccessDenied</Code>"},
		{"cross-site form POST to the queue's path",
			guardReq{method: "POST", path: "/000000000000/victim", ctype: form, body: "Action=DeleteQueue", headers: crossSite()},
			"<Code>AccessDenied</Code>"},
		{"cross-site GET of PurgeQueue (an <img src>)",
			guardReq{method: "GET", path: "/?" + purgeForm, headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}},
			"Sec-Fetch-Site: cross-site"},
		{"same-site GET of PurgeQueue (another port's page)",
			guardReq{method: "GET", path: "/?" + purgeForm, headers: map[string]string{"Sec-Fetch-Site": "same-site"}},
			"<Code>AccessDenied</Code>"},
		{"old browser: GET with a foreign Referer only",
			guardReq{method: "GET", path: "/?" + purgeForm, headers: map[string]string{"Referer": "https://evil.example/page.html"}},
			"https://evil.example"},
		{"foreign Origin only (no Sec-Fetch-Site)",
			guardReq{method: "POST", path: "/", ctype: form, body: purgeForm, headers: map[string]string{"Origin": "https://evil.example"}},
			"Origin: &#34;https://evil.example&#34;"},
		{"Origin null (a sandboxed frame)",
			guardReq{method: "POST", path: "/", ctype: form, body: purgeForm, headers: map[string]string{"Origin": "null"}},
			"<Code>AccessDenied</Code>"},
		{"local page on another port",
			guardReq{method: "POST", path: "/", ctype: form, body: purgeForm, headers: map[string]string{"Origin": "http://127.0.0.1:8080"}},
			"<Code>AccessDenied</Code>"},
		{"cross-site JSON protocol",
			guardReq{method: "POST", path: "/", ctype: amzJSON, body: `{"QueueUrl":"` + qurl + `"}`, headers: crossSite("X-Amz-Target", "AmazonSQS.PurgeQueue")},
			`"__type":"com.amazon.coral.service#AccessDeniedException"`},
		{"DNS rebinding: the attacker's name in Host, same-origin for the browser",
			guardReq{method: "POST", path: "/", ctype: form, body: purgeForm, host: "evil.example:" + port,
				headers: map[string]string{"Origin": "http://evil.example:" + port, "Sec-Fetch-Site": "same-origin"}},
			"--allowed-host evil.example"},
		{"DNS rebinding: a GET without browser marks",
			guardReq{method: "GET", path: "/?" + purgeForm, host: "evil.example:" + port},
			"DNS rebinding"},
		{"DNS rebinding of the native API",
			guardReq{method: "POST", path: "/v1/queues/victim/purge", host: "evil.example:" + port},
			`"code":"request_refused"`},
		{"cross-site native purge",
			guardReq{method: "POST", path: "/v1/queues/victim/purge", headers: crossSite()},
			`"code":"request_refused"`},
		{"cross-site native delete",
			guardReq{method: "DELETE", path: "/v1/queues/victim", headers: crossSite()},
			`"code":"request_refused"`},
		{"same-origin native purge without the CSRF token",
			guardReq{method: "POST", path: "/v1/queues/victim/purge", headers: map[string]string{"Origin": e.URL, "Sec-Fetch-Site": "same-origin"}},
			"CSRF token"},
		{"same-origin native purge with a cookie but no header",
			guardReq{method: "POST", path: "/v1/queues/victim/purge", headers: map[string]string{"Origin": e.URL, "Sec-Fetch-Site": "same-origin"},
				cookie: &http.Cookie{Name: "sluice_csrf", Value: strings.Repeat("ab", 32)}},
			"CSRF token"},
		{"cross-site read of /metrics-like data: /v1/stats",
			guardReq{method: "GET", path: "/v1/stats", headers: crossSite()},
			`"code":"request_refused"`},
		{"CORS preflight from another site",
			guardReq{method: "OPTIONS", path: "/", headers: crossSite("Access-Control-Request-Method", "POST")},
			"<Code>AccessDenied</Code>"},
	}
	for _, c := range cases {
		status, body, _ := e.do(c.req)
		if status != http.StatusForbidden || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 403 with %q", c.name, status, body, c.want)
		}
	}
	if d := e.depth(qurl); d != "1" {
		t.Fatalf("after the refused requests the queue holds %s messages, want 1", d)
	}
}

// TestGuardLetsProgramsAndTheDashboardIn: SDK requests, requests by
// localhost and by IP address, the dashboard's own calls with the CSRF
// token, a link from another site to the dashboard, and the health probes
// under any name all pass.
func TestGuardLetsProgramsAndTheDashboardIn(t *testing.T) {
	t.Parallel()
	e := setup(t, withDashboard(t))
	port := strings.TrimPrefix(e.URL, "http://127.0.0.1:")

	// A real SDK (no Origin, no Sec-Fetch-*), through the whole protocol.
	client := awssqs.New(awssqs.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(e.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:       &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(nil)},
		RetryMaxAttempts: 1,
	})
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("ok")})
	if err != nil {
		t.Fatalf("SDK CreateQueue: %v", err)
	}
	if _, err := client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hi")}); err != nil {
		t.Fatalf("SDK SendMessage: %v", err)
	}

	// The dashboard: its page sets the token; its calls echo it.
	status, _, hdr := e.do(guardReq{method: "GET", path: "/ui/", headers: map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}})
	if status != 200 {
		t.Fatalf("GET /ui/: %d", status)
	}
	var token *http.Cookie
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == "sluice_csrf" {
			token = c
		}
	}
	if token == nil || len(token.Value) != 64 || token.SameSite != http.SameSiteStrictMode || token.HttpOnly {
		t.Fatalf("GET /ui/: sluice_csrf cookie %+v, want a 64-character SameSite=Strict cookie the script can read", token)
	}
	same := map[string]string{"Origin": e.URL, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "X-Sluice-CSRF": token.Value}
	if status, body, _ := e.do(guardReq{method: "POST", path: "/v1/queues/ok/pause", headers: same, cookie: token}); status != 200 {
		t.Errorf("dashboard pause with the token: %d %s", status, body)
	}
	if status, body, _ := e.do(guardReq{method: "POST", path: "/v1/queues/ok/resume", headers: same, cookie: token}); status != 200 {
		t.Errorf("dashboard resume with the token: %d %s", status, body)
	}
	// The page's reads need no token; a second page load keeps the token.
	if status, body, _ := e.do(guardReq{method: "GET", path: "/v1/stats", headers: map[string]string{"Sec-Fetch-Site": "same-origin"}}); status != 200 {
		t.Errorf("dashboard GET /v1/stats: %d %s", status, body)
	}
	if _, _, hdr := e.do(guardReq{method: "GET", path: "/ui/", cookie: token}); hdr.Get("Set-Cookie") != "" {
		t.Errorf("GET /ui/ with a token: Set-Cookie %q, want the token kept", hdr.Get("Set-Cookie"))
	}
	// A link on another site opens the dashboard (it only shows pages).
	if status, _, _ := e.do(guardReq{method: "GET", path: "/ui/", headers: crossSite("Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")}); status != 200 {
		t.Errorf("cross-site navigation to /ui/: %d, want 200", status)
	}
	// A URL typed in the address bar.
	if status, body, _ := e.do(guardReq{method: "GET", path: "/?Action=ListQueues", headers: map[string]string{"Sec-Fetch-Site": "none"}}); status != 200 {
		t.Errorf("typed GET /?Action=ListQueues: %d %s", status, body)
	}
	// Names and addresses of the machine itself.
	for _, host := range []string{"localhost:" + port, "LOCALHOST.:" + port, "broker.localhost:" + port, "[::1]:" + port, "10.1.2.3:" + port, "127.0.0.1"} {
		if status, body, _ := e.do(guardReq{method: "GET", path: "/?Action=ListQueues", host: host}); status != 200 {
			t.Errorf("Host %s: %d %s", host, status, body)
		}
	}
	// Probes answer under any name.
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, body, _ := e.do(guardReq{method: "GET", path: p, host: "sluice.internal:" + port}); status != 200 {
			t.Errorf("GET %s with Host sluice.internal: %d %s", p, status, body)
		}
	}
	if status, _, _ := e.do(guardReq{method: "GET", path: "/?Action=ListQueues", host: "sluice.internal:" + port}); status != 403 {
		t.Errorf("Host sluice.internal without --allowed-host: %d, want 403", status)
	}
	if d := e.depth(*q.QueueUrl); d != "1" {
		t.Errorf("queue ok holds %s messages, want 1", d)
	}
}

// TestGuardAllowedHosts: a name given in AllowedHosts (--allowed-host) is
// answered, and a page served under it (a proxy's) is the broker's own
// origin; "*" answers any name.
func TestGuardAllowedHosts(t *testing.T) {
	t.Parallel()
	e := setup(t, withDashboard(t), func(c *server.Config) { c.AllowedHosts = []string{"Queue.Example"} })
	port := strings.TrimPrefix(e.URL, "http://127.0.0.1:")
	e.queue("named")
	if status, body, _ := e.do(guardReq{method: "GET", path: "/?Action=ListQueues", host: "queue.example:" + port}); status != 200 || !strings.Contains(body, "http://queue.example:"+port+"/000000000000/named") {
		t.Errorf("Host queue.example: %d %s", status, body)
	}
	if status, _, _ := e.do(guardReq{method: "GET", path: "/?Action=ListQueues", host: "other.example:" + port}); status != 403 {
		t.Errorf("Host other.example: %d, want 403", status)
	}
	// Behind a proxy that terminates TLS and rewrites Host: the page is
	// https://queue.example, the request reaches the broker as 127.0.0.1.
	_, _, hdr := e.do(guardReq{method: "GET", path: "/ui/"})
	token := (&http.Response{Header: hdr}).Cookies()[0]
	proxied := map[string]string{"Origin": "https://queue.example", "Sec-Fetch-Site": "same-origin", "X-Sluice-CSRF": token.Value}
	if status, body, _ := e.do(guardReq{method: "POST", path: "/v1/queues/named/pause", headers: proxied, cookie: token}); status != 200 {
		t.Errorf("proxied dashboard action: %d %s", status, body)
	}

	any := setup(t, func(c *server.Config) { c.AllowedHosts = []string{"*"} })
	if status, body, _ := any.do(guardReq{method: "GET", path: "/?Action=ListQueues", host: "whatever.example"}); status != 200 {
		t.Errorf(`AllowedHosts "*": Host whatever.example: %d %s`, status, body)
	}
	if status, _, _ := any.do(guardReq{method: "POST", path: "/", ctype: "application/x-www-form-urlencoded", body: "Action=ListQueues", headers: crossSite()}); status != 403 {
		t.Errorf(`AllowedHosts "*": a cross-site request: %d, want 403 (only the Host check is off)`, status)
	}
}

func TestGuardConfigValidate(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "http://x", "x:80", "x/y", "a b", "a,b"} {
		c := server.DefaultConfig()
		c.AllowedHosts = []string{h}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "AllowedHosts") {
			t.Errorf("AllowedHosts %q: %v, want an error naming AllowedHosts", h, err)
		}
	}
	c := server.DefaultConfig()
	c.AllowedHosts = []string{"queue.example", "*", "::1", "[fe80::1]", "10.0.0.1"}
	if err := c.Validate(); err != nil {
		t.Errorf("valid AllowedHosts: %v", err)
	}
}
