package server_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker"
)

// The open paths (the health probes, the dashboard's files) and the
// guard's exemptions are decided by the route the server serves a request
// with, not by the text of its decoded path: "/ui%2F..%2F" decodes to
// "/ui/../" but is one path segment, which the server routes to the SQS API;
// "/v1%2Fx" decodes to "/v1/x" and is routed to the SQS API too; a POST to
// /healthz is no health probe. None of these may skip authentication, be
// authorized as a native-API read, or skip the browser guard.

// TestAuthEscapedPathsDoNotSkipAuthentication: with keys, requests whose
// decoded path looks open or native reach the SQS API only signed, and
// with the SQS action's permission.
func TestAuthEscapedPathsDoNotSkipAuthentication(t *testing.T) {
	e := setup(t, withKeys(t), withDashboard(t), func(c *broker.Config) { c.AccountID = "111111111111" })
	if status, body, _ := e.do(guardReq{method: "POST", path: "/v1/queues", ctype: "application/json", body: `{"name":"victim"}`,
		headers: map[string]string{"Authorization": "Bearer admin:admin-secret"}}); status/100 != 2 {
		t.Fatalf("admin create: %d %s", status, body)
	}
	qurl := e.URL + "/111111111111/victim"
	purge := "Action=PurgeQueue&QueueUrl=" + url.QueryEscape(qurl)
	del := "Action=DeleteQueue&QueueUrl=" + url.QueryEscape(qurl)
	const form = "application/x-www-form-urlencoded"
	for _, q := range []guardReq{
		{method: "GET", path: "/ui%2F..%2F?Action=ListQueues"},
		{method: "GET", path: "/ui%2F..%2F?" + purge},
		{method: "POST", path: "/ui%2Fx", ctype: form, body: purge},
		{method: "POST", path: "/healthz", ctype: form, body: purge},
		// A read-only key's bearer token on a path that decodes as native
		// but is routed to the SQS API.
		{method: "GET", path: "/v1%2Fx?" + del, headers: map[string]string{"Authorization": "Bearer reader:reader-secret"}},
	} {
		status, body, _ := e.do(q)
		if status < 400 || strings.Contains(body, "victim") && !strings.Contains(body, "Error") {
			t.Errorf("%s %s %s: %d %.300s, want refused", q.method, q.path, q.body, status, body)
		}
	}
	// The queue is still there.
	if status, body, _ := e.do(guardReq{method: "GET", path: "/v1/queues/victim", headers: map[string]string{"Authorization": "Bearer admin:admin-secret"}}); status != 200 {
		t.Fatalf("the queue is gone: %d %s", status, body)
	}
}

// TestGuardEscapedPathsDoNotSkipTheGuard: without keys, a page of another
// site cannot reach the SQS API through a path the guard took for a health
// probe or a dashboard page, with the dashboard on or off.
func TestGuardEscapedPathsDoNotSkipTheGuard(t *testing.T) {
	for _, dash := range []bool{true, false} {
		var mods []any
		if dash {
			mods = append(mods, withDashboard(t))
		}
		e := setup(t, mods...)
		qurl := e.queue("victim")
		if status, body, _ := e.call(nil, "SendMessage", `{"QueueUrl":"`+qurl+`","MessageBody":"keep me"}`); status != 200 {
			t.Fatalf("SendMessage: %d %s", status, body)
		}
		purge := "Action=PurgeQueue&QueueUrl=" + url.QueryEscape(qurl)
		img := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
		for _, q := range []guardReq{
			{method: "GET", path: "/ui%2F..%2F?" + purge, headers: img},
			{method: "GET", path: "/ui/x?" + purge, headers: img},
			{method: "POST", path: "/healthz", ctype: "application/x-www-form-urlencoded", body: purge, headers: crossSite()},
		} {
			// Refused, or (a dashboard's file) not found: never served by the SQS API.
			if status, body, _ := e.do(q); status != 403 && status != 404 || strings.Contains(body, "PurgeQueueResponse") {
				t.Errorf("dashboard %v: cross-site %s %s %s: %d %.200s, want 403", dash, q.method, q.path, q.body, status, body)
			}
		}
		if got := e.depth(qurl); got != "1" {
			t.Fatalf("dashboard %v: the queue holds %s messages after the attacks, want 1", dash, got)
		}
	}
}
