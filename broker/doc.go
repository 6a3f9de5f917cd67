// Package broker is the front: the one type every API and service talks to
// (Broker). It validates and normalizes every request, applies every rule
// that needs no store atomicity (the access rule, the checks of a redrive
// policy or a move task, batch shapes, the answers to lease outcomes), owns
// the error texts of those rules, and hands the storage seam
// (broker/storage.Backend) typed, validated input. It knows nothing of HTTP
// and of no particular store.
//
// The values and value rules are package broker/model's; the rules a backend
// runs inside its atomic step are the planners of broker/internal/plan; the
// backends are broker/embedded and broker/postgres, and broker/brokertest is
// the conformance suite they all pass. docs/architecture.md draws the
// layers, and broker/layers_test.go keeps them.
package broker
