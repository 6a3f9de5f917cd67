package stream_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/sluicemq/sluice/api/stream/streampb"
	"github.com/sluicemq/sluice/client/stream"
)

// A producer and a worker on the stream API of a broker at
// 127.0.0.1:9324 (sluice serve's default). The producer pipelines 100
// sends and then waits for their confirms; the worker runs 8 handlers over
// one Consume stream that holds up to 16 unsettled messages, acks what they
// did and nacks what failed, until Ctrl-C. docs/streams.md shows this
// example and says what each step does.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := stream.Dial("http://127.0.0.1:9324", stream.Options{
		// Token: "ACCESS_KEY_ID:SECRET_ACCESS_KEY", on a broker with --keys.
		UserAgent: "mailer/1.0",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Produce: each PublishAsync is one send of up to 10 messages; its
	// confirm comes once the send is durable.
	pub, err := c.Publisher(ctx)
	if err != nil {
		log.Fatal(err)
	}
	confirms := make([]*stream.Confirm, 100)
	for i := range confirms {
		confirms[i] = pub.PublishAsync("emails", &streampb.Envelope{Body: fmt.Sprintf("welcome user %d", i)})
	}
	for _, f := range confirms {
		results, err := f.Wait(ctx)
		if err != nil {
			log.Fatal(err) // the whole send was refused, or the stream ended
		}
		for _, r := range results {
			if r.Err != nil {
				log.Printf("not stored: %v", r.Err)
			}
		}
	}
	if err := pub.Close(ctx); err != nil {
		log.Fatal(err)
	}

	// Consume: the broker pushes messages while the stream holds fewer
	// than 16, and keeps their leases alive until they are settled (up to
	// MaxHold, one hour by default).
	con, err := c.Consume(ctx, stream.ConsumeOptions{Queue: "emails", Credit: 16, ClientName: "mailer"})
	if err != nil {
		log.Fatal(reasonOf(err), ": ", err) // e.g. queue_not_found
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				m, err := con.Receive(ctx)
				if err != nil {
					return // Ctrl-C, or the stream ended (con.Err says why)
				}
				// Settlements get a context of their own, so that what a
				// handler finished is settled after Ctrl-C too.
				if err := sendEmail(ctx, m.GetBody()); err != nil {
					// A failed attempt: the queue's RetryPolicy says when it
					// comes back (a delay of -1: none of our own).
					err = con.Nack(context.Background(), m.GetReceipt(), err.Error(), -1)
				} else {
					err = con.Ack(context.Background(), m.GetReceipt())
				}
				if err != nil {
					log.Printf("settle %s: %v", m.GetId(), err)
				}
			}
		})
	}
	wg.Wait()
	// Closing the stream hands back at once, as failed attempts, the
	// messages it still holds: delivered to the stream, not yet settled.
	if err := con.Close(); err != nil {
		log.Print(err)
	}
}

// reasonOf is the native API error code that a stream's end carries: the
// reason of its status's google.rpc.ErrorInfo detail ("" when it has
// none: the connection failed, say).
func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// sendEmail stands for the example's work: an error is a failed attempt.
func sendEmail(ctx context.Context, body string) error {
	_, _ = ctx, body
	return nil
}
