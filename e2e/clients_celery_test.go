package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicemq/sluice/internal/testutil"
)

const celeryDir = "testdata/clients/celery"

// wireLog is a reverse proxy in front of the broker that records the method
// and action of every request, so a test can prove which calls a client sent
// how (kombu sends some as presigned GETs).
type wireLog struct {
	URL  string
	mu   sync.Mutex
	seen map[string]int // "GET DeleteMessage" -> count
}

func startWireLog(t *testing.T, target string) *wireLog {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	w := &wireLog{seen: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		action := r.URL.Query().Get("Action")
		if action == "" {
			if tgt := r.Header.Get("X-Amz-Target"); tgt != "" {
				action = tgt[strings.LastIndex(tgt, ".")+1:]
			} else if r.Method == http.MethodPost {
				// A form body: ParseForm consumes it, so keep a copy for the proxy.
				body, _ := httputil.DumpRequest(r, true)
				if i := strings.Index(string(body), "\r\n\r\n"); i >= 0 {
					raw := string(body[i+4:])
					if v, err := url.ParseQuery(raw); err == nil {
						action = v.Get("Action")
					}
					r.Body = nopCloser{strings.NewReader(raw)}
				}
			}
		}
		w.mu.Lock()
		w.seen[r.Method+" "+action]++
		w.mu.Unlock()
		proxy.ServeHTTP(rw, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	w.URL = "http://" + ln.Addr().String()
	return w
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

func (w *wireLog) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[key]
}

func (w *wireLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.seen))
	for k := range w.seen {
		keys = append(keys, fmt.Sprintf("%s=%d", k, w.seen[k]))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// startCeleryWorker starts `celery worker` (solo pool) and stops it when the
// test ends: SIGTERM for a warm shutdown, SIGKILL after 10 s.
func startCeleryWorker(t *testing.T, env []string) (logPath string) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), "worker.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, debianPython, "-m", "celery", "-A", "sluicetasks", "worker",
		"--pool=solo", "--loglevel=INFO", "--without-heartbeat", "--without-mingle", "--without-gossip")
	cmd.Dir = celeryDir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-done
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("celery worker log:\n%s", lastLines(string(b), 80))
		}
	})
	return logPath
}

// TestClientCelery sends tasks with Celery 5.2 (kombu 5.2's SQS transport,
// Debian's packages, the query protocol) from one process and runs them in a
// worker process; each task writes a file. On a FIFO queue the tasks of one
// group must run in order. Afterwards the queue must be empty: the worker's
// acks reached the broker. (kombu 5.2 acks through boto3, a POST; its
// presigned GET requests come from its asynchronous connection, which the
// kombu-async-get subtest drives directly.)
func TestClientCelery(t *testing.T) {
	t.Parallel()
	needDebianPython(t, "Celery with kombu's SQS transport (Debian python3-celery, python3-kombu, python3-pycurl)",
		"celery", "kombu", "pycurl", "boto3")
	b := startClientBroker(t)
	for _, kind := range []string{"standard", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			if kind == "fifo" {
				clientPart{name: "fifo-celery", fifo: true}.skipMissing(t, b.feats)
			}
			wire := startWireLog(t, b.p.URL)
			prefix := uniquePrefix("celery") + "-"
			queue := "tasks"
			if kind == "fifo" {
				queue = "tasks.fifo"
			}
			hostport := strings.TrimPrefix(wire.URL, "http://")
			env := clientEnv(t,
				"SLUICE_BROKER_URL=sqs://AKIDCELERY:secret@"+hostport,
				"SLUICE_QUEUE_PREFIX="+prefix,
				"SLUICE_QUEUE="+queue,
				"PYTHONPATH="+mustAbs(t, celeryDir),
			)
			outdir := t.TempDir()
			const n = 5
			start := time.Now()
			runClient(t, 2*time.Minute, celeryDir, env, debianPython, "send.py", outdir, strconv.Itoa(n))
			startCeleryWorker(t, env)
			testutil.Eventually(t, 90*time.Second, fmt.Sprintf("the worker to run %d tasks", n), func() bool {
				for i := range n {
					if _, err := os.Stat(filepath.Join(outdir, fmt.Sprintf("done-%d", i))); err != nil {
						return false
					}
				}
				return true
			})
			t.Logf("%d tasks sent and run in %v", n, time.Since(start).Round(time.Millisecond))
			for i := range n {
				got, _ := os.ReadFile(filepath.Join(outdir, fmt.Sprintf("done-%d", i)))
				if want := fmt.Sprintf("payload %d é漢", i); string(got) != want {
					t.Fatalf("task %d wrote %q, want %q", i, got, want)
				}
			}
			order, _ := os.ReadFile(filepath.Join(outdir, "order.log"))
			runs := strings.Fields(string(order))
			if kind == "fifo" && !slices.Equal(runs, []string{"0", "1", "2", "3", "4"}) {
				t.Fatalf("FIFO tasks ran in order %v, want 0..4", runs)
			}
			// The acks reach the broker: the queue empties.
			c := sqsClient(b.p.URL)
			ctx := ctxT(t)
			qu, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(prefix + queue)})
			if err != nil {
				t.Fatalf("GetQueueUrl %s: %v", prefix+queue, err)
			}
			var counts string
			testutil.Eventually(t, 30*time.Second, "the worker's acks to empty the queue", func() bool {
				out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: qu.QueueUrl,
					AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
				if err != nil {
					t.Fatal(err)
				}
				counts = out.Attributes["ApproximateNumberOfMessages"] + "/" + out.Attributes["ApproximateNumberOfMessagesNotVisible"]
				return counts == "0/0"
			})
			if len(runs) != n {
				t.Logf("note: %d task runs for %d tasks (at-least-once redelivery): %v", len(runs), n, runs)
			}
			t.Logf("requests Celery and kombu sent: %s", wire)
			if wire.count("POST ReceiveMessage") == 0 || wire.count("POST DeleteMessage") < n {
				t.Fatalf("expected kombu's receives and acks on the wire; saw %s", wire)
			}
		})
	}
	// kombu's asynchronous connection, the worker's event-loop path, with the
	// calls it sends as presigned GETs.
	t.Run("kombu-async-get", func(t *testing.T) {
		t.Parallel()
		wire := startWireLog(t, b.p.URL)
		// Debian's awscli pulls in python3-awscrt, and with awscrt importable
		// botocore 1.29 signs with the CRT, whose presigner rejects the
		// requests kombu 5.2 builds ("TypeError: List of (name,value) pairs
		// expected"): a client-side incompatibility, not the broker's.
		// botocore's own switch turns the CRT off for this process.
		runClient(t, 2*time.Minute, celeryDir, clientEnv(t, "BOTO_DISABLE_CRT=true"), debianPython,
			"kombu_async.py", wire.URL, uniquePrefix("kombu"))
		t.Logf("requests kombu sent: %s", wire)
		for _, want := range []string{"POST ReceiveMessage", "GET ChangeMessageVisibility",
			"GET GetQueueAttributes", "GET DeleteMessage"} {
			if wire.count(want) == 0 {
				t.Errorf("no %s request on the wire; saw %s", want, wire)
			}
		}
	})
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
