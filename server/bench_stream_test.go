package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/client/stream"
)

// BenchmarkStreamPublishConsumeAck is BenchmarkHTTPSendReceiveDelete's
// steady durable loop over the stream API: 32 producers publish one
// message at a time on Publish streams, each waiting for its confirm; 32
// consumers (credit 32) ack what they receive in one settlement batch; 8
// streams share a connection. One op is one message published, delivered
// and acked. It reports msgs/s, CPU per message (the whole process, the
// clients included) and WAL syncs per message.
func BenchmarkStreamPublishConsumeAck(b *testing.B) {
	s := startBench(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const workers, perConn, credit = 32, 8, 32
	var conns []*stream.Client
	for range 2 * workers / perConn {
		c, err := stream.Dial(s.url, stream.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	body := strings.Repeat("x", 256)
	var acked atomic.Int64
	total := int64(b.N)
	finished := make(chan struct{})
	var consumers sync.WaitGroup
	for i := range workers {
		cs, err := conns[i/perConn].Consume(ctx, stream.ConsumeOptions{Queue: "bench", Credit: credit, ClientName: fmt.Sprint("c", i)})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		consumers.Go(func() {
			done := func() context.Context { c, stop := context.WithCancel(ctx); stop(); return c }()
			for {
				m, err := cs.Receive(ctx)
				if err != nil {
					return
				}
				acks := []*streampb.Settlement{ack(m.GetReceipt())}
				for len(acks) < credit {
					m, err := cs.Receive(done)
					if err != nil {
						break
					}
					acks = append(acks, ack(m.GetReceipt()))
				}
				if _, err := cs.Settle(ctx, acks...); err != nil {
					return
				}
				if acked.Add(int64(len(acks))) >= total {
					close(finished)
					return
				}
			}
		})
	}
	syncs0, _ := s.backend.Syncs()
	cpu0 := cpuTime()
	b.ResetTimer()
	var sent atomic.Int64
	var producers sync.WaitGroup
	for i := range workers {
		p, err := conns[(workers+i)/perConn].Publisher(ctx)
		if err != nil {
			b.Fatal(err)
		}
		producers.Go(func() {
			defer p.Close(context.Background()) //nolint:errcheck // the benchmark ends
			for sent.Add(1) <= total {
				if _, err := p.Publish(ctx, "bench", &streampb.Envelope{Body: body}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	producers.Wait()
	<-finished
	b.StopTimer()
	cancel()
	consumers.Wait()
	n := float64(b.N)
	b.ReportMetric(float64(cpuTime()-cpu0)/1e3/n, "cpu-us/msg")
	syncs1, _ := s.backend.Syncs()
	b.ReportMetric(float64(syncs1-syncs0)/n, "syncs/msg")
	b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
}

func ack(receipt string) *streampb.Settlement {
	return &streampb.Settlement{Receipt: receipt, Action: &streampb.Settlement_Ack{Ack: &streampb.Ack{}}}
}
