// Package brokertest is the conformance suite that every storage.Backend
// passes (the embedded Pebble backend and the PostgreSQL one). It drives the
// front, broker.Broker, over the backend under test, as every API does, and
// the seam directly where a behaviour is the backend's alone (accounts). A
// behaviour of Sluice exists when this suite tests it.
//
// A backend's test file calls Run with a Harness that opens a fresh, isolated
// backend per subtest:
//
//	func TestConformance(t *testing.T) {
//		brokertest.Run(t, brokertest.Harness{
//			Open: func(t *testing.T, opts storage.Options) storage.Backend { ... },
//			Reopen: func(t *testing.T, b storage.Backend, opts storage.Options) storage.Backend { ... },
//		})
//	}
//
// Time is a *clocktest.FakeClock that the suite owns and advances, so leases,
// delays, long-poll waits and retention are exact and the suite finishes in
// seconds. The suite never sleeps to wait for a condition: it polls with a
// real-time deadline (realTimeout), and watches for a short real time (quiet)
// only to check that something did not happen.
//
// The tests are grouped by concern, one file each: queues.go (create, get,
// list, set, delete, purge), messages.go (send, receive, bodies, attributes,
// sizes, delays, counters), visibility.go (leases, receipts, the in-flight
// cap), longpoll.go (waiting receives and receive parameters), retention.go,
// redrive.go (dead-letter queues), batch.go, restart.go, concurrency.go,
// lifecycle.go, fifo.go, movetask.go (message move tasks) and tags.go
// (tags and policy statements). The Sluice settings beyond SQS (issue 8)
// have their own: retry.go (attempts and the RetryPolicy's backoff),
// deadletter.go (the last attempt and its forensics), consumer.go (nack,
// snooze, release, dead-letter now, extend), depth.go (MaxDepth), pause.go,
// atmostonce.go, priority.go (Sluice.* message options), browse.go (Browse
// and DeleteMessages), longdelay.go (long delays and queue stats),
// sluice_restart.go (that state across restarts) and webhook.go (the
// dead-letter webhooks' outbox events), with their helpers in sluice.go;
// accounts.go (accounts as namespaces, and cross-account grants);
// dedup.go (idempotent sends and unique jobs on standard queues);
// ttl.go (a message's time to live, and its queue's).
// receipts.go checks that receipt handles are signed (issue 12).
package brokertest

import (
	"testing"

	"github.com/sluicemq/sluice/broker/storage"
)

// Harness opens a backend for one subtest.
type Harness struct {
	// Open returns a fresh, isolated backend using opts (opts.Clock is a
	// *clocktest.FakeClock the suite owns; opts.Logger writes to t.Log). The
	// harness closes what it opens, typically with t.Cleanup; Close must be
	// idempotent, since the suite may close a backend itself.
	Open func(t *testing.T, opts storage.Options) storage.Backend
	// Reopen closes b and opens the same storage again (a restart) with opts,
	// returning the new backend. Backends that cannot restart set Reopen nil;
	// the restart tests then skip with a printed reason.
	Reopen func(t *testing.T, b storage.Backend, opts storage.Options) storage.Backend
	// ModelChecks is how many random histories the FIFO model test runs at
	// CI scale (0: 15; a slower store may ask for fewer). SLUICE_MODEL_CHECKS,
	// -rapid.checks or RAPID_CHECKS override it; SLUICE_SCALE=full makes it
	// 200.
	ModelChecks int
	// ArchiveDir returns the archive directory of a backend the harness
	// opened (the retention sweeper writes the expired messages of
	// ArchiveExpired queues there; it stays across Reopen). Nil: the
	// archive cases skip with a printed reason.
	ArchiveDir func(b storage.Backend) string
}

// testCase is one conformance test. It calls s.setup to get its backend.
type testCase struct {
	name string
	run  func(t *testing.T, s suite)
}

// group is the tests of one concern, run as one parallel subtest.
type group struct {
	name  string
	cases []testCase
}

// suite is what a test case needs to set itself up.
type suite struct{ h Harness }

// groups lists every test of the suite; each file contributes one group.
func groups() []group {
	return []group{
		{"Queues", queueTests},
		{"Messages", messageTests},
		{"Visibility", visibilityTests},
		{"LongPoll", longPollTests},
		{"Retention", retentionTests},
		{"Redrive", redriveTests},
		{"Batch", batchTests},
		{"Restart", restartTests},
		{"Concurrency", concurrencyTests},
		{"Lifecycle", lifecycleTests},
		{"FIFO", fifoTests},
		{"MoveTasks", moveTaskTests},
		{"Tags", tagTests},
		{"Retry", retryTests},
		{"DeadLetters", deadLetterTests},
		{"Consumer", consumerTests},
		{"Depth", depthTests},
		{"Pause", pauseTests},
		{"AtMostOnce", atMostOnceTests},
		{"MessageOptions", priorityTests},
		{"Browse", browseTests},
		{"LongDelay", longDelayTests},
		{"Stats", statsTests},
		{"Observe", observeTests},
		{"SluiceRestart", sluiceRestartTests},
		{"Fair", fairTests},
		{"Replay", replayTests},
		{"Webhooks", webhookTests},
		{"Accounts", accountTests},
		{"Receipts", receiptTests},
		{"Streams", streamTests},
		{"Dedup", dedupTests},
		{"RateLimits", rateLimitTests},
		{"TTL", ttlTests},
		{"Schedules", scheduleTests},
		{"JobStatus", jobStatusTests},
		{"Archive", archiveTests},
	}
}

// Run runs the conformance suite against the backends h opens. Every subtest
// runs in parallel on its own backend and its own fake clock.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("brokertest: Harness.Open is nil")
	}
	s := suite{h: h}
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			if len(g.cases) == 0 {
				t.Skipf("no %s tests yet", g.name)
			}
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, s)
				})
			}
		})
	}
}
