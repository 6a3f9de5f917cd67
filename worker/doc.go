// Package worker runs handlers over messages from a queue: a pool with a
// concurrency limit, prefetch, long polling, lease heartbeats, retries and
// dead letters, and a graceful Shutdown shaped like http.Server's.
//
// Handlers are shaped like net/http's: a Handler interface, HandlerFunc,
// Middleware, typed JSON handlers (JSON[T]) and a Mux that routes on a
// message-type attribute. A pool reads from a Source: NewSource is Sluice's
// native API (package client); package sqssource adapts any SQS endpoint
// through an *sqs.Client, so the same handlers run on Sluice and on Amazon
// SQS.
//
// The package imports neither the broker nor a storage driver; the
// PostgreSQL pieces (the idempotency store) live in subpackages.
package worker
