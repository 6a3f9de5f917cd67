package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/embedded"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/server"
)

// benchServer is the real server over the embedded backend in a temporary
// directory, and a lean HTTP client speaking AWS JSON 1.0 to it.
type benchServer struct {
	b        *testing.B
	backend  *embedded.Backend
	url      string
	queueURL string
	client   *http.Client
}

func startBench(b *testing.B) *benchServer {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	backend, err := embedded.Open(embedded.Config{Dir: b.TempDir(), Options: storage.Options{Logger: log}})
	if err != nil {
		b.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = log
	front, err := broker.New(backend, broker.Config{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(cfg, front)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	s := &benchServer{b: b, backend: backend, url: "http://" + srv.Addr().String(), client: &http.Client{Transport: tr}}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
		_ = backend.Close()
	})
	var out struct{ QueueUrl string }
	if err := s.call("CreateQueue", `{"QueueName":"bench"}`, &out); err != nil {
		b.Fatal(err)
	}
	s.queueURL = out.QueueUrl
	return s
}

// call posts one AWS JSON 1.0 request and decodes the answer into out (nil:
// the answer is read and dropped).
func (s *benchServer) call(action, body string, out any) error {
	req, err := http.NewRequest(http.MethodPost, s.url+"/", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", action, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHTTPSendReceiveDelete measures the whole HTTP path of the steady
// durable loop: each worker sends batch messages, receives them and deletes
// them (batch 1: SendMessage, ReceiveMessage, DeleteMessage; batch 10: the
// Batch actions and MaxNumberOfMessages=10), over the real server and the
// embedded backend, 32 workers at once. One op is one message through the
// loop. It reports msgs/s, CPU per message (the whole process: the client's
// work is counted too, roughly a third of it) and WAL syncs per message.
func BenchmarkHTTPSendReceiveDelete(b *testing.B) {
	for _, batch := range []int{1, 10} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := startBench(b)
			body := strings.Repeat("x", 256)
			send := fmt.Sprintf(`{"QueueUrl":%q,"MessageBody":%q}`, s.queueURL, body)
			sendAction, recvBody := "SendMessage", fmt.Sprintf(`{"QueueUrl":%q,"MaxNumberOfMessages":1,"VisibilityTimeout":60}`, s.queueURL)
			if batch > 1 {
				var es []string
				for i := range batch {
					es = append(es, fmt.Sprintf(`{"Id":"e%d","MessageBody":%q}`, i, body))
				}
				sendAction, send = "SendMessageBatch", fmt.Sprintf(`{"QueueUrl":%q,"Entries":[%s]}`, s.queueURL, strings.Join(es, ","))
				recvBody = fmt.Sprintf(`{"QueueUrl":%q,"MaxNumberOfMessages":%d,"VisibilityTimeout":60}`, s.queueURL, batch)
			}
			var msgs atomic.Int64
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			syncs0, _ := s.backend.Syncs()
			cpu0 := cpuTime()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var buf bytes.Buffer
				for pb.Next() {
					if err := s.call(sendAction, send, nil); err != nil {
						b.Error(err)
						return
					}
					var got struct {
						Messages []struct{ ReceiptHandle string }
					}
					if err := s.call("ReceiveMessage", recvBody, &got); err != nil {
						b.Error(err)
						return
					}
					if len(got.Messages) == 0 {
						continue // another worker took them: this loop sends more
					}
					if batch == 1 {
						err := s.call("DeleteMessage", fmt.Sprintf(`{"QueueUrl":%q,"ReceiptHandle":%q}`, s.queueURL, got.Messages[0].ReceiptHandle), nil)
						if err != nil {
							b.Error(err)
							return
						}
					} else {
						buf.Reset()
						fmt.Fprintf(&buf, `{"QueueUrl":%q,"Entries":[`, s.queueURL)
						for i, m := range got.Messages {
							if i > 0 {
								buf.WriteByte(',')
							}
							fmt.Fprintf(&buf, `{"Id":"d%d","ReceiptHandle":%q}`, i, m.ReceiptHandle)
						}
						buf.WriteString("]}")
						if err := s.call("DeleteMessageBatch", buf.String(), nil); err != nil {
							b.Error(err)
							return
						}
					}
					msgs.Add(int64(len(got.Messages)))
				}
			})
			b.StopTimer()
			n := float64(max(msgs.Load(), 1))
			b.ReportMetric(float64(cpuTime()-cpu0)/1e3/n, "cpu-us/msg")
			syncs1, _ := s.backend.Syncs()
			b.ReportMetric(float64(syncs1-syncs0)/n, "syncs/msg")
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
