package plan

import (
	"maps"
	"time"

	"github.com/sluicemq/sluice/broker/model"
)

// MovePace is how long a move task waits after moving n messages at rate
// messages per second (rate <= 0: DefaultMoveRate), so that over any whole
// number of steps it moves at most rate messages per second.
func MovePace(n, rate int) time.Duration {
	if rate <= 0 {
		rate = model.DefaultMoveRate
	}
	return time.Duration(n) * time.Second / time.Duration(rate)
}

// MoveChunk is how many messages a move task moves in one step (one store
// write) at rate messages per second: a tenth of a second's worth at most
// 100 and at least 1, so progress shows often and a write stays small.
func MoveChunk(rate int) int {
	if rate <= 0 {
		rate = model.DefaultMoveRate
	}
	return max(1, min(100, rate/10))
}

// MoveWaitRetry is how long a move task whose next message's destination is
// full (MoveWait) waits before its next step.
const MoveWaitRetry = time.Second

// MoveItem is one message of a move task's source as a step of the task
// sees it, under the backend's lock or in its transaction.
type MoveItem struct {
	// Gone: deleted since the task started, or past the source's retention
	// (the sweeper's, not the task's).
	Gone bool
	// Group is the message's FIFO group ("" on a standard queue).
	Group string
	// Held: in flight under a live lease.
	Held bool
	// DeadLetterSource is the queue the message was dead-lettered from.
	DeadLetterSource string
	// Low: the moved message will be of priority below 0 (EditedPriority),
	// which LowPriorityMaxDepth limits.
	Low bool
}

// MoveAction is what a step does with one MoveItem.
type MoveAction uint8

// The move actions.
const (
	// MoveSkip: leave the message in the source (gone, or behind a held
	// message of its group) and go on.
	MoveSkip MoveAction = iota
	// MoveHold: the message is held by a consumer: it stays, and so does
	// every later message of its group (the walk remembers the group).
	MoveHold
	// MoveOut: move the message to the target the walk names.
	MoveOut
	// MoveFail: the message has no live target: end the task FAILED with
	// MoveTaskFailureNoQueue after the messages moved before it.
	MoveFail
	// MoveWait: the message's target is full (AdmitSend refuses one more):
	// end this step before it; the message and every later one stay for a
	// later step, MoveWaitRetry from now, so the move order holds.
	MoveWait
)

// MoveWalk is the rule of a move step, shared by every backend: it decides,
// message by message in move order (oldest first), what happens to each. It
// holds the FIFO groups blocked so far, which a backend keeps with the task
// (durably) so that a later step, even after a restart, keeps them blocked.
type MoveWalk struct {
	// Source is the task's source queue and Destination its fixed
	// destination ("" = each message's DeadLetterSource).
	Source, Destination string
	// Blocked are the groups with a message that stayed (MoveHold).
	Blocked map[string]bool
	// Live reports whether a live queue of the given name exists (only
	// asked for a message's DeadLetterSource when Destination is "").
	Live func(name string) bool
	// Depth, when not nil, gives a target's settings and its depth
	// (QueueStats.Depth) counting the messages this step already moved
	// there; a MoveOut that AdmitSend would refuse becomes MoveWait.
	Depth func(target string) (model.QueueConfig, int64)
}

// Next decides what happens to it and, for MoveOut, names the target queue.
func (w *MoveWalk) Next(it MoveItem) (MoveAction, string) {
	switch {
	case it.Gone:
		return MoveSkip, ""
	case it.Group != "" && w.Blocked[it.Group]:
		return MoveSkip, ""
	case it.Held:
		if it.Group != "" {
			if w.Blocked == nil {
				w.Blocked = map[string]bool{}
			}
			w.Blocked[it.Group] = true
		}
		return MoveHold, ""
	case w.Destination != "":
		return w.admit(it, w.Destination)
	case it.DeadLetterSource == "" || it.DeadLetterSource == w.Source || w.Live == nil || !w.Live(it.DeadLetterSource):
		return MoveFail, ""
	}
	return w.admit(it, it.DeadLetterSource)
}

// admit is the backpressure check of a MoveOut to target.
func (w *MoveWalk) admit(it MoveItem, target string) (MoveAction, string) {
	if w.Depth != nil {
		c, depth := w.Depth(target)
		low := 0
		if it.Low {
			low = 1
		}
		if AdmitSend(c, target, depth, 1, low) != nil {
			return MoveWait, target
		}
	}
	return MoveOut, target
}

// ApplyEdit is what an edit-and-replay (MoveTaskRequest.Edit) makes of one
// moved message bound for a queue with settings c: its body and attributes
// with e applied, and its Sluice options (MessageOptions: the ones it had,
// opts, unless its attributes are replaced, when they are read from the new
// ones; a Sluice.CorrelationId the new ones do not name is kept). A nil e
// changes nothing and checks nothing, as a plain move. An
// edited message larger than c's MaximumMessageSize, or whose new Sluice.*
// attributes c refuses (Sluice.MaxAttempts without a RedrivePolicy), gives
// an error: the message is not moved; it stays in the source and the task
// counts it in MoveTask.Skipped (it goes on with the other messages).
func ApplyEdit(e *model.MessageEdit, c model.QueueConfig, body string, attrs map[string]model.MessageAttribute, opts model.MessageOptions) (string, map[string]model.MessageAttribute, model.MessageOptions, error) {
	if e == nil {
		return body, attrs, opts, nil
	}
	if e.Body != nil {
		body = *e.Body
	}
	if e.Attributes != nil {
		// A replayed message keeps its correlation id: an edit that does
		// not name one carries the original's over.
		cid, had := attrs[model.MsgAttrCorrelationID]
		attrs = e.Attributes
		if _, named := attrs[model.MsgAttrCorrelationID]; had && !named {
			attrs = maps.Clone(attrs)
			attrs[model.MsgAttrCorrelationID] = cid
		}
		opts = model.ParseMessageOptions(attrs)
		if err := CheckOptions(c, attrs, opts); err != nil {
			return "", nil, model.MessageOptions{}, err
		}
	}
	if size := model.MessageSize(body, attrs); c.MaxMessageSize > 0 && size > c.MaxMessageSize {
		return "", nil, model.MessageOptions{}, model.Errorf(model.ErrInvalidParameterValue, "The edited message is %d bytes; its destination's MaximumMessageSize is %d.", size, c.MaxMessageSize)
	}
	return body, attrs, opts, nil
}

// EditedPriority is the priority a message of priority old has after the
// edit e: the edited attributes' Sluice.Priority (0 without one), or old
// when e does not replace the attributes. An invalid value reads as old (the
// message is skipped anyway: ApplyEdit refuses it).
func EditedPriority(e *model.MessageEdit, old int) int {
	if e == nil || e.Attributes == nil {
		return old
	}
	a, ok := e.Attributes[model.MsgAttrPriority]
	if !ok {
		return 0
	}
	n, err := model.OptInt(model.MsgAttrPriority, a, model.MinPriority, model.MaxPriority)
	if err != nil {
		return old
	}
	return n
}
