package live

import (
	"testing"
)

// A stream that reads nothing holds one snapshot, the newest: publishing
// never blocks and never queues.
func TestSlowStreamHoldsOneSnapshot(t *testing.T) {
	t.Parallel()
	l, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ch, unsubscribe := l.subscribe()
	defer unsubscribe()
	var last *snapshot
	for i := 0; i < 1000; i++ {
		last = &snapshot{}
		l.publish(last)
	}
	if len(ch) != 1 || <-ch != last {
		t.Fatalf("the stream holds %d snapshots, want the newest one only", len(ch)+1)
	}
}
