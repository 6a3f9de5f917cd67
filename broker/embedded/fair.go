package embedded

import (
	"github.com/sluicemq/sluice/broker/internal/plan"
	"github.com/sluicemq/sluice/broker/model"
)

// Fair queues (the rule: broker/internal/plan/fair.go).
//
// On a standard queue every message has a turn (msg.turn), and the ready
// heap serves (priority desc, turn asc, key). Turns live in memory only:
//
//   - a message takes its turn when it enters the queue (q.add): a send, a
//     dead letter arriving in its DLQ, a message moved by a move task; it
//     keeps it for life (a redelivery, a backoff or a snooze only unplace
//     and place it again);
//   - a claim (claimLocked) moves its level's cursor (plan.AdvanceCursor);
//   - recover adds each queue's messages in key order, which is each
//     tenant's send order, on empty fair state: the turns start again from
//     1, so each tenant's messages keep their relative order and a tenant's
//     first message is among the first turns, as a quiet tenant's is.
//
// State, per priority level (q.fair, nil on FIFO queues): the cursor, and per
// tenant the turn of its latest message and how many of its messages (in
// any state) the queue holds. A tenant's entry goes when its count reaches
// 0 (forget), and a level's when it has no tenant left: there are at most
// as many entries as messages, and each holds one GroupID (≤ 128 bytes),
// shared with the messages' own. Forgetting them is what NextTurn allows
// (an absent tenant takes the cursor's next turn; an absent level starts
// from 0 with nothing to compare against).

// fairLevel is the fair state of one priority level of a queue.
type fairLevel struct {
	cursor  uint64 // the highest turn claimed at this level
	tenants map[string]*tenantTurns
}

// tenantTurns is one tenant's state at one level.
type tenantTurns struct {
	last uint64 // turn of its latest message in the queue
	live int    // its messages in the queue at this level, in any state
}

// newFairState is the fair state of a new or purged queue: nil for FIFO.
func newFairState(c model.QueueConfig) map[int]*fairLevel {
	if c.Fifo {
		return nil
	}
	return map[int]*fairLevel{}
}

// fairInsert gives m (not yet placed) its turn: NextTurn of its tenant's
// latest turn and its level's cursor.
func (q *queue) fairInsert(m *msg) {
	if q.fair == nil {
		return
	}
	lvl := q.fair[int(m.priority)]
	if lvl == nil {
		lvl = &fairLevel{tenants: map[string]*tenantTurns{}}
		q.fair[int(m.priority)] = lvl
	}
	tenant := plan.Tenant(q.Config, m.groupID())
	tt := lvl.tenants[tenant]
	if tt == nil {
		tt = &tenantTurns{}
		lvl.tenants[tenant] = tt
	}
	m.turn = plan.NextTurn(tt.last, lvl.cursor)
	tt.last = m.turn
	tt.live++
}

// fairClaimed advances m's level's cursor: a receive claimed m.
func (q *queue) fairClaimed(m *msg) {
	if lvl := q.fair[int(m.priority)]; lvl != nil {
		lvl.cursor = plan.AdvanceCursor(lvl.cursor, m.turn)
	}
}

// fairDrop counts a forgotten message out of its tenant's state.
func (q *queue) fairDrop(m *msg) {
	lvl := q.fair[int(m.priority)]
	if lvl == nil {
		return
	}
	tenant := plan.Tenant(q.Config, m.groupID())
	tt := lvl.tenants[tenant]
	if tt == nil {
		return
	}
	if tt.live--; tt.live > 0 {
		return
	}
	delete(lvl.tenants, tenant)
	if len(lvl.tenants) == 0 {
		delete(q.fair, int(m.priority))
	}
}
