package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
)

// get GETs url and returns the status and body.
func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthz: /healthz answers while the process serves; /readyz answers
// ready while the store answers, and 503 with the reason once it is closed.
func TestHealthz(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, testbroker.Config{})
	if code, body := get(t, b.URL+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", code, body)
	}
	if code, body := get(t, b.URL+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("GET /readyz = %d %q, want 200 ready", code, body)
	}
	if code, _ := get(t, b.URL+"/metrics"); code == 200 {
		t.Errorf("GET /metrics without Config.Metrics = 200, want no metrics served")
	}
	if err := b.Front.Close(); err != nil { // the store goes away under a running server
		t.Fatal(err)
	}
	if code, body := get(t, b.URL+"/readyz"); code != 503 || !strings.HasPrefix(body, "not ready: ") {
		t.Errorf("GET /readyz on a closed store = %d %q, want 503 not ready: <reason>", code, body)
	}
	if code, _ := get(t, b.URL+"/healthz"); code != 200 {
		t.Errorf("GET /healthz on a closed store = %d, want 200 (alive)", code)
	}
}

// TestAuditLog: a purge and a queue deletion write an audit line naming
// the queue and the caller (address, signed access key, User-Agent).
func TestAuditLog(t *testing.T) {
	t.Parallel()
	logs := &testutil.Buffer{}
	b := testbroker.Start(t, testbroker.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	post := func(op, body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, b.URL+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("User-Agent", "ops-script/1.0")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDOPS/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", op, resp.Status)
		}
	}
	post("CreateQueue", `{"QueueName":"payroll"}`)
	if strings.Contains(logs.String(), `"msg":"audit"`) {
		t.Fatalf("a queue creation was audited: %s", logs)
	}
	post("PurgeQueue", `{"QueueUrl":"`+b.URL+`/000000000000/payroll"}`)
	post("DeleteQueue", `{"QueueUrl":"`+b.URL+`/000000000000/payroll"}`)
	for _, action := range []string{"purge_queue", "delete_queue"} {
		var line string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"audit":"`+action+`"`) {
				line = l
			}
		}
		for _, want := range []string{`"msg":"audit"`, `"queue":"payroll"`, `"caller_access_key":"AKIDOPS"`, `"caller_user_agent":"ops-script/1.0"`, `"caller_addr":"127.0.0.1:`, `"time":"`} {
			if !strings.Contains(line, want) {
				t.Errorf("audit line of %s %q lacks %s", action, line, want)
			}
		}
	}
}
