// Package worker runs handlers over messages from a queue: a pool with a
// concurrency limit, prefetch, long polling, lease heartbeats, retries and
// dead letters, and a graceful Shutdown shaped like http.Server's.
//
// Handlers are shaped like net/http's: a Handler interface, HandlerFunc,
// Middleware, typed JSON handlers (JSON[T]) and a Mux that routes on a
// message-type attribute. A pool reads from a Source: NewSource is a Sluice
// broker, over a consumer stream of its stream API by default (package
// client/stream: the broker pushes messages up to the pool's credit and
// keeps their leases alive), or over the native HTTP API with
// WithProtocol(ProtocolHTTP) (package client); package sqssource adapts
// any SQS endpoint through an *sqs.Client, so the same handlers run on
// Sluice and on Amazon SQS.
//
// The package imports neither the broker nor a storage driver (the stream
// client brings gRPC and protobuf); the PostgreSQL pieces (the idempotency
// store) live in subpackages.
package worker
