// Package sqssource is a worker.Source over any SQS endpoint (Amazon SQS,
// Sluice's SQS API, another implementation) through the caller's own
// *sqs.Client from aws-sdk-go-v2, so the same handlers run on Sluice and on
// Amazon SQS.
//
//	src, err := sqssource.New(client, queueURL, sqssource.DefaultConfig())
//
// # Building the client
//
// For Amazon SQS, the SDK's usual configuration:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	client := sqs.NewFromConfig(cfg)
//
// For Sluice, point the client at the broker and give it any static
// credentials (Sluice checks signatures only when configured to):
//
//	client := sqs.New(sqs.Options{
//		Region:       "us-east-1",
//		BaseEndpoint: aws.String("http://127.0.0.1:9324"),
//		Credentials:  credentials.NewStaticCredentialsProvider("id", "secret", ""),
//		HTTPClient:   &http.Client{Timeout: 30 * time.Second, Transport: sqssource.Transport(nil)},
//	})
//
// Transport keeps the SDK from losing an answer on a fast endpoint (a local
// broker most of all) and sending the request again: a lost ReceiveMessage
// answer leaves its messages leased, unseen, until their visibility timeout
// ends. Use it on Amazon SQS too.
//
// Set a custom HTTP client on sqs.Options.HTTPClient (or with
// sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.HTTPClient = hc })), not
// with config.WithHTTPClient: when AWS_CA_BUNDLE is set, LoadDefaultConfig
// installs the bundle into the HTTP client and panics on one it did not
// build. Keep the client's timeout above the longest long poll (20 s).
//
// On Amazon SQS the consumer's role needs sqs:ReceiveMessage,
// sqs:DeleteMessage, sqs:ChangeMessageVisibility and sqs:GetQueueAttributes
// on the queue (the last for Backlog and for the RedrivePolicy: without it
// MaxAttempts stays 0 and dead-letter now needs Config.DeadLetterQueueURL),
// and, for dead-letter now, sqs:GetQueueUrl and sqs:SendMessage on the
// dead-letter queue.
//
// # How each outcome maps to SQS
//
// SQS knows delete and visibility changes only; the rest is emulated, and the
// emulation differs from Sluice's native API (worker.NewSource) where SQS
// cannot do better:
//
//   - Ack is DeleteMessage. On a standard queue a delete with a stale
//     receipt (the lease was lost and the message received again) succeeds
//     without effect in SQS and in Sluice: the message is handled again.
//   - Nack without a delay (an ordinary handler error) is a client-side
//     exponential backoff with full jitter through the visibility timeout
//     (Config.Backoff: a delay drawn from [0, min(Base*2^(n-1), Max)] after
//     the n-th receive, default 1 s doubling to 5 min), set with
//     ChangeMessageVisibility. The message stays in flight meanwhile, so
//     SQS's redrive still counts its receives and moves it to the
//     dead-letter queue past maxReceiveCount. The nack's reason is not
//     kept: SQS has no place for it. A nack with a delay (worker.RetryAfter)
//     sets exactly that visibility. On a Sluice queue with a RetryPolicy
//     the end of that visibility counts as a failure and the queue's
//     backoff follows the client's: use Sluice's native source there.
//   - Snooze is ChangeMessageVisibility to the delay. SQS counts the next
//     receive as another one (Sluice's native snooze does not), so a
//     snooze brings a message nearer its maxReceiveCount.
//   - Release (a prefetched message handed back unstarted) is
//     ChangeMessageVisibility to 0; it too counts a receive on SQS.
//   - Dead-letter now is three calls: a ChangeMessageVisibility that
//     proves the lease is still held (a lost lease fails before anything is
//     copied), a SendMessage of a copy to the dead-letter queue, and a
//     DeleteMessage from the source. It is NOT atomic: a crash or error
//     between the send and the delete leaves the message in both queues
//     (it comes back in the source when its lease ends). The copy keeps the
//     body and the message attributes (Sluice.MaxAttempts dropped: it is the
//     source queue's limit; Sluice.Priority dropped on a FIFO dead-letter
//     queue) and gains DeadLetterReasonAttribute with the reason, unless the
//     message has 10 attributes already (SQS's maximum): then the reason is
//     logged instead. Sent to a FIFO dead-letter queue it keeps its group
//     (its id when it has none) and gets its id as deduplication id. The
//     X-Ray AWSTraceHeader system attribute is not carried (see below),
//     and the copy is a new message: a new id, a receive count of 0, a
//     sent time of now (SQS's own redrive keeps these; a client cannot).
//     The dead-letter queue is Config.DeadLetterQueueURL, else the queue's
//     RedrivePolicy target (read once with GetQueueAttributes, resolved with
//     GetQueueUrl, and cached for the Source's life); a queue with neither
//     fails the outcome with ErrNoDeadLetterQueue and the message comes back
//     when its lease ends.
//   - Extend is ChangeMessageVisibilityBatch, 10 receipts a call.
//   - A lease that ended answers worker.ErrLeaseLost (wrapped: use
//     errors.Is); errors.go lists the SQS errors that mean it.
//
// # Receive
//
// Receive asks for every system and message attribute. worker.Message gets
// ReceiveCount and Attempts from ApproximateReceiveCount (SQS has one
// count), MaxAttempts from the RedrivePolicy's maxReceiveCount (a message's
// Sluice.MaxAttempts attribute overrides it), GroupID from MessageGroupId,
// SentAt from SentTimestamp. Like Sluice's native API, it lifts the
// attributes Sluice.Priority, Sluice.CorrelationId, Sluice.MaxAttempts and
// traceparent (the W3C trace context OpenTelemetry's SQS instrumentations
// set) into Priority, CorrelationID, MaxAttempts and TraceContext and leaves
// them out of Attributes. The AWSTraceHeader system attribute (X-Ray's
// format, not W3C's) is ignored. Visibility timeouts and waits are whole
// seconds on SQS: durations are rounded up, and a visibility is at most
// 12 h (MaxVisibility).
package sqssource
