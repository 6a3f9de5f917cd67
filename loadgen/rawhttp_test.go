package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRawTransport: requests reuse one keep-alive connection; a chunked
// answer and an answer that closes the connection are read whole (the next
// request dials anew); a cancelled context ends a request in flight.
func TestRawTransport(t *testing.T) {
	var conns atomic.Int32
	release, hanging := make(chan struct{}), make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/chunked":
			w.Write([]byte("part one, "))
			w.(http.Flusher).Flush() // a flush before the end: chunked encoding
			w.Write([]byte("part two"))
		case "/close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		case "/hang":
			hanging <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			w.Header().Set("X-Got", r.Header.Get("X-Amz-Target"))
			w.Write(append([]byte(r.Method+" "+r.Host+" "), body...))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(release)
	host := strings.TrimPrefix(srv.URL, "http://")
	tr := newRawTransport(host, 2)
	defer tr.close()
	ctx := context.Background()
	call := func(path, body string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
		status, b, err := tr.do(ctx, req, []byte(body))
		return status, string(b), err
	}
	for i := range 5 {
		status, b, err := call("/", "hello")
		if err != nil || status != 200 || b != "POST "+host+" hello" {
			t.Fatalf("request %d: %d %q %v", i, status, b, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 requests in turn used %d connections, want 1", n)
	}
	if _, b, err := call("/chunked", ""); err != nil || b != "part one, part two" {
		t.Errorf("chunked answer: %q %v", b, err)
	}
	if _, b, err := call("/close", ""); err != nil || b != "bye" {
		t.Errorf("closing answer: %q %v", b, err)
	}
	if _, b, err := call("/", "again"); err != nil || b != "POST "+host+" again" {
		t.Errorf("after a closed connection: %q %v", b, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections after one was closed by the server, want 2", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { <-hanging; cancel() }() // once the request is in the server
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, srv.URL+"/hang", nil)
	start := time.Now()
	if _, _, err := tr.do(cctx, req, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a cancelled request took %v to end", d)
	}
}
