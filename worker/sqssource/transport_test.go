package sqssource_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/worker/sqssource"
)

// sdkBody is a request body as aws-sdk-go-v2 sends it (smithy-go's safe
// read closer over a bytes.Reader): once closed, Read and WriteTo answer
// io.EOF. Its last look (WriteTo, or a Read once all is read) waits for
// Close first: the SDK closes the body when the answer's headers arrive,
// and this is the order in which that close comes before net/http's last
// look at the body (the race that lost answers). checked is closed when
// that look returns.
type sdkBody struct {
	r       *bytes.Reader
	mu      sync.Mutex
	closed  chan struct{}
	checked chan struct{}
	once    sync.Once
}

func newSDKBody(b []byte) *sdkBody {
	return &sdkBody{r: bytes.NewReader(b), closed: make(chan struct{}), checked: make(chan struct{})}
}

func (b *sdkBody) isClosed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

func (b *sdkBody) Read(p []byte) (int, error) {
	if b.r.Len() == 0 {
		// The last look at the body, with Read: after the close, as in
		// WriteTo.
		<-b.closed
		defer b.once.Do(func() { close(b.checked) })
		return 0, io.EOF
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.isClosed() {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *sdkBody) WriteTo(w io.Writer) (int64, error) {
	if b.r.Len() == 0 {
		<-b.closed
		defer b.once.Do(func() { close(b.checked) })
		return 0, io.EOF // smithy-go's answer once closed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.r.WriteTo(w)
}

func (b *sdkBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.isClosed() {
		close(b.closed)
	}
	return nil
}

// TestTransportKeepsTheAnswerWhenTheSDKClosesTheBodyEarly: a request's
// body is closed, as aws-sdk-go-v2 does, once the answer's headers are in
// and before net/http's last look at the body; the answer (1 MiB, most of
// it sent after that look) must still be read whole over Transport. On
// net/http's transport alone the connection is closed under the reader and
// the read fails with "use of closed network connection", which the SDK
// retried: a ReceiveMessage's messages were leased and never seen.
func TestTransportKeepsTheAnswerWhenTheSDKClosesTheBodyEarly(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	proceed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Length", "1048576")
		_, _ = w.Write(bytes.Repeat([]byte("a"), 1024))
		w.(http.Flusher).Flush()
		select {
		case <-proceed:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(bytes.Repeat([]byte("a"), size-1024))
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: sqssource.Transport(tr)}

	body := newSDKBody([]byte(`{"QueueUrl":"q","MaxNumberOfMessages":10}`))
	req, err := http.NewRequest(http.MethodPost, srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(body.r.Len())
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = body.Close() // as the SDK does once Do returns
	select {
	case <-body.checked:
	case <-time.After(30 * time.Second):
		t.Fatal("net/http never looked at the body after sending it")
	}
	close(proceed)
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if len(got) != size || strings.Trim(string(got), "a") != "" {
		t.Fatalf("read %d bytes of the answer, want %d", len(got), size)
	}
}

// TestTransportLeavesTheRequestAlone: RoundTrip does not change the
// caller's request, and a request without a body goes through as it is.
func TestTransportLeavesTheRequestAlone(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: sqssource.Transport(tr)}
	for _, in := range []string{"", "hello"} {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		orig := req.Body
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != in {
			t.Fatalf("echo of %q: %q, %v", in, got, err)
		}
		if req.Body != orig {
			t.Fatalf("the request's body was replaced")
		}
	}
}
