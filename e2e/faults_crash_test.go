package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/testutil"
)

// serialOnly skips t outside the serial tier (SLUICE_SERIAL=1).
func serialOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_SERIAL") != "1" {
		t.Skip("timing-sensitive: runs in the serial tier (SLUICE_SERIAL=1)")
	}
}

// liveBrokers is the set of brokers the load's clients talk to; a slot is
// empty ("") while its broker is down.
type liveBrokers struct {
	mu    sync.Mutex
	urls  []string
	cache clientCache
}

func (b *liveBrokers) set(i int, url string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.urls) <= i {
		b.urls = append(b.urls, "")
	}
	b.urls[i] = url
}

// client returns worker w's client: the broker w, or the next one up.
func (b *liveBrokers) client(w int, proto string) wireClient {
	b.mu.Lock()
	var url string
	for k := 0; k < len(b.urls) && url == ""; k++ {
		url = b.urls[(w+k)%len(b.urls)]
	}
	b.mu.Unlock()
	if url == "" {
		return nil
	}
	return b.cache.get(url, proto)
}

// TestSerialCrashLoopEmbedded runs the mixed load of both SQS protocols
// (faults_load_test.go) against the real binary on its embedded store,
// kill -9s it at a random moment, restarts it on the same data directory,
// and repeats; then drains every queue and checks the history
// (internal/faultcheck): nothing acknowledged lost, no delivery during a
// live lease, no acknowledged delete undone, nothing unexpected, FIFO groups
// in order. SLUICE_CRASH_CYCLES sets the kills (default 2; 20 under
// SLUICE_SCALE=full).
func TestSerialCrashLoopEmbedded(t *testing.T) {
	serialOnly(t)
	cycles := testutil.Scale(t, "SLUICE_CRASH_CYCLES", 2, 20, 1)
	dir := t.TempDir()
	ctx := ctxT(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	l := newFaultLoad(seed)
	live := &liveBrokers{}
	started := time.Now()
	for cycle := 0; cycle < cycles; cycle++ {
		p := startBroker(t, dir)
		if cycle == 0 {
			l.createQueues(t, ctx, p.URL)
		}
		live.set(0, p.URL)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { l.run(runCtx, live.client); close(done) }()
		before := l.sends.Load()
		testutil.Eventually(t, 30*time.Second, "sends in this cycle", func() bool { return l.sends.Load() >= before+30 })
		time.Sleep(time.Duration(200+rng.IntN(2500)) * time.Millisecond) // the random kill moment, not a wait for a condition
		p.kill()
		live.set(0, "")
		stop()
		<-done
		t.Logf("cycle %d: killed at %s; %d acked sends, %d received so far", cycle, time.Now().Format("15:04:05.000"), l.sends.Load(), l.receives.Load())
	}
	p := startBroker(t, dir)
	dead := l.drain(t, ctx, newJSONClient(p.URL), 60*time.Second)
	if l.chk.Unresolved() > 0 {
		l.dumpQueues(t, p.URL)
	}
	t.Logf("drain took %d messages from the dead-letter queue; whole test %v", dead, time.Since(started).Round(time.Second))
	l.report(t, "embedded crash loop")
}
