package loadgen

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkGenerator measures the generator's own cost per message (one
// send, a tenth of a receive of 10 and of a batched delete) against the
// null server, per protocol: what the generator takes from the machine it
// shares with the broker.
func BenchmarkGenerator(b *testing.B) {
	srv := httptest.NewServer(&NullServer{})
	defer srv.Close()
	// The null server speaks AWS JSON only: no query protocol here.
	for _, proto := range []string{ProtocolJSON, ProtocolSDK} {
		b.Run(proto, func(b *testing.B) {
			d, err := NewSQS(SQSConfig{Endpoint: srv.URL, Protocol: proto, Queue: "gen", Conns: 2})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := d.Setup(ctx); err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			p, _ := d.NewProducer(ctx, 0)
			c, _ := d.NewConsumer(ctx, 0)
			body := [][]byte{AppendBody(nil, 1, time.Now(), 256)}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Send(ctx, body); err != nil {
					b.Fatal(err)
				}
				if i%10 == 9 {
					msgs, err := c.Receive(ctx, 10, 0)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Delete(ctx, msgs); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
