package brokertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicemq/sluice/broker"
	"github.com/sluicemq/sluice/broker/clocktest"
	"github.com/sluicemq/sluice/broker/model"
	"github.com/sluicemq/sluice/broker/storage"
	"github.com/sluicemq/sluice/internal/testutil"
)

// The model-based FIFO test: random histories of sends (single and batch),
// receives, deletes, visibility changes, clock advances, purges, restarts
// and rounds of concurrent sends and receives, each checked against a
// reference model of the FIFO rules:
//
//   - per-group order: a receive takes, from each group it serves, a run from
//     the head of the group's remaining messages;
//   - the group lock: a group with a message in flight is not served, and no
//     group is served by two concurrent receives;
//   - fill: a (sequential) receive of n returns min(n, receivable) messages,
//     and leaves at most one group partly taken ("as many messages of the
//     same group as possible");
//   - dedup: a send whose dedup key (by scope; content-based when no id) is
//     in the 5-minute window is answered with the original id and sequence
//     number and not stored; purge clears the window;
//   - sequence numbers increase with every stored send, across restarts;
//   - receipts: a delete or visibility change with the latest receipt of a
//     leased message applies; a delete with an expired one fails
//     (InvalidParameterValue), with a stale one succeeds without effect;
//   - the approximate counts equal the model's after every step.
//
// It runs with the suite (every backend; restarts use Harness.Reopen and are
// left out when it is nil). Scale: SLUICE_MODEL_CHECKS histories, or
// -rapid.checks / RAPID_CHECKS when given; else fullModelChecks under
// SLUICE_SCALE=full, else Harness.ModelChecks (default
// defaultModelChecks, a few seconds); -rapid.steps sets the average history
// length (30).

// The FIFO model test's histories: at CI scale, and at full scale.
const (
	defaultModelChecks = 15
	fullModelChecks    = 200
)

var modelChecksOnce sync.Once

// setModelChecks sets rapid's number of checks, once per process: from
// SLUICE_MODEL_CHECKS if set, else (unless the user chose one with
// -rapid.checks or RAPID_CHECKS) fullModelChecks under SLUICE_SCALE=full,
// else ci (0: defaultModelChecks).
func setModelChecks(t *testing.T, ci int) {
	modelChecksOnce.Do(func() {
		n := os.Getenv("SLUICE_MODEL_CHECKS")
		if n == "" {
			explicit := os.Getenv("RAPID_CHECKS") != ""
			flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
			if explicit {
				return
			}
			switch {
			case testutil.FullScale():
				ci = fullModelChecks
			case ci <= 0:
				ci = defaultModelChecks
			}
			n = fmt.Sprint(ci)
		}
		if err := flag.Set("rapid.checks", n); err != nil {
			t.Logf("SLUICE_MODEL_CHECKS=%s: %v", n, err)
		}
	})
}

func testFifoModel(t *testing.T, s suite) {
	setModelChecks(t, s.h.ModelChecks)
	rapid.Check(t, func(rt *rapid.T) {
		h := newModelHistory(t, rt, s)
		rt.Repeat(h.actions())
	})
}

// mMsg is a message of the model.
type mMsg struct {
	id, group, seq string
	lease          int       // receives so far: the latest lease's number
	inflight       bool      // leased, until deadline
	deadline       time.Time // end of the latest lease
	deleted        bool
}

// leased reports whether m is in flight at now (the lease ends at its deadline).
func (m *mMsg) leased(now time.Time) bool { return m.inflight && now.Before(m.deadline) }

type mReceipt struct {
	m     *mMsg
	lease int
}

type mDedup struct {
	id, seq string
	expires time.Time
}

// modelHistory is one random history: the backend under test and the model.
type modelHistory struct {
	t       *testing.T
	s       suite
	clock   *clocktest.FakeClock
	opts    storage.Options
	be      storage.Backend
	b       *broker.Broker
	ctx     context.Context
	queue   string
	scope   model.DedupScope
	content bool

	groups   map[string][]*mMsg // each group's remaining messages, in send order
	dedup    map[string]mDedup  // the dedup window by key
	receipts map[string]mReceipt
	handles  []string // every receipt ever returned, to draw from
	ids      map[string]bool
	lastSeq  string
	round    int // concurrent rounds so far (names their groups)
}

func newModelHistory(t *testing.T, rt *rapid.T, s suite) *modelHistory {
	clock := clocktest.NewFakeClock(epoch)
	h := &modelHistory{
		t: t, s: s, clock: clock, opts: storage.Options{Clock: clock}, ctx: context.Background(),
		queue: "model.fifo", groups: map[string][]*mMsg{}, dedup: map[string]mDedup{},
		receipts: map[string]mReceipt{}, ids: map[string]bool{},
	}
	h.be = s.h.Open(t, h.opts)
	rt.Cleanup(func() { _ = h.be.Close() })
	h.b = front(t, h.be, broker.Config{})
	h.scope = rapid.SampledFrom([]model.DedupScope{model.DedupScopeQueue, model.DedupScopeMessageGroup}).Draw(rt, "scope")
	h.content = rapid.Bool().Draw(rt, "contentBased")
	attrs := map[string]string{
		model.AttrFifoQueue: "true", model.AttrDeduplicationScope: string(h.scope),
		model.AttrContentBasedDeduplication: fmt.Sprint(h.content),
	}
	if _, err := h.b.CreateQueue(h.ctx, h.queue, attrs, nil); err != nil {
		rt.Fatalf("CreateQueue: %v", err)
	}
	return h
}

func (h *modelHistory) actions() map[string]func(*rapid.T) {
	a := map[string]func(*rapid.T){
		"send":       h.send,
		"receive":    h.receive,
		"delete":     h.delete,
		"visibility": h.visibility,
		"advance":    h.advance,
		"purge":      h.purge,
		"concurrent": h.concurrent,
		"":           h.checkCounts,
	}
	if h.s.h.Reopen != nil {
		a["restart"] = h.restart
	}
	return a
}

func (h *modelHistory) now() time.Time { return h.clock.Now() }

func (h *modelHistory) dedupKey(group, dedup, body string) string {
	if dedup == "" {
		dedup = model.ContentDedupID(body)
	}
	if h.scope == model.DedupScopeMessageGroup {
		return group + "\x00" + dedup
	}
	return dedup
}

// stored applies a send the backend stored, checking its answer.
func (h *modelHistory) stored(rt *rapid.T, e model.SendEntry, r model.SendResult, key string) {
	if h.ids[r.MessageID] {
		rt.Fatalf("send %q to %s: message id %s reused, want a new message", e.Body, e.GroupID, r.MessageID)
	}
	if h.lastSeq != "" && !seqLess(h.lastSeq, r.SequenceNumber) {
		rt.Fatalf("send %q: SequenceNumber %q not above %q", e.Body, r.SequenceNumber, h.lastSeq)
	}
	h.ids[r.MessageID] = true
	h.lastSeq = r.SequenceNumber
	m := &mMsg{id: r.MessageID, group: e.GroupID, seq: r.SequenceNumber}
	h.groups[e.GroupID] = append(h.groups[e.GroupID], m)
	h.dedup[key] = mDedup{id: r.MessageID, seq: r.SequenceNumber, expires: h.now().Add(model.DedupWindow)}
}

func (h *modelHistory) send(rt *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(rt, "entries")
	dedups := []string{"d0", "d1", "d2"}
	if h.content {
		dedups = append(dedups, "", "")
	}
	entries := make([]model.SendEntry, n)
	for i := range entries {
		entries[i] = model.SendEntry{
			ID:      fmt.Sprint("e", i),
			GroupID: rapid.SampledFrom([]string{"g0", "g1", "g2"}).Draw(rt, "group"),
			DedupID: rapid.SampledFrom(dedups).Draw(rt, "dedup"),
			Body:    rapid.SampledFrom([]string{"b0", "b1", "b2"}).Draw(rt, "body"),
		}
	}
	res, err := h.b.Send(h.ctx, h.queue, entries)
	if err != nil || len(res) != n {
		rt.Fatalf("Send of %d: %d results, %v", n, len(res), err)
	}
	for i, e := range entries {
		r := res[i]
		if r.Err != nil {
			rt.Fatalf("Send entry %d: %v", i, r.Err)
		}
		key := h.dedupKey(e.GroupID, e.DedupID, e.Body)
		if d, ok := h.dedup[key]; ok && h.now().Before(d.expires) {
			if r.MessageID != d.id || r.SequenceNumber != d.seq {
				rt.Fatalf("duplicate send (group %s dedup %q body %s) answered %s/%s, want the original %s/%s",
					e.GroupID, e.DedupID, e.Body, r.MessageID, r.SequenceNumber, d.id, d.seq)
			}
			continue
		}
		h.stored(rt, e, r, key)
	}
}

// receivable returns the groups a receive may serve now and their sizes.
func (h *modelHistory) receivable() map[string]int {
	out := map[string]int{}
	now := h.now()
	for g, ms := range h.groups {
		if len(ms) > 0 && !slices.ContainsFunc(ms, func(m *mMsg) bool { return m.leased(now) }) {
			out[g] = len(ms)
		}
	}
	return out
}

// checkRuns checks that ds takes, from each group it serves, a run from the
// head of that group (which must be in avail), and returns how many it took
// per group.
func (h *modelHistory) checkRuns(rt *rapid.T, ds []model.Delivery, avail map[string]int) map[string]int {
	taken := map[string]int{}
	for _, d := range ds {
		g := d.GroupID
		if _, ok := avail[g]; !ok {
			rt.Fatalf("receive returned %s of group %q, which is locked (a message in flight) or empty", d.ID, g)
		}
		k := taken[g]
		if k >= len(h.groups[g]) || h.groups[g][k].id != d.ID {
			want := "nothing more"
			if k < len(h.groups[g]) {
				want = h.groups[g][k].id
			}
			rt.Fatalf("receive returned %s as message %d of group %q, want %s (order within the group)", d.ID, k, g, want)
		}
		if m := h.groups[g][k]; d.SequenceNumber != m.seq || d.ReceiveCount != m.lease+1 {
			rt.Fatalf("delivery of %s: SequenceNumber %q ReceiveCount %d, want %q and %d", d.ID, d.SequenceNumber, d.ReceiveCount, m.seq, m.lease+1)
		}
		taken[g] = k + 1
	}
	return taken
}

// leaseAll applies a receive of ds with visibility vis to the model.
func (h *modelHistory) leaseAll(ds []model.Delivery, taken map[string]int, vis time.Duration) {
	for _, d := range ds {
		for _, m := range h.groups[d.GroupID][:taken[d.GroupID]] {
			if m.id == d.ID {
				m.lease++
				m.inflight = vis > 0
				m.deadline = h.now().Add(vis)
				h.receipts[d.Receipt] = mReceipt{m: m, lease: m.lease}
				h.handles = append(h.handles, d.Receipt)
			}
		}
	}
}

func (h *modelHistory) receiveReq(rt *rapid.T, minVis int) (int, time.Duration) {
	n := rapid.IntRange(1, 10).Draw(rt, "max")
	vis := time.Duration(rapid.SampledFrom([]int{0, 10, 30, 60}[minVis:]).Draw(rt, "visibility")) * time.Second
	return n, vis
}

func (h *modelHistory) receive(rt *rapid.T) {
	n, vis := h.receiveReq(rt, 0)
	avail := h.receivable()
	ds, err := h.b.Receive(h.ctx, model.ReceiveRequest{Queue: h.queue, MaxMessages: n, Visibility: &vis, WaitTime: dur(0)})
	if err != nil {
		rt.Fatalf("Receive: %v", err)
	}
	taken := h.checkRuns(rt, ds, avail)
	total, partial := 0, 0
	for g, size := range avail {
		total += size
		if taken[g] > 0 && taken[g] < size {
			partial++
		}
	}
	if want := min(n, total); len(ds) != want {
		rt.Fatalf("receive of %d returned %d messages, want %d (receivable groups %v)", n, len(ds), want, avail)
	}
	if partial > 1 {
		rt.Fatalf("receive of %d left %d groups partly taken (%v of %v), want at most one", n, partial, taken, avail)
	}
	h.leaseAll(ds, taken, vis)
}

func (h *modelHistory) drawReceipt(rt *rapid.T) (string, mReceipt) {
	if len(h.handles) == 0 {
		rt.Skip("no receipt yet")
	}
	handle := h.handles[rapid.IntRange(0, len(h.handles)-1).Draw(rt, "receipt")]
	return handle, h.receipts[handle]
}

// current reports whether r is the latest lease of a message still there.
func (r mReceipt) current() bool { return !r.m.deleted && r.m.lease == r.lease }

func (h *modelHistory) delete(rt *rapid.T) {
	handle, r := h.drawReceipt(rt)
	errs, err := h.b.Delete(h.ctx, h.queue, []model.DeleteEntry{{ID: "d", Receipt: handle}})
	if err != nil {
		rt.Fatalf("Delete: %v", err)
	}
	switch {
	case !r.current():
		if errs[0] != nil {
			rt.Fatalf("Delete with a stale receipt of %s: %v, want success without effect", r.m.id, errs[0])
		}
	case !r.m.leased(h.now()):
		if !errors.Is(errs[0], model.ErrInvalidParameterValue) {
			rt.Fatalf("Delete of %s with the receipt of an ended lease: %v, want InvalidParameterValue", r.m.id, errs[0])
		}
	default:
		if errs[0] != nil {
			rt.Fatalf("Delete of leased %s: %v", r.m.id, errs[0])
		}
		r.m.deleted = true
		g := h.groups[r.m.group]
		h.groups[r.m.group] = slices.DeleteFunc(g, func(m *mMsg) bool { return m == r.m })
	}
}

func (h *modelHistory) visibility(rt *rapid.T) {
	handle, r := h.drawReceipt(rt)
	timeout := time.Duration(rapid.SampledFrom([]int{0, 10, 60}).Draw(rt, "timeout")) * time.Second
	errs, err := h.b.ChangeVisibility(h.ctx, h.queue, []model.VisibilityEntry{{ID: "v", Receipt: handle, Timeout: timeout}})
	if err != nil {
		rt.Fatalf("ChangeVisibility: %v", err)
	}
	switch {
	case !r.current():
		if !errors.Is(errs[0], model.ErrInvalidParameterValue) {
			rt.Fatalf("ChangeVisibility with a stale receipt of %s: %v, want InvalidParameterValue", r.m.id, errs[0])
		}
	case !r.m.leased(h.now()):
		if !errors.Is(errs[0], model.ErrMessageNotInflight) {
			rt.Fatalf("ChangeVisibility of %s after its lease ended: %v, want MessageNotInflight", r.m.id, errs[0])
		}
	default:
		if errs[0] != nil {
			rt.Fatalf("ChangeVisibility of leased %s: %v", r.m.id, errs[0])
		}
		r.m.inflight = timeout > 0
		r.m.deadline = h.now().Add(timeout)
	}
}

func (h *modelHistory) advance(rt *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second, 30 * time.Second, 2 * time.Minute, model.DedupWindow - time.Second, model.DedupWindow}).Draw(rt, "advance")
	h.clock.Advance(d)
}

func (h *modelHistory) purge(rt *rapid.T) {
	if rapid.IntRange(0, 3).Draw(rt, "purgeRarely") != 0 {
		rt.Skip("purge drawn rarely")
	}
	if err := h.b.PurgeQueue(h.ctx, h.queue); err != nil {
		rt.Fatalf("PurgeQueue: %v", err)
	}
	for _, ms := range h.groups {
		for _, m := range ms {
			m.deleted = true
		}
	}
	h.groups = map[string][]*mMsg{}
	h.dedup = map[string]mDedup{}
}

func (h *modelHistory) restart(rt *rapid.T) {
	h.be = h.s.h.Reopen(h.t, h.be, h.opts)
	if h.be == nil {
		rt.Fatal("Harness.Reopen returned nil")
	}
	h.b = front(h.t, h.be, broker.Config{})
}

// concurrent runs 2..4 operations at once: receives (visibility >= 10 s),
// and sends of a few messages each to a group of its own with fresh dedup
// ids (so that their interleaving cannot matter to order or dedup). Only
// the rules that hold under any interleaving are checked: each receive takes
// runs from group heads, no group is served twice, sends get fresh ids and
// increasing sequence numbers.
func (h *modelHistory) concurrent(rt *rapid.T) {
	h.round++
	k := rapid.IntRange(2, 4).Draw(rt, "goroutines")
	type op struct {
		recv    bool
		n       int
		vis     time.Duration
		entries []model.SendEntry
		ds      []model.Delivery
		res     []model.SendResult
		err     error
	}
	ops := make([]*op, k)
	for i := range ops {
		o := &op{recv: rapid.Bool().Draw(rt, "isReceive")}
		if o.recv {
			o.n, o.vis = h.receiveReq(rt, 1)
		} else {
			group := fmt.Sprintf("c%d-%d", h.round, i)
			for j := range rapid.IntRange(1, 3).Draw(rt, "entries") {
				o.entries = append(o.entries, model.SendEntry{ID: fmt.Sprint("e", j), GroupID: group,
					DedupID: fmt.Sprintf("%s-%d", group, j), Body: fmt.Sprintf("%s-%d", group, j)})
			}
		}
		ops[i] = o
	}
	avail := h.receivable()
	var wg sync.WaitGroup
	for _, o := range ops {
		wg.Go(func() {
			if o.recv {
				o.ds, o.err = h.b.Receive(h.ctx, model.ReceiveRequest{Queue: h.queue, MaxMessages: o.n, Visibility: &o.vis, WaitTime: dur(0)})
			} else {
				o.res, o.err = h.b.Send(h.ctx, h.queue, o.entries)
			}
		})
	}
	wg.Wait()
	// Sends first: their groups are new, so any receive may have seen them.
	for _, o := range ops {
		if o.recv {
			continue
		}
		if o.err != nil || len(o.res) != len(o.entries) {
			rt.Fatalf("concurrent Send: %d results, %v", len(o.res), o.err)
		}
		prev := ""
		for i, r := range o.res {
			if r.Err != nil {
				rt.Fatalf("concurrent Send entry %d: %v", i, r.Err)
			}
			if prev != "" && !seqLess(prev, r.SequenceNumber) {
				rt.Fatalf("concurrent Send: SequenceNumber %q after %q within one batch", r.SequenceNumber, prev)
			}
			prev = r.SequenceNumber
			if h.ids[r.MessageID] {
				rt.Fatalf("concurrent Send: message id %s reused", r.MessageID)
			}
			h.ids[r.MessageID] = true
			e := o.entries[i]
			h.groups[e.GroupID] = append(h.groups[e.GroupID], &mMsg{id: r.MessageID, group: e.GroupID, seq: r.SequenceNumber})
			h.dedup[h.dedupKey(e.GroupID, e.DedupID, e.Body)] = mDedup{id: r.MessageID, seq: r.SequenceNumber, expires: h.now().Add(model.DedupWindow)}
			avail[e.GroupID] = len(h.groups[e.GroupID])
		}
		if seqLess(h.lastSeq, prev) {
			h.lastSeq = prev
		}
	}
	served := map[string]bool{}
	for _, o := range ops {
		if !o.recv {
			continue
		}
		if o.err != nil {
			rt.Fatalf("concurrent Receive: %v", o.err)
		}
		if len(o.ds) > o.n {
			rt.Fatalf("concurrent Receive of %d returned %d", o.n, len(o.ds))
		}
		taken := h.checkRuns(rt, o.ds, avail)
		for g := range taken {
			if served[g] {
				rt.Fatalf("group %q served by two concurrent receives (its lock was not held)", g)
			}
			served[g] = true
		}
		h.leaseAll(o.ds, taken, o.vis)
	}
}

// checkCounts compares the backend's counts with the model's (after every action).
func (h *modelHistory) checkCounts(rt *rapid.T) {
	var want model.QueueStats
	now := h.now()
	for _, ms := range h.groups {
		for _, m := range ms {
			if m.leased(now) {
				want.InFlight++
			} else {
				want.Visible++
			}
		}
	}
	deadline := time.Now().Add(realTimeout)
	for {
		q, err := h.b.GetQueue(h.ctx, h.queue)
		if err != nil {
			rt.Fatalf("GetQueue: %v", err)
		}
		if counts(q.Stats) == want {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("counts = %+v, the model has %+v", q.Stats, want)
		}
		time.Sleep(pollInterval)
	}
}
