// Package faultcheck checks a history of queue operations seen by clients
// against the broker's promises, for the fault tests (kill -9 loops,
// database outages): the clients record what they sent and what the broker
// answered, and Check reports every broken promise.
//
// The unit of identity is the key inside a self-checking body (Body), not
// the message id: a send whose answer was lost may be retried and stored
// twice. The checker reads no clock: every event carries the instants the
// client took around its request, so a history can be crafted in a test.
//
// What a lost answer means. A request whose answer never came (the broker
// was killed, the connection cut) may or may not have been applied. The
// checker treats it as unknown, never as a violation: an unanswered send
// may be stored (its message is then expected, not required); an unanswered
// delete may have deleted (its message may be gone); an unanswered
// visibility change may have shortened the lease.
//
// The rules (see Violation.Rule):
//   - lost: a send was acknowledged, and the message was neither deleted
//     (acknowledged or not), nor received during the final drain of every
//     queue (the source and its dead-letter queue).
//   - lease: a message was received while an earlier lease on it was
//     certainly live: the later receive was answered before the earlier
//     lease's earliest possible end (the earlier receive's request start plus
//     its visibility timeout, or the start of a later visibility change plus
//     its timeout), less the slack.
//   - deleted: a message was received by a request sent after a delete of it
//     was acknowledged while the deleting lease was certainly live (a delete
//     with a stale receipt succeeds without effect, as in SQS, so an
//     acknowledged delete proves nothing once the lease may have ended).
//   - unexpected: a body that does not verify (corrupted), or whose key was
//     never sent.
//   - fifo: a message of a FIFO group was received before every earlier
//     message of its group had been received (a group producer sends its
//     messages one after another, each acknowledged before the next).
package faultcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Body returns the self-checking body of key: the key, a SHA-256 of it, and
// padding. Keys must not contain spaces.
func Body(key string) string {
	sum := sha256.Sum256([]byte(key))
	return key + " " + hex.EncodeToString(sum[:8]) + " " + strings.Repeat("x", 64)
}

// Key returns the key of a body made by Body, or false if the body is corrupted.
func Key(body string) (string, bool) {
	key, _, ok := strings.Cut(body, " ")
	if !ok || Body(key) != body {
		return "", false
	}
	return key, true
}

// Violation is one broken promise.
type Violation struct {
	Rule   string // lost, lease, deleted, unexpected, fifo
	Key    string
	Detail string
}

func (v Violation) String() string { return v.Rule + " " + v.Key + ": " + v.Detail }

// Delivery names one receive of one message, for the delete or visibility
// change that follows it.
type Delivery int

// NoDelivery is returned for a body that cannot be checked (corrupted or
// never sent): deleting it is recorded nowhere.
const NoDelivery Delivery = -1

type message struct {
	queue     string
	group     string               // FIFO group, "" on a standard queue
	index     int                  // position in its group
	acked     bool                 // a send of it was acknowledged
	deletes   int                  // deletes sent (answered or not)
	gone      map[string]time.Time // by message id: a delete acknowledged while its lease was certainly live
	drained   bool                 // received during the final drain
	delivered []Delivery
}

type delivery struct {
	key      string
	id       string // the message id: a send retried after a lost answer may store the body twice
	queue    string
	start    time.Time // the receive request was sent
	answered time.Time // its answer came
	leaseLow time.Time // the lease ends no earlier than this
}

type group struct {
	received map[int]bool
	prefix   int // every index below prefix has been received
}

// Checker records a history and checks it. Its methods are safe for
// concurrent use by many clients.
type Checker struct {
	// Slack is subtracted from every lease bound: clocks of the client and
	// of the broker, and the time between a request's start and its arrival.
	slack time.Duration

	mu         sync.Mutex
	msgs       map[string]*message
	deliveries []delivery
	groups     map[string]*group // by queue + "/" + group
	draining   bool
	violations []Violation
	stats      Stats
}

// Stats counts what the history holds.
type Stats struct {
	SendsAcked, SendsUnknown      int
	Receives, Redeliveries        int
	DeletesAcked, DeletesUnknown  int
	VisibilityChanges, DLQArrived int
}

// New returns an empty checker; slack is the tolerance of every lease bound.
func New(slack time.Duration) *Checker {
	return &Checker{slack: slack, msgs: map[string]*message{}, groups: map[string]*group{}}
}

// Sent records a send of key to queue (group "" for a standard queue; index
// its position in a FIFO group) whose answer came (acked) or did not, or was
// an error (acked false: it may still have been stored). Record every
// attempt, answered or not, before the message can be received: call it
// with acked false before the request and again with true after a success.
func (c *Checker) Sent(queue, key, group string, index int, acked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.msgs[key]
	if m == nil {
		m = &message{queue: queue, group: group, index: index}
		c.msgs[key] = m
	}
	if acked && !m.acked {
		m.acked = true
		c.stats.SendsAcked++
	}
}

// StartDrain marks the end of the faults: the receives recorded from now on
// are the final drain, after which Check expects every acknowledged message
// that was not deleted to have been seen.
func (c *Checker) StartDrain() {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
}

// Received records a message received from queue by a request sent at start
// and answered at answered, leased for vis (the queue's visibility timeout or
// the request's), with its message id. dlq says queue is a dead-letter
// queue. It returns the delivery to name in a later Deleted or
// VisibilityChanged.
//
// The lease and deleted rules are per message id: a send whose answer was
// lost and that was sent again may be stored twice, as two messages with one
// body (a dead-letter queue keeps the message id).
func (c *Checker) Received(queue, id, body string, dlq bool, start, answered time.Time, vis time.Duration) Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Receives++
	key, ok := Key(body)
	if !ok {
		c.fail("unexpected", "", fmt.Sprintf("corrupted body %.60q received from %s", body, queue))
		return NoDelivery
	}
	m := c.msgs[key]
	if m == nil {
		c.fail("unexpected", key, "received from "+queue+" but never sent")
		return NoDelivery
	}
	if dlq {
		c.stats.DLQArrived++
	}
	// The lease and deleted rules are checked by Check, over the whole
	// history: the change that ended a lease (a nack) may be recorded after
	// the receive that it allowed.
	if len(m.delivered) > 0 {
		c.stats.Redeliveries++
	}
	// fifo: every earlier message of the group was received before.
	if m.group != "" && !dlq {
		gk := m.queue + "/" + m.group
		g := c.groups[gk]
		if g == nil {
			g = &group{received: map[int]bool{}}
			c.groups[gk] = g
		}
		if m.index > g.prefix {
			c.fail("fifo", key, fmt.Sprintf("message %d of group %s received before message %d", m.index, m.group, g.prefix))
		}
		g.received[m.index] = true
		for g.received[g.prefix] {
			g.prefix++
		}
	}
	if c.draining {
		m.drained = true
	}
	n := Delivery(len(c.deliveries))
	c.deliveries = append(c.deliveries, delivery{key: key, id: id, queue: queue, start: start, answered: answered,
		leaseLow: start.Add(vis)})
	m.delivered = append(m.delivered, n)
	return n
}

// Deleted records a delete of delivery d sent at start; acked says it was
// answered with success at answered (false: no answer, or an error).
func (c *Checker) Deleted(d Delivery, start, answered time.Time, acked bool) {
	if d == NoDelivery {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dl := c.deliveries[d]
	m := c.msgs[dl.key]
	m.deletes++
	if !acked {
		c.stats.DeletesUnknown++
		return
	}
	c.stats.DeletesAcked++
	// Only a delete answered while the lease was certainly live certainly
	// deleted: a stale receipt's delete succeeds without effect.
	if _, ok := m.gone[dl.id]; !ok && answered.Before(dl.leaseLow.Add(-c.slack)) {
		if m.gone == nil {
			m.gone = map[string]time.Time{}
		}
		m.gone[dl.id] = answered
	}
}

// VisibilityChanged records a visibility change of delivery d to timeout,
// sent at start; acked says it succeeded. An acknowledged change sets the
// lease's end; an unanswered one may have (the earliest end is kept).
func (c *Checker) VisibilityChanged(d Delivery, start time.Time, timeout time.Duration, acked bool) {
	if d == NoDelivery {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.VisibilityChanges++
	dl := &c.deliveries[d]
	end := start.Add(timeout)
	if acked || end.Before(dl.leaseLow) {
		dl.leaseLow = end
	}
}

// Stats returns the counts so far.
func (c *Checker) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Check returns every violation: those found while recording, and the lost
// messages (call it after the drain).
func (c *Checker) Check() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]Violation(nil), c.violations...)
	var lost []Violation
	for key, m := range c.msgs {
		out = append(out, c.leaseRules(key, m)...)
		if m.acked && m.deletes == 0 && !m.drained {
			detail := "acknowledged, never deleted, not found by the final drain"
			if len(m.delivered) == 0 {
				detail = "acknowledged, never received"
			}
			lost = append(lost, Violation{Rule: "lost", Key: key, Detail: detail})
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].Key < lost[j].Key })
	return append(out, lost...)
}

// leaseRules checks the lease and deleted rules on the deliveries of one message.
func (c *Checker) leaseRules(key string, m *message) []Violation {
	var out []Violation
	for i, a := range m.delivered {
		d2 := c.deliveries[a]
		// deleted: a delete was acknowledged before this receive was sent.
		if at, ok := m.gone[d2.id]; ok && d2.start.After(at) {
			out = append(out, Violation{"deleted", key, fmt.Sprintf("message %s received from %s at %s, after its delete was acknowledged at %s",
				d2.id, d2.queue, stamp(d2.answered), stamp(at))})
		}
		// lease: an earlier lease certainly still live when this one was given.
		for j, b := range m.delivered {
			d1 := c.deliveries[b]
			if j != i && d1.id == d2.id && !d1.answered.After(d2.answered) && d2.answered.Before(d1.leaseLow.Add(-c.slack)) {
				out = append(out, Violation{"lease", key, fmt.Sprintf("received from %s at %s while its lease from %s (received at %s) lasted until at least %s",
					d2.queue, stamp(d2.answered), d1.queue, stamp(d1.answered), stamp(d1.leaseLow))})
			}
		}
	}
	return out
}

// Unresolved returns how many acknowledged messages the drain has still to
// find: neither deleted (answered or not) nor received during the drain.
func (c *Checker) Unresolved() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if m.acked && m.deletes == 0 && !m.drained {
			n++
		}
	}
	return n
}

func (c *Checker) fail(rule, key, detail string) {
	c.violations = append(c.violations, Violation{rule, key, detail})
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }
