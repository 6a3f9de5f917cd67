// Package e2e runs the real sluice binary as a separate process and drives it
// with real SQS clients: the tests that prove what unit tests cannot (kill -9
// crashes, restarts, the CLI's lifecycle).
package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/internal/testutil"
	"github.com/sluicemq/sluice/worker/sqssource"
)

// sluiceBin is cmd/sluice, built once per test run.
var sluiceBin = testutil.Binary{Pkg: "../cmd/sluice"}

func TestMain(m *testing.M) {
	code := m.Run()
	sluiceBin.Remove()
	os.Exit(code)
}

// brokerProc is one running sluice process.
type brokerProc struct {
	cmd  *exec.Cmd
	URL  string
	done chan struct{}
	err  error // process exit error, valid after done is closed
}

var listenRE = regexp.MustCompile(`listening on (\S+)`)

// startBroker starts `sluice serve` on a free port with its data in dir and
// waits for it to print its address.
func startBroker(t *testing.T, dir string, extra ...string) *brokerProc {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, extra...)
	cmd := exec.Command(sluiceBin.Path(t), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &brokerProc{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !sent {
				if m := listenRE.FindStringSubmatch(line); m != nil {
					addr <- m[1]
					sent = true
				}
			}
			if testing.Verbose() || !sent {
				t.Logf("sluice: %s", line)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case a := <-addr:
		p.URL = "http://" + strings.TrimPrefix(a, "http://")
	case <-p.done:
		t.Fatalf("sluice exited before listening: %v", p.err)
	case <-time.After(30 * time.Second):
		t.Fatal("sluice did not print its listening address within 30s")
	}
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *brokerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// sqsClient returns an aws-sdk-go-v2 SQS client (JSON protocol) for url, with
// the SDK's checksum validation on and the SDK's standard retryer, over
// sqssource.Transport: without it the SDK loses an answer now and then on a
// fast local connection ("use of closed network connection") and sends the
// request again, which for a receive leaves its messages leased and unseen
// (see Transport).
func sqsClient(url string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:   &http.Client{Timeout: 40 * time.Second, Transport: sqssource.Transport(nil)},
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
