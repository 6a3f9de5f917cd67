package stream_test

import (
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
)

// cutProxy forwards TCP connections to a target until Cut, which stops
// forwarding in both directions without closing anything: the network
// between client and broker is gone, and only keep-alives can tell.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(in, out)
			go p.pipe(out, in)
		}
	}()
	return p
}

// pipe copies until the connection fails or the proxy is cut; after the
// cut what arrives is dropped.
func (p *cutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if n > 0 && !cut {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *cutProxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() }

// A network cut between consumer and broker: the broker's keep-alive pings
// go unanswered, it ends the stream within about 10 s and the messages
// the stream held come back as failed attempts.
func TestNetworkCut(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", map[string]string{"VisibilityTimeout": "3600"})
	pub := e.publisher()
	for range 3 {
		if _, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newCutProxy(t, strings.TrimPrefix(e.b.URL, "http://"))
	c, err := stream.Dial(proxy.URL(), stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	con, err := c.Consume(e.ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 3})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := con.Receive(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	proxy.Cut()
	testutil.Eventually(t, 60*time.Second, "the cut stream's messages are back", func() bool {
		_, st, err := e.b.Front.Stats(e.ctx, "jobs")
		return err == nil && st.Visible == 3
	})
	t.Logf("released %v after the cut", time.Since(start).Round(100*time.Millisecond))
	page, err := e.b.Front.Browse(e.ctx, "jobs", model.BrowseRequest{})
	if err != nil || len(page.Messages) != 3 || page.Messages[0].FailureReason != broker.ReasonConsumerDisconnected {
		t.Fatalf("%v %+v", err, page)
	}
}

// A consumer that stops reading holds the broker to its credit: nothing
// more is leased for it, however many messages wait.
func TestStalledConsumerIsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", nil)
	pub := e.publisher()
	var fs []*stream.Confirm
	for range 100 {
		msgs := make([]*streampb.Envelope, 10)
		for j := range msgs {
			msgs[j] = &streampb.Envelope{Body: strings.Repeat("b", 1000)}
		}
		fs = append(fs, pub.PublishAsync("jobs", msgs...))
	}
	for _, f := range fs {
		if _, err := f.Wait(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	api := rawClient(t, e.b.URL)
	st, err := api.Consume(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Open, then never read.
	if err := st.Send(&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Open{Open: &streampb.Open{Queue: "jobs", Credit: 40}}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the stream's credit is used", func() bool {
		infos, err := e.b.Front.Consumers(e.ctx, "jobs")
		return err == nil && len(infos) == 1 && infos[0].Held == 40
	})
	// A second stream gets the rest: the first one's credit is what it
	// holds, no more.
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: 100})
	for range 960 {
		m, err := con.Receive(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := con.Ack(e.ctx, m.GetReceipt()); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := e.b.Front.Consumers(e.ctx, "jobs")
	if err != nil || len(infos) != 2 || infos[0].Held != 40 {
		t.Fatalf("%v %+v", err, infos)
	}
	_, qs, err := e.b.Front.Stats(e.ctx, "jobs")
	if err != nil || qs.InFlight != 40 || qs.Visible != 0 {
		t.Fatalf("%v %+v", err, qs)
	}
}

// A producer that never reads its confirms is held back: the broker stops
// reading its stream after a bounded number of sends, so neither its
// memory nor the queue takes everything the producer would write.
func TestStalledProducerIsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", nil)
	api := rawClient(t, e.b.URL)
	st, err := api.Publish(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	const tries = 20000
	var written int
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for i := range tries {
			// Each confirm is larger than its send, so the confirms
			// fill the connection's windows first.
			err := st.Send(&streampb.PublishRequest{Seq: uint64(i), Queue: "jobs", Messages: []*streampb.Envelope{{Body: "x"}}})
			if err != nil {
				return
			}
			written = i + 1
		}
	}()
	testutil.Eventually(t, 30*time.Second, "sends are stored", func() bool {
		_, qs, err := e.b.Front.Stats(e.ctx, "jobs")
		return err == nil && qs.Visible >= 256
	})
	// However long the producer is left writing, what is stored stays far
	// below what it tries (an unbounded broker would take all of it).
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		_, qs, err := e.b.Front.Stats(e.ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		if qs.Visible > tries/2 {
			t.Fatalf("%d sends stored from a producer that reads no confirms", qs.Visible)
		}
		select {
		case <-writer:
			t.Fatalf("all %d sends were written without a confirm read", written)
		case <-time.After(100 * time.Millisecond): // a polling interval, not a wait for a condition
		}
	}
	// Reading the confirms lets it go on.
	for range 300 {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
}

// A thousand idle streams cost the broker little: they open, one of them
// gets a message, and closing them all leaves no goroutine behind.
func TestThousandIdleStreams(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", nil)
	before := runtime.NumGoroutine()
	const n = 1000
	clients := make([]*stream.Client, 4)
	for i := range clients {
		c, err := stream.Dial(e.b.URL, stream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	cons := make([]*stream.Consumer, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range cons {
		wg.Go(func() {
			con, err := clients[i%len(clients)].Consume(e.ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 1})
			if err != nil {
				errs <- err
				return
			}
			cons[i] = con
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	infos, err := e.b.Front.Consumers(e.ctx, "jobs")
	if err != nil || len(infos) != n {
		t.Fatalf("%v: %d consumers listed", err, len(infos))
	}
	pub := e.publisher()
	if _, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: "one"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "one stream holds the message", func() bool {
		infos, err := e.b.Front.Consumers(e.ctx, "jobs")
		held := 0
		for _, in := range infos {
			held += in.Held
		}
		return err == nil && held == 1
	})
	t.Logf("%d goroutines for %d streams", runtime.NumGoroutine()-before, n)
	for _, con := range cons {
		wg.Go(func() { _ = con.Close() })
	}
	wg.Wait()
	for _, c := range clients {
		_ = c.Close()
	}
	testutil.Eventually(t, 30*time.Second, "the streams' goroutines are gone", func() bool {
		return runtime.NumGoroutine() < before+50
	})
	_, qs, err := e.b.Front.Stats(e.ctx, "jobs")
	if err != nil || qs.Visible != 1 {
		t.Fatalf("the message held by a closed stream: %v %+v", err, qs)
	}
}

// rawClient is the generated client on its own connection, for frames the
// stream client would not send.
func rawClient(t *testing.T, url string) streampb.StreamsClient {
	conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return streampb.NewStreamsClient(conn)
}
