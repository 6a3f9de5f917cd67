package stream_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/auth"
	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/client"
	"github.com/sluicemq/sluice/client/stream"
	"github.com/sluicemq/sluice/internal/testbroker"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
)

// env is a broker (embedded store, the real server on 127.0.0.1:0) and a
// stream client connected to its port.
type env struct {
	t   *testing.T
	b   *testbroker.Broker
	c   *stream.Client
	ctx context.Context
}

func setup(t *testing.T, cfg testbroker.Config, opts stream.Options) *env {
	t.Helper()
	b := testbroker.Start(t, cfg)
	c, err := stream.Dial(b.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, b: b, c: c, ctx: ctx}
}

func (e *env) queue(name string, attrs map[string]string) {
	e.t.Helper()
	if _, err := e.b.Front.CreateQueue(e.ctx, name, attrs, nil); err != nil {
		e.t.Fatal(err)
	}
}

// publisher opens a publisher stream; the caller closes it.
func (e *env) publisher() *stream.Publisher {
	e.t.Helper()
	pub, err := e.c.Publisher(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return pub
}

func (e *env) consume(o stream.ConsumeOptions) *stream.Consumer {
	e.t.Helper()
	con, err := e.c.Consume(e.ctx, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = con.Close() })
	return con
}

// reason is the native code a stream's status carries.
func reason(err error) (codes.Code, string) {
	st, ok := status.FromError(err)
	if !ok {
		return codes.Unknown, ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

// The whole path on one port: publish confirms, pushed deliveries, acks.
func TestPublishConsumeAck(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", nil)
	pub := e.publisher()
	defer pub.Close(e.ctx)
	const n = 500
	confirms := make([]*stream.Confirm, n)
	for i := range confirms {
		prio := int32(i % 3)
		confirms[i] = pub.PublishAsync("jobs", &streampb.Envelope{Body: fmt.Sprintf("job %d", i), Priority: &prio,
			Attributes: map[string]*streampb.Attribute{"kind": {Type: "String", StringValue: "k"}, "blob": {Type: "Binary", BinaryValue: []byte{0, 1, 2}}}})
	}
	ids := map[string]bool{}
	for i, f := range confirms {
		res, err := f.Wait(e.ctx)
		if err != nil || len(res) != 1 || res[0].Err != nil || res[0].MessageID == "" {
			t.Fatalf("send %d: %v %+v", i, err, res)
		}
		ids[res[0].MessageID] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct ids for %d sends", len(ids), n)
	}
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: 50, ClientName: "test-worker"})
	var wg sync.WaitGroup
	got := make(chan *streampb.Message, n)
	for range 8 {
		wg.Go(func() {
			for {
				m, err := con.Receive(e.ctx)
				if err != nil {
					return
				}
				got <- m
				if err := con.Ack(e.ctx, m.GetReceipt()); err != nil {
					t.Errorf("ack: %v", err)
					return
				}
			}
		})
	}
	seen := map[string]bool{}
	for len(seen) < n {
		select {
		case m := <-got:
			if !ids[m.GetId()] || seen[m.GetId()] {
				t.Fatalf("unexpected or repeated message %s", m.GetId())
			}
			if m.GetAttributes()["kind"].GetStringValue() != "k" || string(m.GetAttributes()["blob"].GetBinaryValue()) != "\x00\x01\x02" || m.GetAttempts() != 1 {
				t.Fatalf("message %+v", m)
			}
			seen[m.GetId()] = true
		case <-e.ctx.Done():
			t.Fatalf("%d of %d messages delivered", len(seen), n)
		}
	}
	// The last acks may still be on their way.
	testutil.Eventually(t, 10*time.Second, "every message acked", func() bool {
		infos, err := e.b.Front.Consumers(e.ctx, "jobs")
		return err == nil && len(infos) == 1 && infos[0].Acked == n
	})
	_, st, err := e.b.Front.Stats(e.ctx, "jobs")
	if err != nil || st.Visible != 0 || st.InFlight != 0 {
		t.Fatalf("after the acks: %v %+v", err, st)
	}
	infos, err := e.b.Front.Consumers(e.ctx, "jobs")
	if err != nil || len(infos) != 1 || infos[0].ClientName != "test-worker" || infos[0].Held != 0 || infos[0].ID != con.ID() {
		t.Fatalf("consumers: %v %+v", err, infos)
	}
	if err := con.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	wg.Wait()
}

// A stream that ends hands back what it holds at once, as a failed
// attempt with the reason "consumer disconnected"; one that is cut off
// (the client's connection closed) does too.
func TestCloseReleases(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", map[string]string{"VisibilityTimeout": "3600"})
	pub := e.publisher()
	if _, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: "a"}); err != nil {
		t.Fatal(err)
	}
	for round, cut := range []bool{false, true} {
		c := e.c
		if cut {
			var err error
			if c, err = stream.Dial(e.b.URL, stream.Options{}); err != nil {
				t.Fatal(err)
			}
		}
		con, err := c.Consume(e.ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 1})
		if err != nil {
			t.Fatal(err)
		}
		m, err := con.Receive(e.ctx)
		if err != nil || m.GetAttempts() != int32(round+1) {
			t.Fatalf("round %d: %v %+v", round, err, m)
		}
		if cut {
			_ = c.Close()
		} else if err := con.Close(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, "the message is visible again", func() bool {
			_, st, err := e.b.Front.Stats(e.ctx, "jobs")
			return err == nil && st.Visible == 1
		})
		page, err := e.b.Front.Browse(e.ctx, "jobs", model.BrowseRequest{})
		if err != nil || len(page.Messages) != 1 || page.Messages[0].FailureReason != broker.ReasonConsumerDisconnected || page.Messages[0].Attempts != round+1 {
			t.Fatalf("round %d: %v %+v", round, err, page)
		}
	}
}

// Bad input ends the stream with a status in the protocol's shape, or
// fails the one send or settlement, and nothing is lost.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", map[string]string{"MaximumMessageSize": "1024"})
	api := rawClient(t, e.b.URL)
	open := func(first *streampb.ConsumeRequest) error {
		st, err := api.Consume(e.ctx)
		if err != nil {
			return err
		}
		if err := st.Send(first); err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	for _, tc := range []struct {
		name   string
		first  *streampb.ConsumeRequest
		code   codes.Code
		reason string
	}{
		{"unknown queue", &streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Open{Open: &streampb.Open{Queue: "nope"}}}, codes.NotFound, "queue_not_found"},
		{"credit 1e9", &streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Open{Open: &streampb.Open{Queue: "jobs", Credit: 1e9}}}, codes.InvalidArgument, "invalid_parameter"},
		{"lease too long", &streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Open{Open: &streampb.Open{Queue: "jobs", LeaseSeconds: 50000}}}, codes.InvalidArgument, "invalid_parameter"},
		{"no open first", &streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Credit{Credit: &streampb.Credit{Credit: 1}}}, codes.InvalidArgument, "invalid_request"},
		{"empty frame", &streampb.ConsumeRequest{}, codes.InvalidArgument, "invalid_request"},
	} {
		code, why := reason(open(tc.first))
		if code != tc.code || why != tc.reason {
			t.Errorf("%s: %v %q, want %v %q", tc.name, code, why, tc.code, tc.reason)
		}
	}
	// A frame past the limit ends the stream (gRPC's own check).
	pubRaw, err := api.Publish(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = pubRaw.Send(&streampb.PublishRequest{Seq: 1, Queue: "jobs", Messages: []*streampb.Envelope{{Body: strings.Repeat("x", 5<<20)}}})
	if _, err := pubRaw.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("oversized frame: %v", err)
	}

	pub := e.publisher()
	if _, err := pub.Publish(e.ctx, "nope", &streampb.Envelope{Body: "a"}); !hasCode(err, "queue_not_found") {
		t.Errorf("send to an unknown queue: %v", err)
	}
	if _, err := pub.Publish(e.ctx, "jobs"); !hasCode(err, "invalid_parameter") {
		t.Errorf("send of nothing: %v", err)
	}
	// One message too large (the queue takes 1 KiB), one with a bad
	// priority, one good: only the good one is stored.
	bad := int32(1000)
	res, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: strings.Repeat("x", 2000)}, &streampb.Envelope{Body: "p", Priority: &bad}, &streampb.Envelope{Body: "ok"})
	if err != nil || len(res) != 3 || !hasCode(res[0].Err, "invalid_parameter") || res[1].Err == nil || res[2].Err != nil {
		t.Fatalf("mixed send: %v %+v", err, res)
	}

	// Settlements: another stream's receipt, a made-up one, no action.
	e.queue("other", nil)
	if _, err := pub.Publish(e.ctx, "other", &streampb.Envelope{Body: "o"}); err != nil {
		t.Fatal(err)
	}
	a := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: 10})
	o := e.consume(stream.ConsumeOptions{Queue: "other", Credit: 10})
	mine, err := a.Receive(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := o.Receive(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := a.Settle(e.ctx,
		&streampb.Settlement{Receipt: theirs.GetReceipt(), Action: &streampb.Settlement_Ack{Ack: &streampb.Ack{}}},
		&streampb.Settlement{Receipt: "not-a-receipt", Action: &streampb.Settlement_Ack{Ack: &streampb.Ack{}}},
		&streampb.Settlement{Receipt: mine.GetReceipt()},
		&streampb.Settlement{Receipt: mine.GetReceipt(), Action: &streampb.Settlement_Extend{Extend: &streampb.Extend{Seconds: 0}}},
	)
	if err != nil || !hasCode(errs[0], "invalid_parameter") || !hasCode(errs[1], "invalid_receipt") || !hasCode(errs[2], "missing_parameter") || !hasCode(errs[3], "invalid_parameter") {
		t.Fatalf("bad settlements: %v %v", err, errs)
	}
	// Nothing was lost: both messages are still held, and ack.
	if err := a.Ack(e.ctx, mine.GetReceipt()); err != nil {
		t.Fatalf("ack mine: %v", err)
	}
	if err := o.Ack(e.ctx, theirs.GetReceipt()); err != nil {
		t.Fatalf("ack theirs: %v", err)
	}
	// A credit out of range on a live stream ends it.
	if err := a.SetCredit(5); err != nil {
		t.Fatal(err)
	}
	st, err := api.Consume(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Open{Open: &streampb.Open{Queue: "jobs", Credit: 1}}})
	if r, err := st.Recv(); err != nil || r.GetOpened() == nil {
		t.Fatalf("open: %v %v", r, err)
	}
	_ = st.Send(&streampb.ConsumeRequest{Kind: &streampb.ConsumeRequest_Credit{Credit: &streampb.Credit{Credit: 20000}}})
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("credit 20000: %v", err)
	}
}

func hasCode(err error, code string) bool {
	var se *stream.Error
	return errors.As(err, &se) && se.Code == code
}

// With access keys a stream needs a bearer token allowed native:write.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	keys, err := auth.NewKeys([]auth.Key{
		{AccessKeyID: "app", SecretAccessKey: "app-secret", Account: "123456789012", Allow: []string{"*"}},
		{AccessKeyID: "viewer", SecretAccessKey: "viewer-secret", Account: "123456789012", Allow: []string{"read-only"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, testbroker.Config{Server: func(c *server.Config) { c.Keys = keys }}, stream.Options{Token: "app:app-secret"})
	admin, err := client.New(e.b.URL, client.WithToken("app", "app-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateQueue(e.ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: 1})
	pub := e.publisher()
	if _, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := con.Receive(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token  string
		code   codes.Code
		reason string
	}{
		{"", codes.Unauthenticated, "unauthenticated"},
		{"app:wrong", codes.Unauthenticated, "signature_mismatch"},
		{"nobody:x", codes.Unauthenticated, "invalid_key"},
		{"viewer:viewer-secret", codes.PermissionDenied, "access_denied"},
	} {
		c, err := stream.Dial(e.b.URL, stream.Options{Token: tc.token})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Consume(e.ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 1})
		if code, why := reason(err); code != tc.code || why != tc.reason {
			t.Errorf("token %q: %v %q (%v)", tc.token, code, why, err)
		}
		_ = c.Close()
	}
}

// Over TLS the streams share the HTTPS port with the HTTP APIs.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t)
	cert, key := ca.Issue(t, "localhost")
	b := testbroker.Start(t, testbroker.Config{Server: func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = cert, key }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Front.CreateQueue(ctx, "jobs", nil, nil); err != nil {
		t.Fatal(err)
	}
	url := "https://" + strings.TrimPrefix(strings.TrimPrefix(b.URL, "http://"), "https://")
	c, err := stream.Dial(url, stream.Options{TLS: &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pub, err := c.Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, "jobs", &streampb.Envelope{Body: "over tls"}); err != nil {
		t.Fatal(err)
	}
	con, err := c.Consume(ctx, stream.ConsumeOptions{Queue: "jobs", Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := con.Receive(ctx)
	if err != nil || m.GetBody() != "over tls" {
		t.Fatalf("%v %+v", err, m)
	}
	if err := con.Ack(ctx, m.GetReceipt()); err != nil {
		t.Fatal(err)
	}
	_ = con.Close()
}

// The server's shutdown ends the streams with Unavailable; the messages
// they held keep their leases, so a handler that finishes can still ack
// through the plain API until the lease ends.
// Over TLS too, where gRPC streams are HTTP/2 requests of the HTTP server.
func TestShutdownDetaches(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		testShutdownDetaches(t, setup(t, testbroker.Config{}, stream.Options{}))
	})
	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		ca := testutil.NewCA(t)
		cert, key := ca.Issue(t, "localhost")
		b := testbroker.Start(t, testbroker.Config{Server: func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = cert, key }})
		c, err := stream.Dial("https://"+strings.TrimPrefix(b.URL, "http://"), stream.Options{TLS: &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		testShutdownDetaches(t, &env{t: t, b: b, c: c, ctx: ctx})
	})
}

func testShutdownDetaches(t *testing.T, e *env) {
	e.queue("jobs", map[string]string{"VisibilityTimeout": "3600"})
	pub := e.publisher()
	if _, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: "a"}); err != nil {
		t.Fatal(err)
	}
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: 1})
	m, err := con.Receive(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.b.Server.Stop(e.ctx); err != nil {
		t.Fatal(err)
	}
	<-con.Done()
	if code, why := reason(con.Err()); code != codes.Unavailable || why != "unavailable" {
		t.Fatalf("stream ended with %v", con.Err())
	}
	_, st, err := e.b.Front.Stats(e.ctx, "jobs")
	if err != nil || st.InFlight != 1 {
		t.Fatalf("after shutdown: %v %+v", err, st)
	}
	res, err := e.b.Front.Delete(e.ctx, "jobs", []model.DeleteEntry{{ID: "a", Receipt: m.GetReceipt()}})
	if err != nil || res[0] != nil {
		t.Fatalf("ack through the front after shutdown: %v %v", err, res)
	}
}

// Sync's empty frame is answered on a live stream, among settlements sent
// at the same time (the answers are matched by frame), and fails once the
// stream has ended.
func TestSync(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	e.queue("jobs", nil)
	pub := e.publisher()
	defer pub.Close(e.ctx)
	const n = 20
	for i := range n {
		if _, err := pub.Publish(e.ctx, "jobs", &streampb.Envelope{Body: fmt.Sprint("job ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	con := e.consume(stream.ConsumeOptions{Queue: "jobs", Credit: n})
	var wg sync.WaitGroup
	for range n {
		m, err := con.Receive(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := con.Ack(e.ctx, m.GetReceipt()); err != nil {
				t.Errorf("ack: %v", err)
			}
		})
		wg.Go(func() {
			if err := con.Sync(e.ctx); err != nil {
				t.Errorf("sync: %v", err)
			}
		})
	}
	wg.Wait()
	if err := con.SetCredit(0); err != nil {
		t.Fatal(err)
	}
	if err := con.Sync(e.ctx); err != nil {
		t.Fatalf("sync after credit 0: %v", err)
	}
	_, st, err := e.b.Front.Stats(e.ctx, "jobs")
	if err != nil || st.Visible != 0 || st.InFlight != 0 {
		t.Fatalf("after the acks: %+v %v", st, err)
	}
	if err := con.Close(); err != nil {
		t.Fatal(err)
	}
	if err := con.Sync(e.ctx); err == nil {
		t.Fatal("Sync on an ended stream answered nil")
	}
}

// TestSyncIsABarrier: after SetCredit(0), once Sync returns the consumer
// has every message the broker handed its stream: those it took and those
// waiting for Receive are all the stream holds. Large messages make the
// broker send a batch in several frames, and a claim may be under way as
// the credit changes: neither may follow Sync's answer.
func TestSyncIsABarrier(t *testing.T) {
	t.Parallel()
	e := setup(t, testbroker.Config{}, stream.Options{})
	pub := e.publisher()
	defer pub.Close(e.ctx)
	body := strings.Repeat("x", 900<<10)
	for round := range 5 {
		q := fmt.Sprint("big", round)
		e.queue(q, map[string]string{"MaximumMessageSize": "1048576"})
		for range 12 {
			if _, err := pub.Publish(e.ctx, q, &streampb.Envelope{Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		con := e.consume(stream.ConsumeOptions{Queue: q, Credit: 12})
		if _, err := con.Receive(e.ctx); err != nil {
			t.Fatal(err)
		}
		if err := con.SetCredit(0); err != nil {
			t.Fatal(err)
		}
		if err := con.Sync(e.ctx); err != nil {
			t.Fatal(err)
		}
		got := 1
		now, cancel := context.WithCancel(e.ctx)
		cancel()
		for {
			if _, err := con.Receive(now); err != nil {
				break
			}
			got++
		}
		infos, err := e.b.Front.Consumers(e.ctx, q)
		if err != nil || len(infos) != 1 {
			t.Fatalf("round %d: consumers %+v %v", round, infos, err)
		}
		if infos[0].Held != got {
			t.Fatalf("round %d: the broker's stream holds %d messages, the consumer had %d when Sync returned", round, infos[0].Held, got)
		}
		_ = con.Close()
	}
}
