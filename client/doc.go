// Package client is a Go client for Sluice's native JSON API (/v1/,
// docs/api.md): typed calls with a context first and functional options
// for the per-call knobs, covering the whole API.
//
//   - Queues: CreateQueue, GetQueue, ListQueues (paged), UpdateQueue,
//     DeleteQueue, PurgeQueue, Pause, Resume, Stats, Consumers (the stream
//     consumers open on a queue; package client/stream opens them).
//   - Producing: Send and SendBatch (the envelope is Message).
//   - Consuming: Receive (MaxMessages, WaitTime, VisibilityTimeout), then the
//     consumer controls on each Delivery's receipt: Ack, Nack, Extend,
//     Snooze, Release, DeadLetter, each with a batch form (AckBatch, ...)
//     that answers one error per entry.
//   - Looking and fixing: Browse (Limit, Cursor, InOrder, WithAttribute,
//     WithAttributeValue, WithReason) answering a Page with its Next,
//     DeleteMessage and DeleteMessages by id; DeadLetters, DeleteDeadLetters,
//     Replay (ReplayIDs, EditBody, EditAttributes, MaxPerSecond) and Replays.
//
// Errors are typed values: every error the broker answers is an *Error
// whose Code is the API's code, and errors.Is matches it against the
// sentinels of errors.go (ErrQueueNotFound, ErrQueueFull, ...). A batch
// answers each failed entry's error as an *Error too.
//
// Requests the broker refused for now (429, or Sluice's own 503
// "unavailable" with its JSON error body) are retried with exponential
// backoff and full jitter, honouring Retry-After: the broker did nothing.
// Ambiguous failures may come after the broker did the work: a broken
// connection, the broker's 500, or a 5xx without Sluice's JSON body (a
// proxy's 502, 503 or 504). Those are retried only for the requests that
// are safe to repeat, and never for Nack, Snooze, Release, DeadLetter,
// deletes, purges or Replay. A send whose messages lack a DedupID is
// retried after a broken connection (it may then be stored twice on a
// standard queue) but not after an ambiguous 5xx. The Client type's
// documentation lists each request.
//
// The package imports neither the broker nor any storage driver: a program
// that only talks to a broker pulls in net/http and encoding/json (a test,
// TestNoBrokerDeps, checks it with go list -deps).
package client
