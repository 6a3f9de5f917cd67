package server_test

import (
	"strings"
	"testing"
)

// TestGuardLetsNodeFetchIn: Node.js's built-in fetch (undici) adds
// "Sec-Fetch-Mode: cors" to every request, but neither Origin nor
// Sec-Fetch-Site: it is a program, not a page, and its state-changing
// calls (the native API's POST, an SQS JSON POST) are not refused for
// lacking the dashboard's CSRF token. A browser always sends Sec-Fetch-Site
// with Sec-Fetch-Mode, so a page's same-origin POST without the token is
// still refused.
func TestGuardLetsNodeFetchIn(t *testing.T) {
	t.Parallel()
	e := setup(t, withDashboard(t))
	node := map[string]string{"Sec-Fetch-Mode": "cors", "Accept": "*/*", "User-Agent": "node"}
	if status, body, _ := e.do(guardReq{method: "POST", path: "/v1/queues", ctype: "application/json", body: `{"name":"from-node"}`, headers: node}); status/100 != 2 {
		t.Fatalf("native POST from Node's fetch: %d %s", status, body)
	}
	sqsNode := map[string]string{"Sec-Fetch-Mode": "cors", "User-Agent": "node", "X-Amz-Target": "AmazonSQS.CreateQueue"}
	if status, body, _ := e.do(guardReq{method: "POST", path: "/", ctype: "application/x-amz-json-1.0", body: `{"QueueName":"from-node-sqs"}`, headers: sqsNode}); status != 200 {
		t.Fatalf("SQS JSON POST from Node's fetch: %d %s", status, body)
	}
	page := map[string]string{"Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "empty"}
	if status, body, _ := e.do(guardReq{method: "POST", path: "/v1/queues", ctype: "application/json", body: `{"name":"from-a-page"}`, headers: page}); status != 403 || !strings.Contains(body, "CSRF") {
		t.Fatalf("a page's POST without the CSRF token: %d %s, want 403", status, body)
	}
}
