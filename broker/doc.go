// Package broker is the seam between Sluice's protocols and its storage
// backends: the types (QueueConfig, Message, ReceiveRequest, Receipt), the
// typed errors, the Backend interface, the clock, and the pure rules every
// backend shares (attribute parsing and ranges, message validation, MD5s,
// receipt encoding). It knows nothing of HTTP or of any store.
package broker
