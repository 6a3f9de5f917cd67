// Package client is a Go client for Sluice's native JSON API (/v1/): typed
// calls with a context and functional options for sending, receiving, the
// consumer controls (ack, nack, extend, snooze, release, dead-letter now),
// queue administration, browsing and dead-letter replay.
//
// Errors are typed values: every error the broker answers is an *Error whose
// Code is the API's code, and errors.Is matches it against the sentinels
// (ErrQueueNotFound, ErrQueueFull, ...). Throttling (429) and server errors
// (5xx) are retried with exponential backoff and jitter.
//
// The package imports neither the broker nor any storage driver: a program
// that only talks to a broker pulls in net/http and encoding/json.
package client
