package plan

import "github.com/sluicemq/sluice/broker/model"

// AdmitSend is the backpressure rule: a send of n messages (low of them of
// priority below 0) into a queue of the given depth is refused whole when it
// would take the depth past MaxDepth, or, when it holds a low-priority
// message, past LowPriorityMaxDepth. Dead-lettering never asks (it is never
// refused); a move task into a full queue waits (MoveWalk's caller asks).
// A send that stores nothing (n == 0: every entry failed on its own) is
// admitted, so that its entries get their own errors even in a queue past
// its limit (one whose MaxDepth was lowered below its depth).
func AdmitSend(c model.QueueConfig, queue string, depth int64, n, low int) error {
	if n == 0 {
		return nil
	}
	if c.MaxDepth > 0 && depth+int64(n) > c.MaxDepth {
		return &model.DepthError{Queue: queue, Depth: depth, Limit: c.MaxDepth}
	}
	if low > 0 && c.LowPriorityMaxDepth > 0 && depth+int64(n) > c.LowPriorityMaxDepth {
		return &model.DepthError{Queue: queue, Depth: depth, Limit: c.LowPriorityMaxDepth, LowPriority: true}
	}
	return nil
}
