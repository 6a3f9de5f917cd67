package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// nameObserver records the queue names each counter is reported under.
type nameObserver struct {
	mu    sync.Mutex
	names map[model.Counter]map[string]int
}

func (o *nameObserver) Count(queue string, c model.Counter, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.names == nil {
		o.names = map[model.Counter]map[string]int{}
	}
	if o.names[c] == nil {
		o.names[c] = map[string]int{}
	}
	o.names[c][queue] += n
}
func (o *nameObserver) Refused(string, string)    {}
func (o *nameObserver) Synced(time.Duration, int) {}
func (o *nameObserver) of(c model.Counter) map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for k, v := range o.names[c] {
		out[k] = v
	}
	return out
}

// receiveDamaged writes 1000 messages into queue q of the caller of ctx,
// damages a table of the closed store, reopens it with obs and a JSON log
// into logs, and receives until the queue is empty.
func receiveDamaged(t *testing.T, ctx context.Context, obs model.Observer, logs *testutil.Buffer) {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, clock: clocktest.NewFakeClock(t0), dir: dir}
	e.open()
	if _, err := e.b.CreateQueue(ctx, "q", nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i += 10 {
		batch := make([]model.SendEntry, 10)
		for j := range batch {
			batch[j] = model.SendEntry{ID: "e" + itoa(j), Body: "m" + itoa(i+j) + ":" + strings.Repeat("x", 800)}
		}
		if _, err := e.b.Send(ctx, "q", batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.be.Close(); err != nil {
		t.Fatal(err)
	}
	tbl := largestTable(t, dir)
	st, _ := os.Stat(tbl)
	flipByte(t, tbl, st.Size()/2)

	opts := storage.Options{Clock: clocktest.NewFakeClock(t0), Observer: obs,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	b, err := Open(Config{Dir: dir, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f := front(t, b, broker.Config{Logger: opts.Logger, Observer: opts.Observer})
	zero, vis := time.Duration(0), time.Hour
	for range 2000 {
		ds, err := f.Receive(ctx, model.ReceiveRequest{Queue: "q", MaxMessages: 10, Visibility: &vis, WaitTime: &zero})
		if errors.Is(err, errDamagedOnly) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return
		}
	}
}

// TestDamagedLogNamesTheMessageID: the log line of a message set aside
// names its message id (a UUID), so that an operator can find it.
func TestDamagedLogNamesTheMessageID(t *testing.T) {
	t.Parallel()
	var logs testutil.Buffer
	receiveDamaged(t, context.Background(), &nameObserver{}, &logs)
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.Contains(rec["msg"].(string), "set aside, never delivered again") {
			continue
		}
		n++
		if id, _ := rec["message_id"].(string); !uuid.MatchString(id) {
			t.Fatalf("the set-aside log line names message_id %v, want the message's id: %s", rec["message_id"], line)
		}
	}
	if n == 0 {
		t.Fatalf("no message was set aside; logs:\n%s", logs.String())
	}
}

// TestDamagedCountNamesTheAccountsQueue: messages set aside in another
// account's queue are counted under that queue's name
// (<account>/<queue>, as every other counter names it), not under the
// broker's own account's queue of the same name.
func TestDamagedCountNamesTheAccountsQueue(t *testing.T) {
	t.Parallel()
	const account = "222222222222"
	ctx := broker.WithCaller(context.Background(), broker.Caller{Authenticated: true, Account: account})
	obs := &nameObserver{}
	var logs testutil.Buffer
	receiveDamaged(t, ctx, obs, &logs)
	damaged := obs.of(model.CountDamaged)
	if len(damaged) == 0 {
		t.Fatalf("nothing counted as damaged; logs:\n%s", logs.String())
	}
	received := obs.of(model.CountReceived)
	for name := range damaged {
		if name != account+"/q" || received[name] == 0 {
			t.Fatalf("damaged messages counted under %v, received under %v: want both under %q", damaged, received, account+"/q")
		}
	}
}
