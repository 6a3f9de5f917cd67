package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/server"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// servedName is the common name of the certificate the server presents to
// a new connection.
func servedName(t *testing.T, addr string, ca *testutil.CA) string {
	t.Helper()
	name, err := ca.ServedName(addr)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	return name
}

// TestTLSServesSDKAndReloads: with a certificate and key the server speaks
// HTTPS only; an AWS SDK that trusts the private CA works through it and is
// given https queue URLs; ReloadTLS serves a new pair to new connections,
// and a reload of a broken pair keeps the one in use.
func TestTLSServesSDKAndReloads(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t)
	certFile, keyFile := ca.Issue(t, "first")
	e := setup(t, func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	addr := e.srv.Addr().String()
	base := "https://" + addr

	// Set the HTTP client on the SQS options (config.WithHTTPClient is not
	// used: it would read AWS_CA_BUNDLE from the environment).
	hc := &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}})}
	defer hc.CloseIdleConnections()
	client := awssqs.New(awssqs.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(base),
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:       hc,
		RetryMaxAttempts: 1,
	})
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("secure")})
	if err != nil {
		t.Fatalf("CreateQueue over TLS: %v", err)
	}
	if want := base + "/000000000000/secure"; aws.ToString(q.QueueUrl) != want {
		t.Errorf("QueueUrl %q, want %q", aws.ToString(q.QueueUrl), want)
	}
	if _, err := client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("over tls")}); err != nil {
		t.Fatalf("SendMessage over TLS: %v", err)
	}
	out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "over tls" {
		t.Fatalf("ReceiveMessage over TLS: %v %+v", err, out)
	}

	// Plain HTTP to the TLS port is not served.
	resp, err := http.Get("http://" + addr + "/?Action=ListQueues")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d, want 400", resp.StatusCode)
		}
	}

	if got := servedName(t, addr, ca); got != "first" {
		t.Fatalf("served certificate %q, want first", got)
	}
	ca.Issue(t, "second")
	if err := e.srv.ReloadTLS(); err != nil {
		t.Fatalf("ReloadTLS: %v", err)
	}
	if got := servedName(t, addr, ca); got != "second" {
		t.Fatalf("after ReloadTLS: served certificate %q, want second", got)
	}
	// A broken pair (a key that is not PEM) is refused; the served pair stays.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.ReloadTLS(); err == nil {
		t.Fatal("ReloadTLS of a broken key: nil error")
	}
	if got := servedName(t, addr, ca); got != "second" {
		t.Fatalf("after a failed ReloadTLS: served certificate %q, want second", got)
	}
	// The SDK still works on a new connection.
	hc.CloseIdleConnections()
	if _, err := client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("secure")}); err != nil {
		t.Fatalf("GetQueueUrl after the reloads: %v", err)
	}
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	c := server.DefaultConfig()
	c.TLSCertFile = "cert.pem"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "TLSKeyFile") {
		t.Errorf("a certificate without a key: %v, want an error naming TLSKeyFile", err)
	}
	ca := testutil.NewCA(t)
	certFile, _ := ca.Issue(t, "x")
	c.TLSKeyFile = filepath.Join(ca.Dir, "missing.pem")
	c.TLSCertFile = certFile
	backend, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	front, err := broker.New(backend, broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.New(c, front); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("New with a missing key file: %v, want an error naming the file", err)
	}
	plain := setup(t)
	if err := plain.srv.ReloadTLS(); err == nil {
		t.Error("ReloadTLS without TLS: nil error")
	}
}

// TestTLSOffersOnlyAEADSuites: over TLS 1.2 the server agrees to an AEAD
// suite with ECDHE and to nothing else (Go's defaults include CBC suites
// with SHA-1); TLS 1.3 still works.
func TestTLSOffersOnlyAEADSuites(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t)
	certFile, keyFile := ca.Issue(t, "suites")
	e := setup(t, func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	addr := e.srv.Addr().String()
	dial := func(cfg *tls.Config) (tls.ConnectionState, error) {
		cfg.RootCAs, cfg.ServerName = ca.Pool, "127.0.0.1"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer conn.Close()
		return conn.ConnectionState(), nil
	}
	agreed := 0
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			continue
		}
		st, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s.ID}})
		switch aead := slices.Contains(server.AEADCipherSuites, s.ID); {
		case err == nil && !aead:
			t.Errorf("the server agreed to %s over TLS 1.2", s.Name)
		case err == nil:
			agreed++
			if st.CipherSuite != s.ID {
				t.Errorf("offered only %s, got %s", s.Name, tls.CipherSuiteName(st.CipherSuite))
			}
		}
	}
	if agreed == 0 {
		t.Error("no AEAD suite worked over TLS 1.2")
	}
	if st, err := dial(&tls.Config{MinVersion: tls.VersionTLS13}); err != nil || st.Version != tls.VersionTLS13 {
		t.Errorf("TLS 1.3: %v, version %x", err, st.Version)
	}
}
